"""A trained model read back from its workdir, and the exact log-probability of each token.

Perplexities, mixtures, sentence scores and the evaluate command all come from
`split_log_probs`: the same per-token function the trainer's feeds evaluate with
(nplm.window_training, nplm.stream_training), compiled once per model, from the head's exact,
normalized `log_prob` whatever head trained it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np

from nplm import parallel, stream_training, window_training
from nplm.checkpoint import read_identity, saved_params
from nplm.config import Config
from nplm.data import batching, datasets
from nplm.data.vocab import Vocabulary
from nplm.errors import ConfigError
from nplm.lm import LanguageModel, build_language_model


class NoTrainedModelError(FileNotFoundError):
  """The workdir holds no finished training run to read a model from."""


@dataclasses.dataclass(frozen=True, eq=False)
class TrainedModel:
  config: Config
  vocab: Vocabulary
  lm: LanguageModel
  params: dict
  # Compiled log-prob steps by segment length (recurrent) or one for windows: built once.
  _log_prob_steps: dict = dataclasses.field(default_factory=dict, repr=False)

  @property
  def boundary_id(self) -> int:
    """The token before a split's first: its dataset's (</text> for Brown, else <eos>)."""
    return self.vocab.id_of(datasets.boundary_token(self.config.dataset))

  def require_language_model(self) -> None:
    """A ConfigError for a model that gives no probability of a text (word2vec's)."""
    if not self.lm.model.language_model:
      raise ConfigError(f'{self.config.workdir} is a word2vec model (--model='
                        f'{self.config.model}), not a language model: it predicts words from '
                        'both sides, so it gives no probability of a text to score, evaluate, '
                        'mix or sample from; nplm neighbours and nplm embeddings read its '
                        'word vectors')

  def split_log_probs(self, ids: np.ndarray, batch_size: int | None = None) -> np.ndarray:
    """log p(w_t | its context) for every token of a split, in order (float64): the n-1
    previous words for a feed-forward model, every earlier word of the split for a
    recurrent one (one stream, `batch_size` words per segment)."""
    self.require_language_model()
    order, boundary = self.config.order, self.boundary_id
    batch_size = batch_size or self.config.eval_batch_size
    mesh = parallel.make_mesh('', devices=jax.devices()[:1])  # Any batch size divides it.
    if self.lm.model.recurrent:
      step = self._log_prob_step(batch_size, lambda: stream_training.make_log_prob_step(
          self.lm, batch_size, mesh))
      return stream_training.split_log_probs(self.lm, self.params, ids, boundary, batch_size,
                                             step, mesh)
    step = self._log_prob_step('windows', lambda: window_training.make_log_prob_step(
        self.lm, order, mesh))
    padded = parallel.put(batching.pad_split(np.asarray(ids), order, boundary), mesh)
    return window_training.split_log_probs(step, self.params, padded, len(ids), batch_size,
                                           mesh)

  def _log_prob_step(self, key, make):
    if key not in self._log_prob_steps:
      self._log_prob_steps[key] = make()
    return self._log_prob_steps[key]


def load_trained(workdir: str | Path) -> TrainedModel:
  """The model of a run's workdir with the parameters its summary reports: the best on
  validation, or the latest where no epoch has finished (a run cut short by --max_steps)."""
  workdir = Path(workdir)
  identity, vocab_path = read_identity(workdir), workdir / 'vocab.txt'
  if identity is None or not vocab_path.exists():
    raise NoTrainedModelError(f'{workdir} holds no training run (no run.json or vocab.txt); '
                              'train one there first')
  config = Config.from_saved(identity['config'])
  vocab = Vocabulary.load(vocab_path)
  if vocab.fingerprint() != identity['vocab_fingerprint']:
    raise NoTrainedModelError(f'{vocab_path} does not match the vocabulary recorded in '
                              f'{workdir / "run.json"}; the workdir was altered')
  params = saved_params(workdir)
  if params is None:
    raise NoTrainedModelError(f'{workdir} has no checkpoint yet; let training save one')
  # A vocabulary-parallel run saved its output rows padded; read here on one device.
  params = parallel.unpadded_output_rows(params, vocab.size)
  return TrainedModel(config, vocab, build_language_model(config, vocab.counts), params)
