"""The open vocabulary for a model read back: its spelling of unknown words, and their cost.

A word outside the vocabulary gets p(<unk> | h) · q(w) (nplm.ngram.spelling): the model's
closed log-probability of `<unk>` plus log q(w). A run saves q in its workdir (spelling.json,
spelling.npz); a workdir from before holds none, so q is learned once from the run's own data
(the data it trained on, checked by its fingerprint) and saved there; where that data cannot
be read, the model is used closed, as before, and a note says so.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nplm import paths
from nplm.config import Config
from nplm.data.acquire import CorpusNotFoundError
from nplm.data.datasets import load_dataset
from nplm.data.vocab import UNK, Vocabulary
from nplm.errors import ConfigError
from nplm.ngram import spelling
from nplm.ngram.spelling import Spelling


def read_spelling(where: Path, config: Config, vocab: Vocabulary,
                  data_fingerprint: str | None) -> tuple[Spelling | None, str | None]:
  """(the spelling model of the run in `where`, a note for the user or None): the saved
  one, else one learned from the run's data now (saved if the workdir takes it), else None."""
  try:
    saved = spelling.load(where)
  except spelling.DamagedSpellingError as error:
    raise ConfigError(str(error)) from None
  if saved is not None:
    return saved, None
  shown = paths.shown(where)
  try:
    corpus = load_dataset(config.resolved())
  except (ConfigError, CorpusNotFoundError, OSError, ValueError) as error:
    return None, (f'{shown} has no spelling model of unknown words (an older nplm trained it) '
                  f'and its data cannot be read ({_first_line(error)}): unknown words are '
                  'scored as <unk> alone (closed vocabulary)')
  if corpus.vocab.fingerprint() != vocab.fingerprint() or (
      data_fingerprint is not None and corpus.fingerprint != data_fingerprint):
    return None, (f'{shown} has no spelling model of unknown words and its dataset now holds '
                  'other data: unknown words are scored as <unk> alone (closed vocabulary)')
  learned = spelling.of_corpus(corpus)
  try:
    spelling.save(learned, where)
    kept = f'saved in {paths.shown(where / spelling.RECORD_FILE)}'
  except OSError:
    kept = 'not saved: the workdir takes no files'
  return learned, (f'{shown} predates the open vocabulary: its spelling model of unknown '
                   f'words was learned from its data now ({kept})')


def spelling_log_probs(model, tokens, ids: np.ndarray) -> np.ndarray:
  """ln q(token) for each token the model reads as <unk> (a literal <unk> excepted: its
  spelling is withheld), 0 for the others and for a model without a spelling model."""
  out = np.zeros(len(ids), np.float64)
  if model.spelling is None:
    return out
  spelt = [i for i in np.flatnonzero(np.asarray(ids) == model.vocab.unk_id).tolist()
           if tokens[i] != UNK]
  out[spelt] = model.spelling.log_prob([tokens[i] for i in spelt])
  return out


def unknown_counts(types, type_ids: np.ndarray, vocab: Vocabulary) -> dict[str, int]:
  """word -> count of the tokens of a split (type indices into `types`) that the vocabulary
  reads as <unk>, a literal <unk> excepted: what the open vocabulary spells."""
  counts = np.bincount(type_ids, minlength=len(types))
  return {types[i]: int(counts[i]) for i in np.flatnonzero(counts).tolist()
          if types[i] != UNK and vocab.id_of(types[i]) == vocab.unk_id}


def _first_line(error: BaseException) -> str:
  return (str(error).strip().splitlines() or [type(error).__name__])[0][:160]
