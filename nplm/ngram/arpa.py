r"""A Kneser-Ney model as an ARPA file (the backoff format of SRILM and KenLM) that gives
exactly nplm's probability of every token.

Order k lists every k-gram of the training table (those ending in the start-of-split padding
too: they are contexts) with log10 of the model's interpolated p_k(w | h), and, below the
highest order, the log10 backoff weight of the k-gram as a context. Interpolated KN gives an
unseen h w the probability γ(h) / Σ_v a(h v) · p_{k-1}(w | h'), so that ratio is the
backoff weight, and an ARPA reader's p(w | h) = p(h w) if listed, else bo(h) · p(w | h')
(bo = 1 for an unlisted h), is the model's. The unigram level lists every vocabulary word,
the uniform 1/|V| share included, so no token falls to an ARPA reader's own unknown word.

Tokens are written verbatim: the boundary token (`</text>`, `<eos>`), `</p>` and `<unk>` are
ordinary words with nplm's probabilities (KenLM reads `<unk>` as its unknown word, which is
then ours, listed). KenLM refuses a file without `<s>` and `</s>`; where the vocabulary lacks
them they are listed with log10 p = -99, as lmplz lists `<s>` (never predicted): nplm's
tokens keep their probabilities. A split is scored as nplm scores it, after order-1
boundary tokens, without sentence marks; with KenLM's full-state API:

    model = kenlm.Model('model.arpa'); state, out = kenlm.State(), kenlm.State()
    model.NullContextWrite(state)
    for token in [boundary] * (order - 1) + tokens:   # scores of the boundaries dropped
      log10_p = model.BaseScore(state, token, out); state, out = out, state

A vocabulary holding whitespace inside a token (a character model's ' ') cannot be written:
ARPA separates words by whitespace. The paper's interpolated trigram is not written either:
its weights depend on the training count of the context (w_{t-2}, w_{t-1}), so what it
backs off to depends on w_{t-2}, which the shared bigram level of an ARPA file cannot say
short of listing every (context, word) pair.
"""

from __future__ import annotations

import logging
import math
import os

import numpy as np

from nplm.data.vocab import Vocabulary
from nplm.files import atomic_file
from nplm.ngram.kneser_ney import BLOCK_ROWS, KneserNey
from nplm.ngram.table import UNSEEN, NgramTable

log = logging.getLogger(__name__)

SENTENCE_MARKS = ('<s>', '</s>')
NEVER = -99.0  # log10 p of a sentence mark the model never predicts (lmplz's <s>).


class NotWritableError(ValueError):
  """The model or its vocabulary has no exact ARPA form."""


def write_arpa(model: KneserNey, vocab: Vocabulary, path: str | os.PathLike) -> None:
  """The model (its ids naming the words of `vocab`) as an ARPA file at `path`, written
  whole, a progress line after each order."""
  if not isinstance(model, KneserNey):
    raise NotWritableError('only Kneser-Ney models have an exact ARPA form')
  words = list(vocab.words)
  spaced = next((w for w in words if not w or any(c.isspace() for c in w)), None)
  if spaced is not None:
    raise NotWritableError(f'the token {spaced!r} holds whitespace, which separates an ARPA '
                           "file's words")
  marks = [mark for mark in SENTENCE_MARKS if mark not in words]
  table = model.table
  counts = [table.vocab_size + len(marks),
            *(table.num_grams(k) for k in range(2, model.order + 1))]
  with atomic_file(path) as f:  # Order by order: the file is never held whole in memory.
    header = ['\\data\\'] + [f'ngram {k}={n}' for k, n in enumerate(counts, 1)]
    f.write('\n'.join(header) + '\n')
    for k in range(1, model.order + 1):
      f.write(f'\n\\{k}-grams:\n')
      for lines in _section(model, words, k):
        f.writelines(line + '\n' for line in lines)
      if k == 1:
        f.writelines(f'{NEVER:.8g}\t{mark}' + ('\t0' if model.order > 1 else '') + '\n'
                     for mark in marks)
      log.info('wrote the %d-grams of %s (%s lines; order %d of %d)', k,
               os.path.basename(path), f'{counts[k - 1]:,}', k, model.order)
    f.write('\n\\end\\\n')


def _section(model: KneserNey, words: list[str], k: int):
  """The lines of order k, BLOCK_ROWS n-grams at a time: log10 p, the words, and the
  backoff below the highest order."""
  table = model.table
  count = table.vocab_size if k == 1 else table.num_grams(k)
  for start in range(0, count, BLOCK_ROWS):
    block = np.arange(start, min(start + BLOCK_ROWS, count), dtype=np.int64)
    if k == 1:  # Every vocabulary word, seen in training or not.
      grams, ids = block[:, None], table.lookup(1, None, block)
    else:
      grams, ids = gram_words(table, k, block), block
    log10_p = model.log_prob_windows(grams) / math.log(10)
    text = [' '.join(words[w] for w in gram) for gram in grams.tolist()]
    if k == model.order:
      yield [f'{p:.8g}\t{t}' for p, t in zip(log10_p.tolist(), text)]
    else:
      log10_bo = np.log10(backoff_weights(model, k, ids))
      yield [f'{p:.8g}\t{t}\t{b:.8g}'
             for p, t, b in zip(log10_p.tolist(), text, log10_bo.tolist())]


def gram_words(table: NgramTable, k: int, ids: np.ndarray | None = None) -> np.ndarray:
  """[len(ids), k] word ids of the k-grams `ids` (default: every k-gram of the table, in id
  order), read back through their prefixes."""
  ids = np.arange(table.num_grams(k), dtype=np.int64) if ids is None else ids
  columns = []
  for order in range(k, 1, -1):
    keys = table.keys[order - 1][ids]
    columns.append(keys % table.vocab_size)
    ids = keys // table.vocab_size
  columns.append(table.keys[0][ids])
  return np.stack(columns[::-1], axis=1)


def backoff_weights(model: KneserNey, k: int, ids: np.ndarray) -> np.ndarray:
  """bo(h) for the k-grams `ids` (UNSEEN: not in the table) as contexts of order k+1:
  γ(h) / Σ_v a(h v), or 1 where h was never followed by a token (p_{k+1} = p_k there)."""
  seen = ids != UNSEEN
  index = np.maximum(ids, 0)
  total = np.where(seen, model.totals[k][index], 0)
  gamma = np.where(seen, model.gammas[k][index], 0.0)
  return np.where(total > 0, gamma / np.maximum(total, 1), 1.0)
