"""Every n-gram of a training stream as an integer id, and its count, with numpy only.

A k-gram is coded from its (k-1)-gram prefix: code = id(w_1 … w_{k-1}) · |V| + w_k, and its
id is the rank of that code among the seen k-grams. Codes of order k thus stay below
(#(k-1)-grams) · |V| (about 10^10 on Brown), so every lookup is one `np.searchsorted` on a
sorted int64 array. Hand-written because no maintained library counts n-grams vectorized:
`nltk.lm` is a dict of Python counters, far too slow to score Brown (DESIGN.md).

Streams are scored like the neural models see them: the split is left-padded with n-1
text-boundary tokens (`batching.pad_split`), so the first tokens of a split are predicted as
if a text had just ended and every one of its tokens is one event.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nplm.data import batching

UNSEEN = -1  # The id of an n-gram that the training stream never showed.


def stream_windows(ids: np.ndarray, order: int, boundary_id: int) -> np.ndarray:
  """[T, order] windows of a split, oldest word first and the target last (a strided view)."""
  padded = batching.pad_split(np.asarray(ids), order, boundary_id)
  return np.lib.stride_tricks.sliding_window_view(padded, order)


@dataclasses.dataclass(frozen=True, eq=False)
class NgramTable:
  """The k-grams (k = 1 … order) of a padded training stream, each with an id and a count.

  `keys[k-1]` are the sorted codes of the k-grams that end anywhere in the padded stream
  (those ending in the padding are contexts only); `counts[k-1]` counts the k-grams that end
  at a real token, the events of the model.
  """

  order: int
  vocab_size: int
  keys: tuple[np.ndarray, ...]
  counts: tuple[np.ndarray, ...]

  @classmethod
  def build(cls, ids: np.ndarray, order: int, vocab_size: int, boundary_id: int,
            on_order=None, events: np.ndarray | None = None) -> NgramTable:
    """`on_order(k, grams)`, if given, after each order is counted: how many distinct
    k-grams there are (it may stop the count by raising, before the next order's work).
    `events` (bool, one per id; default all): the tokens the model predicts; the others
    are context only, as the boundary padding is (a spelling model's marks between words)."""
    ids = np.asarray(ids, np.int64)
    if ids.size == 0:
      raise ValueError('cannot count n-grams of an empty training split')
    if ids.min() < 0 or ids.max() >= vocab_size:
      raise ValueError(f'token ids must lie in [0, {vocab_size}) (the vocabulary size)')
    padded = batching.pad_split(ids, order, boundary_id).astype(np.int64)
    real = np.arange(len(padded)) >= order - 1
    if events is not None:
      real[order - 1:] &= np.asarray(events, bool)
    keys, counts = [], []
    gram_ids = np.full(len(padded), UNSEEN, np.int64)  # The (k-1)-gram ending at each position.
    for k in range(1, order + 1):
      codes = np.full(len(padded), UNSEEN, np.int64)
      if k == 1:
        codes[:] = padded
      else:
        has_prefix = gram_ids[:-1] != UNSEEN
        codes[1:][has_prefix] = gram_ids[:-1][has_prefix] * vocab_size + padded[1:][has_prefix]
      present = codes != UNSEEN
      k_keys, inverse = np.unique(codes[present], return_inverse=True)
      gram_ids = np.full(len(padded), UNSEEN, np.int64)
      gram_ids[present] = inverse
      keys.append(k_keys)
      counts.append(np.bincount(gram_ids[real], minlength=len(k_keys)))
      if on_order is not None:
        on_order(k, len(k_keys))
    return cls(order, vocab_size, tuple(keys), tuple(counts))

  def num_grams(self, k: int) -> int:
    return len(self.keys[k - 1])

  def prefix(self, k: int) -> np.ndarray:
    """The (k-1)-gram id of each k-gram (all 0, the empty context, for k = 1)."""
    return self.keys[k - 1] // self.vocab_size if k > 1 else np.zeros(self.num_grams(1), np.int64)

  def context_totals(self, k: int) -> np.ndarray:
    """How often each (k-1)-gram was followed by a token: Σ_w c(h w), per (k-1)-gram id."""
    return np.bincount(self.prefix(k), self.counts[k - 1], minlength=self.num_grams(k - 1))

  def lookup(self, k: int, prefix_ids: np.ndarray | None, words: np.ndarray) -> np.ndarray:
    """Ids of the k-grams (prefix, word), UNSEEN where the prefix or the k-gram is unseen."""
    words = np.asarray(words, np.int64)
    if k == 1:
      codes, known = words, np.ones(words.shape, bool)
    else:
      known = prefix_ids != UNSEEN
      codes = np.where(known, prefix_ids, 0) * self.vocab_size + words
    keys = self.keys[k - 1]
    found = np.minimum(np.searchsorted(keys, codes), len(keys) - 1)
    return np.where(known & (keys[found] == codes), found, UNSEEN)

  def context_ids(self, contexts: np.ndarray, length: int) -> np.ndarray:
    """Ids of the last `length` words of each context [B, n] as (length)-grams (all 0, the
    empty context, for length 0; UNSEEN where unseen)."""
    contexts = np.asarray(contexts, np.int64)
    ids = np.zeros(len(contexts), np.int64)
    for k, column in enumerate(range(contexts.shape[1] - length, contexts.shape[1]), start=1):
      ids = self.lookup(k, ids, contexts[:, column])
    return ids

  def next_grams(self, k: int, context_ids: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, word, k-gram id) of every k-gram seen after each context, given as (k-1)-gram
    ids (0 for k = 1; UNSEEN: none). A context's k-grams are one run of the sorted codes
    (context·|V| + word), found by two searches: a full distribution's counts without a
    search per word."""
    keys, seen = self.keys[k - 1], context_ids != UNSEEN
    base = np.where(seen, context_ids, 0).astype(np.int64) * self.vocab_size
    starts = np.searchsorted(keys, base)
    lengths = np.where(seen, np.searchsorted(keys, base + self.vocab_size) - starts, 0)
    rows = np.repeat(np.arange(len(context_ids)), lengths)
    offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    ids = np.repeat(starts, lengths) + offsets
    return rows, keys[ids] - base[rows], ids

  def span_ids(self, windows: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
    """Ids of every span windows[:, s:e] (s < e), keyed (s, e): the grams a model reads."""
    windows = np.asarray(windows, np.int64)
    spans = {}
    for start in range(windows.shape[1]):
      ids = None
      for end in range(start + 1, windows.shape[1] + 1):
        ids = self.lookup(end - start, ids, windows[:, end - 1])
        spans[start, end] = ids
    return spans

  def span_ends(self, windows: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
    """Ids of windows[:, start:width-1] and windows[:, start:width] (the first all 0, the
    empty context, where start is the last column): span_ids' two spans that end at the
    target, in memory for two, not for all of them."""
    windows = np.asarray(windows, np.int64)
    width = windows.shape[1]
    context, ids = np.zeros(len(windows), np.int64), None
    for end in range(start + 1, width + 1):
      context, ids = (ids if ids is not None else context,
                      self.lookup(end - start, ids, windows[:, end - 1]))
    return context, ids

  def context_counts(self, windows: np.ndarray, context_length: int) -> np.ndarray:
    """How often the last `context_length` context words were followed by a token in training."""
    width = windows.shape[1]
    spans = self.span_ids(windows[:, width - 1 - context_length:width - 1])
    context_ids = spans[0, context_length]
    by_context = self.context_totals(context_length + 1)
    return np.where(context_ids != UNSEEN, by_context[np.maximum(context_ids, 0)], 0)


def perplexity(log_probs: np.ndarray) -> float:
  """exp of the mean negative log-probability: token-weighted over the whole split."""
  return float(np.exp(-np.mean(np.asarray(log_probs, np.float64))))
