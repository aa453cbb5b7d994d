"""An n-gram workdir (`nplm ngram --out=DIR`): written, and read back as a model every tool
uses as it uses a trained network (the attributes of nplm.use.trained.TrainedModel).

DIR holds ngram.json (the numbers, the data config, the saved model's file and SHA-256, the
vocabulary's fingerprint), model.npz (the fitted model, nplm.ngram.saved), vocab.txt (as a
training run writes it), tokenizer.model where the dataset's tokenizer learned one, and
model.arpa for Kneser-Ney (nplm.ngram.arpa). ngram.json is written last: a DIR whose
ngram.json names a saved model has all of it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import numpy as np

from nplm import paths
from nplm.config import Config
from nplm.data.corpus import Corpus
from nplm.data.sources import source_of
from nplm.data.tokenizers import TOKENIZER_FILE
from nplm.data.vocab import Vocabulary
from nplm.errors import ConfigError
from nplm.files import write_bytes_atomically, write_json_atomically
from nplm.ngram import InterpolatedTrigram, KneserNey, arpa, saved, spelling
from nplm.ngram.spelling import Spelling
from nplm.use.open_vocabulary import read_spelling

MODEL_FILE, ARPA_FILE = 'model.npz', 'model.arpa'


def model_name(kind: str, order: int) -> str:
  return f'KN{order}' if kind == 'kn' else 'DelInt3'


def is_ngram_dir(where: Path) -> bool:
  return (where / 'ngram.json').is_file()


@dataclasses.dataclass(frozen=True, eq=False)
class NgramRun:
  config: Config  # The data fields it was fitted under, workdir: where it was read from.
  vocab: Vocabulary
  model: KneserNey | InterpolatedTrigram
  data_fingerprint: str | None
  spelling: Spelling | None = None  # As TrainedModel's.
  spelling_note: str | None = None

  @property
  def name(self) -> str:
    return model_name(saved.kind_of(self.model), self.model.order)

  @property
  def boundary_id(self) -> int:
    return self.model.boundary_id

  @property
  def context_length(self) -> int:
    return self.model.order - 1

  @functools.cached_property
  def tokenizer(self):  # Read once: a completion asks for it a dozen times.
    return source_of(self.config.dataset).tokenizer(self.config, self.config.workdir)

  @property
  def sentence_end(self) -> str | None:
    return source_of(self.config.dataset).sentence_end

  def require_language_model(self) -> None:
    """An n-gram model is a language model."""

  def split_log_probs(self, ids: np.ndarray, batch_size: int | None = None) -> np.ndarray:
    """log p of every token of a split after order-1 boundary tokens, in order (float64)."""
    del batch_size  # Counted models score a split at once.
    return self.model.log_prob_split(np.asarray(ids))

  def window_log_probs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """ln p(target | the order-1 tokens before it) for rows of ids (float64), as
    TrainedModel's."""
    windows = np.concatenate([contexts, np.asarray(targets)[:, None]], axis=1)
    return np.asarray(self.model.log_prob_windows(windows), np.float64)

  def compile_window_rows(self) -> None:
    """Nothing to compile: a counted model's log-probs are looked up (TrainedModel's)."""

  def next_words(self) -> NgramNextWords:
    return NgramNextWords(self.model)


@dataclasses.dataclass(frozen=True)
class NgramNextWords:
  """Next-token distributions over the whole vocabulary; the state is each row's last
  order-1 words [S, order-1], the start-of-split boundary tokens before a prompt."""

  model: KneserNey | InterpolatedTrigram

  def start(self, prompts: np.ndarray) -> np.ndarray:
    prompts = np.asarray(prompts, np.int64).reshape(len(prompts), -1)
    padding = np.full((len(prompts), self.model.order - 1), self.model.boundary_id, np.int64)
    return self._last(np.concatenate([padding, prompts], axis=1))

  def next(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return self.model.log_probs(state).astype(np.float32), state

  def rows(self, state: np.ndarray, indices: np.ndarray) -> np.ndarray:
    return state[np.asarray(indices, np.int64)]

  def push(self, state: np.ndarray, words: np.ndarray) -> np.ndarray:
    return self._last(np.concatenate([state, np.asarray(words, np.int64)[:, None]], axis=1))

  def _last(self, words: np.ndarray) -> np.ndarray:
    return words[:, words.shape[1] - (self.model.order - 1):]


def save_ngram_run(out: Path, model, spelt: Spelling, corpus: Corpus, summary: dict) -> dict:
  """Writes DIR's files for a fitted model, the spelling of its unknown words and its
  summary (ngram.json last); returns the summary as written, with what was saved."""
  out.mkdir(parents=True, exist_ok=True)
  sha256 = saved.save(model, out / MODEL_FILE)
  spelling.save(spelt, out)
  corpus.vocab.save(out / 'vocab.txt')
  if corpus.tokenizer_model is not None:  # A learned tokenizer, as a training run saves it.
    write_bytes_atomically(out / TOKENIZER_FILE, corpus.tokenizer_model)
  else:
    (out / TOKENIZER_FILE).unlink(missing_ok=True)  # An earlier fit's, in the same DIR.
  try:
    arpa.write_arpa(model, corpus.vocab, out / ARPA_FILE)
    arpa_file = {'file': ARPA_FILE}
  except arpa.NotWritableError as error:
    (out / ARPA_FILE).unlink(missing_ok=True)  # Another model's, from an earlier fit.
    arpa_file = {'file': None, 'why_not': str(error)}
  summary = {**summary, 'saved_model': {'kind': saved.kind_of(model), 'file': MODEL_FILE,
                                        'sha256': sha256},
             'vocab_fingerprint': corpus.vocab.fingerprint(), 'arpa': arpa_file}
  write_json_atomically(out / 'ngram.json', summary)
  return summary


def load_ngram_run(where: Path) -> NgramRun:
  """The model of an n-gram DIR, checked against ngram.json; one-line ConfigErrors."""
  shown = paths.shown(where)
  rerun = f'rerun nplm ngram --out={shown}'
  try:
    summary = json.loads((where / 'ngram.json').read_text())
    record, config = summary.get('saved_model'), summary['config']
  except (ValueError, KeyError, TypeError, AttributeError):
    raise ConfigError(f'{paths.shown(where / "ngram.json")} is damaged; {rerun}') from None
  if not isinstance(record, dict):
    raise ConfigError(f'{shown} holds an n-gram model\'s numbers but not the model (an older '
                      f'nplm wrote it); {rerun} to save it')
  try:
    model = saved.load(where / record['file'], record['kind'], record['sha256'])
    vocab = Vocabulary.load(where / 'vocab.txt')
  except (saved.DamagedModelError, OSError, ValueError) as error:
    raise ConfigError(f'{shown}: the saved model is damaged or missing ({error}); '
                      f'{rerun}') from None
  if vocab.fingerprint() != summary.get('vocab_fingerprint') or vocab.size != model.vocab_size:
    raise ConfigError(f'{paths.shown(where / "vocab.txt")} does not match the vocabulary '
                      f'recorded in ngram.json; {rerun}')
  config = Config.from_saved({**config, 'workdir': str(where)}).absolute_paths()
  spelt, note = read_spelling(where, config, vocab, summary.get('data_fingerprint'))
  return NgramRun(config, vocab, model, summary.get('data_fingerprint'), spelt, note)
