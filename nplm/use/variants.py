"""The log-probabilities of a sentence's variants, each with one word replaced: what
nplm.use.correction's search weighs, each round, in one call of the model.

A variant that replaces word i leaves the ln p of the tokens before i as they were: a model
of a finite context c rescores only tokens i to i + c (each distinct context and token once),
a recurrent one reads on from the sentence's own state before i. Both are open vocabulary:
a word outside the vocabulary costs p(<unk> | h) q(word), its spelling's probability.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nplm.use.open_vocabulary import spelling_log_probs
from nplm.use.sentences import rows_log_probs


def kept_or_scored(model, tokens: tuple[str, ...], current: np.ndarray | None,
                   variants: Sequence[tuple[int, str]], ended: bool, kept: dict):
  """variant_log_probs, but a window model's variants in `kept` (which it updates) not
  scored again: a change at i reaches the ln p of tokens i to i + c, read from tokens i - c
  on, so a variant more than c from every change since its scoring has the same ln p's
  there, and the sentence's elsewhere."""
  fresh = [v for v in variants if v not in kept]
  current, scored = (variant_log_probs(model, tokens, current, fresh, ended)
                     if fresh or current is None else (current, []))
  c = model.context_length
  if c is None:
    return current, scored
  kept.update(zip(fresh, scored))
  reused = []
  for variant in variants:
    i, stop = variant[0], min(len(current), variant[0] + c + 1)
    log_probs = current.copy()
    log_probs[i:stop] = kept[variant][i:stop]
    reused.append(log_probs)
  return current, reused


def variant_log_probs(model, tokens: tuple[str, ...], current: np.ndarray | None,
                      variants: Sequence[tuple[int, str]], ended: bool):
  """(ln p of each token of `tokens` (and of an end mark where `ended`), scored where
  `current` is None, else `current`; the same for each variant, `tokens` with word i
  replaced), open vocabulary, in one call. A token before i keeps its ln p: a model of a
  finite context rescores only those a change reaches (_window_variants), a recurrent one
  each from i on (_recurrent_variants)."""
  if model.context_length is not None:
    return _window_variants(model, tokens, current, variants, ended)
  return _recurrent_variants(model, tokens, current, variants, ended)


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
                        variants: Sequence[tuple[int, str]], ended: bool):
  """variant_log_probs for a recurrent model: a change at i leaves the state before i
  as the sentence's own (read once, a word at a time: next_words' `carries`), and each
  variant is read on from there to its end (sentences.rows_log_probs): the tokens before
  i, half a sentence on average, are not read again for each variant."""
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
    rows.append((np.concatenate([[boundary], changed[:-1]])[i:], changed[i:], carries[i]))
  closed = iter(rows_log_probs(model, *zip(*rows)) if rows else ())
  if current is None:
    current = next(closed) + spelt
  scored = []
  for (i, _), read_on, own in zip(variants, closed, _spelt(model, variants)):
    log_probs = current.copy()
    log_probs[i:] = read_on
    log_probs[i:] += [own, *spelt[i + 1:]]
    scored.append(log_probs)
  return current, scored


def _spelt(model, variants: Sequence[tuple[int, str]]) -> np.ndarray:
  """ln q(word) of each variant's word outside the vocabulary (a word in capitals read
  in lower case: nplm.use.correction), 0 for one in it."""
  words = [word for _, word in variants]
  return spelling_log_probs(model, words, model.vocab.encode(words))
