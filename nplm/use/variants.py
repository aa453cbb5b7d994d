"""The log-probabilities of a sentence's variants, each with one word replaced: what
nplm.use.correction's search weighs, each round, in one call of the model.

A variant that replaces word i leaves the ln p of the tokens before i as they were: a model
of a finite context c rescores only tokens i to i + c (each distinct context and token once),
a recurrent one reads on from the sentence's own state before i. Both are open vocabulary:
a word outside the vocabulary costs p(<unk> | h) q(word), its spelling's probability.

A recurrent model's change reaches every token after it, so reading each variant to the
sentence's end costs a round the square of the sentence's length, each position a softmax
over the vocabulary. VariantSearch reads each READ_ON tokens on, the rest of its ln p's
taken as the sentence's own (what a change does further on is small), then reads to the end
those so screened within SCREEN_NATS of the best, and takes the best of them, scored whole:
a sentence of at most READ_ON + 1 tokens is searched as before, and a longer one's choice
each round is still made on whole sentences' ln P (the measurements:
experiments/results/misspellings/README.md, "A recurrent model's variants screened").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nplm.use.open_vocabulary import spelling_log_probs
from nplm.use.sentences import rows_log_probs


# A recurrent model's variant is read this many tokens past its change, then screened:
# those within SCREEN_NATS of the best are read to the end (VariantSearch). The margin is
# a hundred times the most by which the variant that won was found below the best screened
# (experiments/results/misspellings/read_on_effect.py); a wider one reads more whole.
READ_ON = 10
SCREEN_NATS = 5.0


class VariantSearch:
  """The variants of one sentence scored round after round (nplm.use.correction's search):
  each round's best by ln P plus its addend (the channel's), the variants no change has
  reached since a round scored them not scored again. What a variant changes is read on
  from i to i + reach (a window model's context c, a recurrent one's READ_ON; the rest of
  its ln p's are the sentence's own), so it is whole wherever no change since reached
  tokens i - c to i + c (a recurrent model: i to i + READ_ON, its state before i that of
  the sentence's tokens before i, which no change after i touches)."""

  def __init__(self, model, ended: bool):
    self.model, self.ended, self.kept = model, ended, {}
    self.reach = model.context_length if model.context_length is not None else READ_ON

  def best(self, tokens: tuple[str, ...], current: np.ndarray | None,
           variants: Sequence[tuple[int, str]], addends: Sequence[float]):
    """(ln p of each token of `tokens` (and of an end mark), scored where `current` is
    None; the index of the variant of the highest ln P + addend, the first of equals, and
    its ln p's; None, None where there is no variant)."""
    fresh = [v for v in variants if v not in self.kept]
    if fresh or current is None:
      current, scored = variant_log_probs(self.model, tokens, current, fresh, self.ended,
                                          read_on=self.reach)
      self.kept.update(zip(fresh, scored))
    if not variants:
      return current, None, None
    found = []
    for i, word in variants:
      log_probs = current.copy()
      stop = min(len(current), i + self.reach + 1)
      log_probs[i:stop] = self.kept[i, word][i:stop]
      found.append(log_probs)
    totals = [log_probs.sum() + addend for log_probs, addend in zip(found, addends)]
    whole = (range(len(variants)) if self.model.context_length is not None
             else self._read_whole(tokens, current, variants, addends, found, totals))
    top = max(whole, key=totals.__getitem__)
    return current, top, found[top]

  def _read_whole(self, tokens, current, variants, addends, found, totals) -> list[int]:
    """The variants a recurrent model's screen lets through (within SCREEN_NATS of the
    best, or read to the end already), their `found` and `totals` now whole."""
    screen, end = max(totals) - SCREEN_NATS, len(current)
    whole = [k for k, (i, _) in enumerate(variants)
             if i + self.reach + 1 >= end or totals[k] >= screen]
    unread = [k for k in whole if variants[k][0] + self.reach + 1 < end]
    if unread:
      _, read = variant_log_probs(self.model, tokens, current, [variants[k] for k in unread],
                                  self.ended)
      for k, log_probs in zip(unread, read):
        found[k], totals[k] = log_probs, log_probs.sum() + addends[k]
    return whole

  def changed(self, position: int) -> None:
    """A word changed at `position`: the variants whose ln p's it reaches are forgotten."""
    c = self.model.context_length
    self.kept = {v: log_probs for v, log_probs in self.kept.items()
                 if (abs(v[0] - position) > c if c is not None
                     else position > v[0] + self.reach)}


def variant_log_probs(model, tokens: tuple[str, ...], current: np.ndarray | None,
                      variants: Sequence[tuple[int, str]], ended: bool,
                      read_on: int | None = None):
  """(ln p of each token of `tokens` (and of an end mark where `ended`), scored where
  `current` is None, else `current`; the same for each variant, `tokens` with word i
  replaced), open vocabulary, in one call. A token before i keeps its ln p: a model of a
  finite context rescores only those a change reaches (_window_variants), a recurrent one
  each from i on (_recurrent_variants): to the end, or `read_on` tokens past i, the
  rest of a variant's ln p's then the sentence's."""
  if model.context_length is not None:
    return _window_variants(model, tokens, current, variants, ended)
  return _recurrent_variants(model, tokens, current, variants, ended, read_on)


def _window_variants(model, tokens: tuple[str, ...], current: np.ndarray | None,
                     variants: Sequence[tuple[int, str]], ended: bool):
  """variant_log_probs for a model of a finite context c: a change at i reaches tokens i
  to i + c (with the end mark, where it is among them), each scored alone after its c
  tokens (model.window_log_probs), each distinct (context, token) once: the token at i
  has the same context in every variant that changes it."""
  c, vocab = model.context_length, model.vocab
  end = model.sentence_end if ended else None
  marked = [*tokens, *([] if end is None else [end])]
  ids = vocab.encode(marked)
  spelt = spelling_log_probs(model, marked, ids)
  padded = np.concatenate([np.full(c, model.boundary_id), ids])  # j's context: j to j + c.
  rows, reached = [], []
  if current is None:
    rows += [padded[j:j + c + 1] for j in range(len(marked))]
  for i, word in variants:
    changed = padded.copy()
    changed[c + i] = vocab.id_of(word)
    stop = min(len(marked), i + c + 1)
    rows += [changed[j:j + c + 1] for j in range(i, stop)]
    reached.append((i, stop))
  unique, inverse = np.unique(np.array(rows, np.int32).reshape(-1, c + 1), axis=0,
                              return_inverse=True)
  closed = iter(model.window_log_probs(unique[:, :c], unique[:, c])[inverse.ravel()])
  if current is None:
    current = np.array([next(closed) for _ in marked]) + spelt
  scored = []
  for (i, stop), own in zip(reached, _spelt(model, variants)):
    log_probs = current.copy()
    log_probs[i:stop] = [next(closed) for _ in range(i, stop)]
    log_probs[i:stop] += [own, *spelt[i + 1:stop]]
    scored.append(log_probs)
  return current, scored


def _recurrent_variants(model, tokens: tuple[str, ...], current: np.ndarray | None,
                        variants: Sequence[tuple[int, str]], ended: bool,
                        read_on: int | None):
  """variant_log_probs for a recurrent model: a change at i leaves the state before i
  as the sentence's own (read once, a word at a time: next_words' `carries`), and each
  variant is read on from there to its end, or `read_on` tokens past i
  (sentences.rows_log_probs): the tokens before i, half a sentence on average, are not read
  again for each variant."""
  vocab, boundary = model.vocab, model.boundary_id
  end = model.sentence_end if ended else None
  marked = [*tokens, *([] if end is None else [end])]
  ids = vocab.encode(marked)
  spelt = spelling_log_probs(model, marked, ids)
  inputs = np.concatenate([[boundary], ids[:-1]]).astype(np.int32)  # Each token's input.
  carries = model.next_words().carries(
      inputs[:max((i for i, _ in variants), default=0) + 1])
  rows = [] if current is not None else [(inputs, ids, carries[0])]
  for i, word in variants:
    changed = ids.copy()
    changed[i] = vocab.id_of(word)
    stop = len(ids) if read_on is None else i + read_on + 1
    rows.append((np.concatenate([[boundary], changed[:-1]])[i:stop], changed[i:stop],
                 carries[i]))
  closed = iter(rows_log_probs(model, *zip(*rows)) if rows else ())
  if current is None:
    current = next(closed) + spelt
  scored = []
  for (i, _), read, own in zip(variants, closed, _spelt(model, variants)):
    log_probs = current.copy()
    stop = i + len(read)
    log_probs[i:stop] = read
    log_probs[i:stop] += [own, *spelt[i + 1:stop]]
    scored.append(log_probs)
  return current, scored


def _spelt(model, variants: Sequence[tuple[int, str]]) -> np.ndarray:
  """ln q(word) of each variant's word outside the vocabulary (a word in capitals read
  in lower case: nplm.use.correction), 0 for one in it."""
  words = [word for _, word in variants]
  return spelling_log_probs(model, words, model.vocab.encode(words))
