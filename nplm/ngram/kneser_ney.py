"""Interpolated modified Kneser-Ney (Chen & Goodman 1998), the paper's strong baseline.

    p_k(w | h) = [max(a_k(hw) - D_k(a_k(hw)), 0) + γ_k(h) · p_{k-1}(w | h')] / Σ_v a_k(hv)
    γ_k(h)     = D_k(1)·N_1(h•) + D_k(2)·N_2(h•) + D_k(3+)·N_3+(h•)

where h' drops the oldest word of h, a_N are the raw counts of the highest order and a_k
(k < N) the continuation counts N_1+(•hw), the number of distinct words seen before hw. A
context never followed by a token in training leaves p_k = p_{k-1}. The unigrams
interpolate with the uniform 1/|V|, so the model is normalized over the vocabulary exactly.
The discounts of each order come from its count-of-counts n_1 … n_4 of the a_k:
Y = n_1/(n_1 + 2 n_2), D(1) = 1 - 2Y n_2/n_1, D(2) = 2 - 3Y n_3/n_2, D(3+) = 3 - 4Y n_4/n_3.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from nplm.ngram.table import UNSEEN, NgramTable, stream_windows

log = logging.getLogger(__name__)

BLOCK_ROWS = 2 ** 16  # Windows scored together.
# KenLM's --discount_fallback: used where a count-of-counts is zero (tiny corpora).
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)


def modified_discounts(adjusted_counts: np.ndarray) -> tuple[float, float, float] | None:
  """D(1), D(2), D(3+) from the count-of-counts, or None where they are undefined or out of range."""
  n1, n2, n3, n4 = (int(np.sum(adjusted_counts == r)) for r in (1, 2, 3, 4))
  if min(n1, n2, n3, n4) == 0:
    return None
  y = n1 / (n1 + 2 * n2)
  discounts = (1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3)
  if not all(0 < d < r for d, r in zip(discounts, (1, 2, 3))):
    return None
  return discounts


def adjusted_counts(table: NgramTable) -> list[np.ndarray]:
  """a_k per k-gram id, k = 1 … order: continuation counts below the highest order, raw
  counts at it."""
  return [*continuation_counts(table), table.counts[table.order - 1]]


def continuation_counts(table: NgramTable) -> list[np.ndarray]:
  """N_1+(• g) for every k-gram g, k < order: distinct left extensions seen as events."""
  if table.order == 1:
    return []
  suffix = table.lookup(1, None, table.keys[1] % table.vocab_size)  # Suffix of each bigram.
  result = []
  for k in range(1, table.order):
    seen = table.counts[k] > 0  # (k+1)-grams ending at a real token.
    result.append(np.bincount(suffix[seen], minlength=table.num_grams(k)))
    if k + 1 < table.order:  # Suffixes of the (k+2)-grams: suffix(prefix) extended by the word.
      prefix_suffix = suffix[table.prefix(k + 2)]
      suffix = table.lookup(k + 1, prefix_suffix, table.keys[k + 1] % table.vocab_size)
  return result


@dataclasses.dataclass(frozen=True, eq=False)
class KneserNey:
  """A fitted model: per order, the adjusted counts, discounts and per-context sums."""

  table: NgramTable
  boundary_id: int
  adjusted: tuple[np.ndarray, ...]  # a_k per k-gram id, k = 1 … order.
  discounts: tuple[tuple[float, float, float], ...]  # (D1, D2, D3+) per order.
  fallback_orders: tuple[int, ...]  # Orders whose discounts fell back to FALLBACK_DISCOUNTS.
  totals: tuple[np.ndarray, ...]  # Σ_w a_k(hw) per (k-1)-gram h (one entry for k = 1).
  gammas: tuple[np.ndarray, ...]  # γ_k(h) numerators per (k-1)-gram h.

  @property
  def order(self) -> int:
    return self.table.order

  @property
  def vocab_size(self) -> int:
    return self.table.vocab_size

  @classmethod
  def fit(cls, train_ids: np.ndarray, order: int, vocab_size: int,
          boundary_id: int, on_order=None, events: np.ndarray | None = None,
          warn: bool = True) -> KneserNey:
    """`on_order(k, grams)`, `events`: NgramTable.build's; `warn`: log the orders whose
    discounts fall back (a baseline's reader wants to know; they are in fallback_orders)."""
    if order < 1:
      raise ValueError(f'a Kneser-Ney model needs order >= 1, not {order}')
    table = NgramTable.build(train_ids, order, vocab_size, boundary_id, on_order, events)
    adjusted = adjusted_counts(table)
    discounts, fallbacks = [], []
    for k, counts in enumerate(adjusted, start=1):
      estimated = modified_discounts(counts)
      if estimated is None and warn:
        log.warning('Order %d: the count-of-counts give no valid modified-KN discounts; '
                    'using %s (KenLM --discount_fallback).', k, FALLBACK_DISCOUNTS)
      if estimated is None:
        fallbacks.append(k)
      discounts.append(estimated or FALLBACK_DISCOUNTS)
    return cls._with_sums(table, boundary_id, adjusted, discounts, fallbacks)

  @classmethod
  def from_table(cls, table: NgramTable, boundary_id: int, discounts, fallback_orders
                 ) -> KneserNey:
    """The model a training table and its discounts define (a saved model read back)."""
    return cls._with_sums(table, boundary_id, adjusted_counts(table), discounts,
                          fallback_orders)

  @classmethod
  def _with_sums(cls, table, boundary_id, adjusted, discounts, fallback_orders) -> KneserNey:
    """The per-context sums Σ_w a_k(hw) and γ_k(h) of every order."""
    totals, gammas = [], []
    for k, (counts, (d1, d2, d3)) in enumerate(zip(adjusted, discounts), start=1):
      contexts = table.prefix(k)
      num_contexts = table.num_grams(k - 1) if k > 1 else 1
      gamma_per_gram = np.select([counts == 1, counts == 2, counts >= 3], [d1, d2, d3], 0.0)
      totals.append(np.bincount(contexts, counts, minlength=num_contexts))
      gammas.append(np.bincount(contexts, gamma_per_gram, minlength=num_contexts))
    return cls(table, boundary_id, tuple(adjusted),
               tuple(tuple(float(d) for d in ds) for ds in discounts),
               tuple(int(k) for k in fallback_orders), tuple(totals), tuple(gammas))

  def log_prob_windows(self, windows: np.ndarray) -> np.ndarray:
    """log p(w_t | context) for windows [B, k], k <= order (oldest word first, the target
    last): the order-k distribution p_k, the model's own for k = order. Rows BLOCK_ROWS
    at a time, each order's two spans at a time: memory for a few arrays of a block, at
    any order (all spans of a split at once held order²/2 ids per token)."""
    windows = np.asarray(windows, np.int64)
    if windows.ndim != 2 or not 1 <= windows.shape[1] <= self.order:
      raise ValueError(f'windows must be [batch, 1 … {self.order}], not {windows.shape}')
    if len(windows) > BLOCK_ROWS:
      return np.concatenate([self.log_prob_windows(windows[start:start + BLOCK_ROWS])
                             for start in range(0, len(windows), BLOCK_ROWS)])
    n = windows.shape[1]
    prob = np.full(len(windows), 1.0 / self.vocab_size)
    for k in range(1, n + 1):
      context, gram = self.table.span_ends(windows, n - k)
      count = np.where(gram != UNSEEN, self.adjusted[k - 1][np.maximum(gram, 0)], 0)
      prob = self._interpolated(k, context, count, prob)
    return np.log(prob)

  def _interpolated(self, k: int, context: np.ndarray, count: np.ndarray,
                    lower: np.ndarray) -> np.ndarray:
    """p_k from the module docstring's equation: a_k(hw) `count` after the (k-1)-gram ids
    `context` (UNSEEN: never followed in training, p_k = p_{k-1}), p_{k-1} `lower`; a
    context per row, its words along the rows' last axis where `count` has one."""
    seen_context = context != UNSEEN
    total = np.where(seen_context, self.totals[k - 1][np.maximum(context, 0)], 0)
    gamma = np.where(seen_context, self.gammas[k - 1][np.maximum(context, 0)], 0)
    total, gamma = (total[:, None], gamma[:, None]) if count.ndim == 2 else (total, gamma)
    d = np.asarray((0.0, *self.discounts[k - 1]))[np.minimum(count, 3)]
    interpolated = (np.maximum(count - d, 0) + gamma * lower) / np.maximum(total, 1)
    return np.where(total > 0, interpolated, lower)

  def log_prob_split(self, ids: np.ndarray) -> np.ndarray:
    """Per-token log-probabilities of a split, each token once, in order."""
    return self.log_prob_windows(stream_windows(ids, self.order, self.boundary_id))

  def log_probs(self, contexts: np.ndarray) -> np.ndarray:
    """The full distribution [B, |V|] after each context [B, order-1] (oldest word first):
    log_prob_windows' recursion over a row of the vocabulary per context, each order's
    seen k-grams put in place (NgramTable.next_grams), the rest zero counts."""
    contexts = np.asarray(contexts, np.int64)
    rows = max(1, BLOCK_ROWS // self.vocab_size)
    if len(contexts) > rows:
      return np.concatenate([self.log_probs(contexts[start:start + rows])
                             for start in range(0, len(contexts), rows)])
    prob = np.full((len(contexts), self.vocab_size), 1.0 / self.vocab_size)
    for k in range(1, self.order + 1):
      context = self.table.context_ids(contexts, k - 1)
      row, word, gram = self.table.next_grams(k, context)
      count = np.zeros(prob.shape, self.adjusted[k - 1].dtype)
      count[row, word] = self.adjusted[k - 1][gram]
      prob = self._interpolated(k, context, count, prob)
    return np.log(prob)
