"""Importance sampling of the softmax gradient (Bengio & Senécal 2003;
Bengio & Senécal 2008, section III).

The exact gradient of -log P(w_t | h) is -∂s(w_t) + E_P[∂s(w')]. Its expectation
over P needs all |V| scores, so it is estimated with k words v_i drawn from a proposal Q and
self-normalized weights r_i / Σ_j r_j with r_i = exp(s(v_i)) / Q(v_i) (Bengio & Senécal 2008):
the biased, consistent estimator. The loss below is the one whose gradient is that estimate:

  loss = -s(w_t) + log Ẑ,   Ẑ = exp(s(w_t)) + Σ_{v_i ≠ w_t} exp(s(v_i) - log(k·Q(v_i)))

The target's own term is computed exactly rather than sampled (as in Jean et al. 2015's
sampled softmax); a sample that happens to be the target is then masked out with -inf, or it
would be counted twice. Σ over the other samples estimates Σ_{w ≠ w_t} exp(s(w)) without
bias, so Ẑ → Z and the gradient → the exact one as k grows, and loss ≥ 0 always.

Evaluation is exact: log_prob and log_probs are the full softmax over the same weights.
"""

import jax
import jax.numpy as jnp

from nplm.heads.proposal import Proposal
from nplm.heads.softmax import SoftmaxHead


class ImportanceSamplingHead(SoftmaxHead):
  """Trains the softmax's weights on k samples from Q shared by the minibatch."""
  proposal: Proposal = None
  num_samples: int = 100

  knobs = Proposal.knobs
  config_errors = Proposal.config_errors

  def scores_per_example(self, training: bool, batch: int | None, shards: int) -> int:
    """In training, the target's score and the k shared samples'."""
    if training:
      return self.num_samples + 1
    return super().scores_per_example(training, batch, shards)

  @classmethod
  def from_config(cls, config, counts, input_width: int) -> 'ImportanceSamplingHead':
    return cls(vocab_size=len(counts), input_width=input_width,
               proposal=Proposal.from_counts(counts, config.proposal_power),
               num_samples=config.num_samples)

  def loss(self, hidden: jnp.ndarray, targets: jnp.ndarray, rng=None) -> jnp.ndarray:
    samples = self.proposal.sample(rng, self.num_samples)  # v_1 … v_k ~ Q
    target_scores, sample_scores = self.output.score_each_and_shared(hidden, targets, samples)
    # s(v_i) - log(k Q(v_i)): log r_i up to the constant log k; target_scores: s(w_t)
    sample_scores -= self.proposal.log_expected_counts(samples, self.num_samples)
    accidental_hits = samples[None, :] == targets[:, None]
    sample_scores = jnp.where(accidental_hits, -jnp.inf, sample_scores)
    log_z = jax.nn.logsumexp(
        jnp.concatenate([target_scores[:, None], sample_scores], axis=1), axis=1)
    return log_z - target_scores  # Its gradient: the sampled estimate, the target's term exact.
