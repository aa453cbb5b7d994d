"""Mixtures of language models, p(w_t) = Σ_i α_i(q_t) p_i(w_t), with weights fitted by EM.

One algorithm serves both the paper's deleted-interpolation trigram (its components 1/|V|,
unigram, bigram and trigram, section 4.1), the mixture of a neural model with that
trigram (Table 1's "mix") and ensembles of any K models (`nplm mix`). The weights α(q) may
depend on a bin q_t of each token (the training frequency of its context); inputs are
per-token log-probabilities of each component, so any model mixes, whatever head trained
it. Each component is normalized over the vocabulary and the weights of a bin sum to 1, so
the mixture is normalized too.

EM on held-out tokens (Dempster et al. 1977) never lowers their likelihood; the
log-likelihood is concave in the weights, so EM run to convergence finds the best weights,
never worse on those tokens than the best single component (checked at the end, as EM
creeps towards an optimum on the boundary).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nplm.ngram.table import perplexity


def _log_mixture(log_weights: np.ndarray, component_log_probs: np.ndarray) -> np.ndarray:
  """log Σ_i exp(log α_i + log p_i) per token, max-shifted."""
  joint = log_weights + component_log_probs
  top = np.max(joint, axis=1, keepdims=True)
  return (top + np.log(np.sum(np.exp(joint - top), axis=1, keepdims=True)))[:, 0]


def mix(component_log_probs: np.ndarray, bins: np.ndarray, weights: np.ndarray) -> np.ndarray:
  """Per-token log-probabilities of the mixture with weights[bin] (rows sum to 1)."""
  with np.errstate(divide='ignore'):  # A zero weight is a -inf log weight, which is fine.
    log_weights = np.log(np.asarray(weights, np.float64))[np.asarray(bins)]
  return _log_mixture(log_weights, np.asarray(component_log_probs, np.float64))


@dataclasses.dataclass(frozen=True)
class FittedWeights:
  weights: np.ndarray  # [num_bins, K]; a bin without tokens keeps the initial weights.
  log_likelihoods: tuple[float, ...]  # Σ log p of the fitting tokens before each update, then after the last.
  tokens_per_bin: np.ndarray  # [num_bins]

  @property
  def iterations(self) -> int:
    return len(self.log_likelihoods) - 1


def fit_weights(component_log_probs: np.ndarray, bins: np.ndarray | None = None,
                num_bins: int = 1, initial: np.ndarray | None = None,
                max_iterations: int = 500, tolerance: float = 1e-7,
                support: int | None = None) -> FittedWeights:
  """EM for the weights of each bin, from uniform (or `initial`) until the mean log-likelihood
  per token gains less than `tolerance` nats, or after `max_iterations` updates. `support`:
  the one component that never gives a token zero probability (DelInt3's uniform), where
  the others can: no bin's weight for it is set to zero, or a token unseen by the others
  would get none."""
  log_probs = np.asarray(component_log_probs, np.float64)
  tokens, num_components = log_probs.shape
  bins = np.zeros(tokens, np.int64) if bins is None else np.asarray(bins, np.int64)
  if bins.shape != (tokens,) or (tokens and (bins.min() < 0 or bins.max() >= num_bins)):
    raise ValueError(f'bins must be {tokens} integers in [0, {num_bins})')
  if not np.all(np.isfinite(np.max(log_probs, axis=1))):
    raise ValueError('every token needs a component that gives it a non-zero probability')
  weights = (np.full((num_bins, num_components), 1.0 / num_components) if initial is None
             else np.array(initial, np.float64))
  tokens_per_bin = np.bincount(bins, minlength=num_bins)
  history = []
  for _ in range(max_iterations + 1):
    with np.errstate(divide='ignore'):
      log_weights = np.log(weights)[bins]
    log_mixture = _log_mixture(log_weights, log_probs)
    history.append(float(np.sum(log_mixture)))
    if len(history) > 1 and (history[-1] - history[-2]) / max(tokens, 1) < tolerance:
      break
    if len(history) == max_iterations + 1:
      break
    posteriors = np.exp(log_weights + log_probs - log_mixture[:, None])  # E step.
    summed = np.stack([np.bincount(bins, posteriors[:, i], minlength=num_bins)
                       for i in range(num_components)], axis=1)
    occupied = tokens_per_bin > 0
    weights = weights.copy()
    weights[occupied] = summed[occupied] / tokens_per_bin[occupied, None]  # M step.
  weights, final = _best_of_em_and_single_components(log_probs, bins, weights, log_mixture,
                                                     support)
  if final > history[-1]:
    history.append(final)
  return FittedWeights(weights, tuple(history), tokens_per_bin)


def _best_of_em_and_single_components(log_probs, bins, weights, log_mixture, support=None):
  """EM only creeps towards an optimum on the boundary (a component worthless in a bin), so a
  bin keeps one component alone where that fits its tokens better than the EM weights: the
  fit is then never worse than the better component, as the concave optimum would be; with
  a `support` component, only it may stand alone."""
  num_bins, num_components = weights.shape
  per_bin = np.bincount(bins, log_mixture, minlength=num_bins)
  occupied = np.bincount(bins, minlength=num_bins) > 0
  weights = weights.copy()
  for k in range(num_components) if support is None else [support]:
    alone = np.bincount(bins, log_probs[:, k], minlength=num_bins)
    better = occupied & (alone > per_bin)
    weights[better] = np.eye(num_components)[k]
    per_bin = np.where(better, alone, per_bin)
  return weights, float(np.sum(per_bin))


def mix_ways(components: dict[str, np.ndarray], bins: dict[str, np.ndarray],
             num_bins: int) -> dict[str, dict]:
  """K models mixed, p = Σ_i α_i(q) p_i, three ways: 'fixed' α_i = 1/K (with two models, the
  paper's "mix" at λ = 0.5), 'learned' one set of weights and 'binned' one set per bin q,
  both by EM on 'valid'.

  `components[split]` [N, K] holds the K models' log p of every token of a split,
  `bins[split]` [N] each token's bin. Returns per way the weights [bins, K] (one row unless
  binned) and the perplexity of every given split.
  """
  if 'valid' not in components:
    raise ValueError("mixing weights are fitted on the 'valid' split: give its log-probs")
  num_components = components['valid'].shape[1]
  one_bin = {split: np.zeros_like(b) for split, b in bins.items()}
  ways = {
      'fixed': (np.full((1, num_components), 1.0 / num_components), one_bin),
      'learned': (fit_weights(components['valid']).weights, one_bin),
      'binned': (fit_weights(components['valid'], bins['valid'], num_bins).weights, bins),
  }
  return {way: {'weights': weights,
                'ppl': {split: perplexity(mix(components[split], way_bins[split], weights))
                        for split in components}}
          for way, (weights, way_bins) in ways.items()}
