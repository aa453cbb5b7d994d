"""Noise-contrastive estimation (Gutmann & Hyvärinen 2010; Mnih & Teh 2012,
section 3), and negative sampling (Mikolov et al. 2013b) beside it.

The model learns to tell the observed word from k noise words drawn from Q by a logistic
regression on Δs(w, h) = s(w, h) - log(k·Q(w)) (Mnih & Teh 2012), with the model's scores taken as
self-normalized log-probabilities, exp(z_h) = 1 (Mnih & Teh 2012):

  loss = -log σ(Δs(w_t)) - Σ_i log(1 - σ(Δs(v_i)))      (Gutmann & Hyvärinen 2010)

NCE is consistent: at its optimum exp(s(w, h)) = P(w | h) and the scores are normalized. Yet
they never are exactly, so evaluation never trusts them: log_prob and log_probs are the full
softmax over the same weights, exactly normalized. The output biases start at log Q, which
makes the scores normalized (exp(z_h) = 1) from the first update.

Negative sampling sets k·Q(w) = 1 (Δs = s). It learns good vectors but no language model:
its scores are not log-probabilities, and its exact perplexity is expected to be poor.
"""

import jax
import jax.numpy as jnp
import numpy as np

from nplm.heads.output_layer import OutputLayer
from nplm.heads.proposal import Proposal
from nplm.heads.softmax import SoftmaxHead
from nplm.knobs import Knob


class NCEHead(SoftmaxHead):
  """Trains the softmax's weights to classify data against k noise words, shared by the
  batch or drawn per example."""
  proposal: Proposal = None
  num_samples: int = 100
  negative_sampling: bool = False  # Δs = s instead of s - log(k Q): not a language model.
  noise_per_example: bool = False

  knobs = {
      **Proposal.knobs,
      'noise_per_example': Knob(False, 'k noise words drawn for each example, as word2vec '
                                       'does, not k shared by the minibatch (one dense matmul, '
                                       'but every example meets the same few noise words). '
                                       'cbow and skipgram always draw per example (word2vec\'s '
                                       'own update).'),
  }
  config_errors = Proposal.config_errors

  @classmethod
  def serves_word2vec(cls, name: str) -> bool:
    """Negative sampling is word2vec's own update (Mikolov et al. 2013b); NCE is not."""
    return name == 'negative_sampling'

  def word2vec_output(self) -> tuple[str, tuple]:
    """(the parameter of the output vectors, what word2vec's update reads: k words from
    Q per example; nplm.training.word2vec_update)."""
    return 'output', ('sampled', self.proposal, self.num_samples)

  def scores_per_example(self, training: bool, batch: int | None, shards: int) -> int:
    """In training, the target's score and the k noise words' ((k+1) rows of D+1
    gathered per example with --noise_per_example)."""
    if training:
      samples = self.num_samples + 1
      return samples * (self.input_width + 1) if self.noise_per_example else samples
    return super().scores_per_example(training, batch, shards)

  @classmethod
  def from_config(cls, config, counts, input_width: int) -> 'NCEHead':
    return cls(vocab_size=len(counts), input_width=input_width,
               proposal=Proposal.from_counts(counts, config.proposal_power),
               num_samples=config.num_samples,
               negative_sampling=config.head == 'negative_sampling',
               noise_per_example=config.noise_per_example)

  def setup(self):
    log_unigram = np.log(self.proposal.probs).astype(np.float32)
    self.output = OutputLayer(self.vocab_size, self.input_width,
                              bias_init=lambda *_: jnp.asarray(log_unigram), mesh=self.mesh)

  def _delta(self, scores: jnp.ndarray, words: jnp.ndarray) -> jnp.ndarray:
    if self.negative_sampling:
      return scores
    return scores - self.proposal.log_expected_counts(words, self.num_samples)  # Δs

  def loss(self, hidden: jnp.ndarray, targets: jnp.ndarray, rng=None) -> jnp.ndarray:
    if self.noise_per_example:
      noise = self.proposal.sample(rng, self.num_samples, len(targets))  # [batch, k] ~ Q
      scores = self.output.score_paths(hidden, jnp.concatenate([targets[:, None], noise], 1))
      data_scores, noise_scores = scores[:, 0], scores[:, 1:]
    else:
      noise = self.proposal.sample(rng, self.num_samples)  # ṽ_1 … ṽ_k ~ Q, [k]
      data_scores, noise_scores = self.output.score_each_and_shared(hidden, targets, noise)
    data_delta, noise_delta = self._delta(data_scores, targets), self._delta(noise_scores, noise)
    # -log σ(x) = softplus(-x) and -log(1 - σ(x)) = softplus(x)
    return jax.nn.softplus(-data_delta) + jnp.sum(jax.nn.softplus(noise_delta), axis=1)
