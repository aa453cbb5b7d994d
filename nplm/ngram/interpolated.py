"""The paper's interpolated (deleted-interpolation) trigram, section 4.1:

    p(w_t | w_{t-2}, w_{t-1}) = α0(q_t)/|V| + α1(q_t) p1(w_t) + α2(q_t) p2(w_t | w_{t-1})
                                + α3(q_t) p3(w_t | w_{t-2}, w_{t-1})

p1, p2, p3 are relative frequencies in the training split; q_t = l(freq(w_{t-2}, w_{t-1}))
bins the training frequency of the context, and each bin has its own weights, fitted by EM
on the validation split (`nplm.ngram.mixture`). The paper does not give l; here it is log2 bins:
q = 0 for an unseen context, else 1 + ⌊log2 freq⌋, the last bin open-ended. Where a
context was never followed by a token in training, p3 (or p2) takes the next lower order's
value, so every component stays normalized over the vocabulary.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nplm.ngram import mixture
from nplm.ngram.table import UNSEEN, NgramTable, stream_windows

DEFAULT_BINS = 16  # Contexts seen 2^14 times or more share the last bin.


def frequency_bins(context_counts: np.ndarray, num_bins: int = DEFAULT_BINS) -> np.ndarray:
  """q = 0 for an unseen context, else 1 + ⌊log2 count⌋, capped at num_bins - 1."""
  counts = np.asarray(context_counts, np.int64)
  logs = np.floor(np.log2(np.maximum(counts, 1))).astype(np.int64)
  return np.where(counts > 0, np.minimum(1 + logs, num_bins - 1), 0)


@dataclasses.dataclass(frozen=True, eq=False)
class InterpolatedTrigram:
  table: NgramTable  # Order 3: unigram, bigram and trigram counts.
  boundary_id: int
  num_bins: int
  fitted: mixture.FittedWeights  # Weights [num_bins, 4] for (1/|V|, p1, p2, p3).

  order = 3

  @property
  def vocab_size(self) -> int:
    return self.table.vocab_size

  @property
  def weights(self) -> np.ndarray:
    return self.fitted.weights

  @classmethod
  def fit(cls, train_ids: np.ndarray, valid_ids: np.ndarray, vocab_size: int,
          boundary_id: int, num_bins: int = DEFAULT_BINS,
          max_iterations: int = 500) -> InterpolatedTrigram:
    """Counts on the training split; weights by EM on the validation split."""
    if num_bins < 2:
      raise ValueError(f'num_bins must be at least 2 (unseen and seen contexts), not {num_bins}')
    table = NgramTable.build(train_ids, 3, vocab_size, boundary_id)
    unfitted = mixture.FittedWeights(np.full((num_bins, 4), 0.25), (), np.zeros(num_bins))
    model = cls(table, boundary_id, num_bins, unfitted)
    windows = stream_windows(valid_ids, 3, boundary_id)
    fitted = mixture.fit_weights(model.component_log_probs(windows), model.bins(windows),
                                 num_bins, max_iterations=max_iterations, support=0)
    return dataclasses.replace(model, fitted=fitted)

  def bins(self, windows: np.ndarray) -> np.ndarray:
    """The context-frequency bin q_t of each window's target (any order ≥ 3)."""
    return frequency_bins(self.table.context_counts(np.asarray(windows)[:, -3:], 2),
                          self.num_bins)

  def component_log_probs(self, windows: np.ndarray) -> np.ndarray:
    """[B, 4] log of 1/|V|, p1(w), p2(w | w-1), p3(w | w-2, w-1) for windows [B, ≥3]."""
    windows = np.asarray(windows, np.int64)[:, -3:]
    table, spans = self.table, self.table.span_ids(windows)
    probs = [np.full(len(windows), 1.0 / self.vocab_size)]
    for k in (1, 2, 3):
      gram = spans[3 - k, 3]
      count = np.where(gram != UNSEEN, table.counts[k - 1][np.maximum(gram, 0)], 0)
      if k == 1:
        total = np.full(len(windows), table.counts[0].sum())
      else:
        context = spans[3 - k, 2]
        by_context = table.context_totals(k)
        total = np.where(context != UNSEEN, by_context[np.maximum(context, 0)], 0)
      probs.append(_relative_frequency(count, total, probs[-1]))
    with np.errstate(divide='ignore'):
      return np.log(np.stack(probs, axis=1))

  def log_prob_windows(self, windows: np.ndarray) -> np.ndarray:
    return mixture.mix(self.component_log_probs(windows), self.bins(windows), self.weights)

  def log_prob_split(self, ids: np.ndarray) -> np.ndarray:
    """Per-token log-probabilities of a split, each token once, in order."""
    return self.log_prob_windows(stream_windows(ids, 3, self.boundary_id))

  def log_probs(self, contexts: np.ndarray) -> np.ndarray:
    """The full distribution [B, |V|] after each context [B, 2] (oldest word first): the
    components over a row of the vocabulary per context, each order's seen n-grams put in
    place (NgramTable.next_grams), mixed with the context's bin's weights."""
    contexts = np.asarray(contexts, np.int64)[:, -2:]
    table, shape = self.table, (len(contexts), self.vocab_size)
    probs = [np.full(shape, 1.0 / self.vocab_size)]
    for k in (1, 2, 3):
      context = table.context_ids(contexts, k - 1)
      row, word, gram = table.next_grams(k, context)
      count = np.zeros(shape, table.counts[k - 1].dtype)
      count[row, word] = table.counts[k - 1][gram]
      if k == 1:
        total = np.full(len(contexts), table.counts[0].sum())
      else:
        total = np.where(context != UNSEEN, table.context_totals(k)[np.maximum(context, 0)], 0)
      probs.append(_relative_frequency(count, total[:, None], probs[-1]))
    with np.errstate(divide='ignore'):
      components = np.log(np.stack(probs, axis=-1)).reshape(-1, 4)
    bins = self.bins(np.concatenate([contexts, np.zeros((len(contexts), 1), np.int64)], 1))
    return mixture.mix(components, np.repeat(bins, self.vocab_size),
                       self.weights).reshape(shape)

  def mix_with(self, model_log_probs: dict[str, np.ndarray],
               splits: dict[str, np.ndarray]) -> dict[str, dict]:
    """Another model mixed with this trigram, p = λ(q) p_model + (1 - λ(q)) p_trigram, with
    λ = 0.5, learned, and learned per context-frequency bin (`mixture.mix_ways`).
    `model_log_probs[split]` holds the other model's log p of every token of
    `splits[split]`, in order (`TrainedModel.split_log_probs`)."""
    components, bins = {}, {}
    for split, log_probs in model_log_probs.items():
      windows = stream_windows(splits[split], 3, self.boundary_id)
      if len(log_probs) != len(windows):
        raise ValueError(f'{split}: {len(log_probs)} model log-probs for {len(windows)} tokens')
      components[split] = np.stack([log_probs, self.log_prob_windows(windows)], axis=1)
      bins[split] = self.bins(windows)
    return mixture.mix_ways(components, bins, self.num_bins)


def _relative_frequency(count: np.ndarray, total: np.ndarray, lower: np.ndarray) -> np.ndarray:
  """count / total, or the next lower order's `lower` where the context was never followed."""
  return np.where(total > 0, count / np.maximum(total, 1), lower)


def context_bins(train_ids: np.ndarray, splits: dict[str, np.ndarray], vocab_size: int,
                 boundary_id: int, num_bins: int = DEFAULT_BINS) -> dict[str, np.ndarray]:
  """Per split, each token's frequency bin of its context (w_{t-2}, w_{t-1}) in training: the
  bins of the interpolated trigram, for mixing any two models."""
  table = NgramTable.build(train_ids, 3, vocab_size, boundary_id)
  return {split: frequency_bins(table.context_counts(stream_windows(ids, 3, boundary_id), 2),
                                num_bins)
          for split, ids in splits.items()}
