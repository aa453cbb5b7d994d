"""A trained model read back from its workdir, and the exact log-probability of each token.

Perplexities, mixtures, sentence scores and the evaluate command all come from
`split_log_probs`: the same per-token function the trainer's feeds evaluate with
(nplm.training.window_feed, nplm.training.stream_feed), compiled once per model, from the head's exact,
normalized `log_prob` whatever head trained it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from nplm import parallel, paths
from nplm.training import memory
from nplm.training import stream_feed
from nplm.training import window_feed
from nplm.run_files.checkpoint import read_identity, saved_params
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
  # The data fingerprint its run recorded (nplm.data.corpus.Corpus.fingerprint: the ids of
  # every split under its vocabulary); None for runs recorded before it existed.
  data_fingerprint: str | None = None
  # Compiled log-prob steps by segment length (recurrent) or one for windows: built once.
  _log_prob_steps: dict = dataclasses.field(default_factory=dict, repr=False)

  @property
  def boundary_id(self) -> int:
    """The token before a split's first: its dataset's (</text> for Brown, else <eos>)."""
    return self.vocab.id_of(datasets.boundary_token(self.config.dataset))

  def require_language_model(self) -> None:
    """A ConfigError for a model that gives no probability of a text (word2vec's)."""
    if not self.lm.model.language_model:
      raise ConfigError(f'{paths.shown(self.config.workdir)} is a word2vec model (--model='
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
      step = self._log_prob_step(batch_size, lambda: stream_feed.make_log_prob_step(
          self.lm, batch_size, mesh))
      return stream_feed.split_log_probs(self.lm, self.params, ids, boundary, batch_size,
                                             step, mesh)
    step = self._log_prob_step('windows', lambda: window_feed.make_log_prob_step(
        self.lm, order, mesh))
    padded = parallel.put(batching.pad_split(np.asarray(ids), order, boundary), mesh)
    return window_feed.split_log_probs(step, self.params, padded, len(ids), batch_size,
                                           mesh)

  def _log_prob_step(self, key, make):
    if key not in self._log_prob_steps:
      self._log_prob_steps[key] = make()
    return self._log_prob_steps[key]


def load_trained(workdir: str | os.PathLike) -> TrainedModel:
  """The model of a run's workdir with the parameters its summary reports: the best on
  validation, or the latest where no epoch has finished (a run cut short by --max_steps).

  `workdir` may be relative to the current directory, and may have been moved or copied
  since training: nothing inside it is found by a recorded path. The config returned has
  its paths absolute (`Config.absolute_paths`): `workdir` where it was read from, and the
  data locations run.json records (absolute since nplm recorded them so; a relative one
  recorded by an older nplm is read from the current directory, as it was typed)."""
  where = Path(paths.absolute(workdir))
  shown = paths.shown(where)
  if not where.is_dir():
    raise NoTrainedModelError(f'{shown}: no such directory (give the --workdir of a run)'
                              if not os.path.lexists(where) or paths.broken_link(where) else
                              f'{shown} is not a directory (give the --workdir of a run)')
  identity, vocab_path = read_identity(where), where / 'vocab.txt'
  if identity is None or not vocab_path.exists():
    raise NoTrainedModelError(f'{shown} holds no training run (no run.json or vocab.txt); '
                              'train one there first')
  config, vocab_fingerprint = _recorded(identity, where)
  config = config.absolute_paths().replace(workdir=str(where))
  vocab = Vocabulary.load(vocab_path)
  if vocab.fingerprint() != vocab_fingerprint:
    raise NoTrainedModelError(f'{paths.shown(vocab_path)} does not match the vocabulary '
                              f'recorded in {paths.shown(where / "run.json")}; the workdir was '
                              'altered')
  params = saved_params(where)
  if params is None:
    raise NoTrainedModelError(f'{shown} has no checkpoint yet; let training save one')
  # A vocabulary-parallel run saved its output rows padded; read here on one device.
  params = parallel.unpadded_output_rows(params, vocab.size)
  lm = _model_of(config, vocab, params, where / 'run.json')
  memory.require_fit(config, lm, vocab.counts, training=False)  # Before any evaluation.
  return TrainedModel(config, vocab, lm, params, identity.get('data_fingerprint'))


def _recorded(identity, where: Path) -> tuple[Config, str]:
  """(config, vocabulary fingerprint) of a run.json, or a one-line error if it lacks them."""
  run_json = paths.shown(where / 'run.json')
  config = identity.get('config') if isinstance(identity, dict) else None
  fingerprint = identity.get('vocab_fingerprint') if isinstance(identity, dict) else None
  if not isinstance(config, dict) or not isinstance(fingerprint, str):
    raise NoTrainedModelError(f'{run_json} is damaged (it lacks the run\'s config or '
                              'vocabulary fingerprint); restore it from a copy')
  try:
    return Config.from_saved(config), fingerprint
  except TypeError as error:  # A field with a value no Config takes.
    raise NoTrainedModelError(f'{run_json} is damaged ({error}); restore it') from None


def _model_of(config: Config, vocab: Vocabulary, params: dict, run_json: Path) -> LanguageModel:
  """The model run.json's config builds, checked against the checkpoint's parameters (a
  hand-edited run.json would otherwise fail deep inside Flax, at the first use)."""
  try:
    lm = build_language_model(config, vocab.counts)
    expected = _shapes(lm.stored_params(jax.eval_shape(lambda: _initialized(lm, config))))
  except Exception as error:  # A run.json value no model takes, of any kind.
    text = (str(error).strip().splitlines() or [''])[0][:200]
    raise NoTrainedModelError(
        f'{paths.shown(run_json)} describes no model nplm can build ({type(error).__name__}: '
        f'{text}); was it edited? Restore it') from None
  saved = _shapes(params)
  differences = [f'{name}: checkpoint {saved.get(name, "absent")}, run.json gives '
                 f'{expected.get(name, "absent")}'
                 for name in sorted(set(saved) | set(expected))
                 if saved.get(name) != expected.get(name)]
  if differences:
    more = f'; {len(differences) - 3} more' if len(differences) > 3 else ''
    raise NoTrainedModelError(
        f'{paths.shown(run_json)} does not match the checkpoint\'s parameters '
        f'({"; ".join(differences[:3])}{more}): was it edited? Restore it')
  return lm


def _initialized(lm: LanguageModel, config: Config) -> dict:
  """The parameters `lm.init` gives (traced for their shapes only), as each feed
  initializes its model."""
  key = jax.random.key(0)
  if not lm.model.language_model:  # word2vec: one position's window (as Word2VecFeed).
    windows, centers = jnp.zeros((1, 2 * config.window), jnp.int32), jnp.zeros(1, jnp.int32)
    inputs = lm.model.examples(windows, centers, jnp.ones(1))[:2]
  elif lm.model.recurrent:
    words = jnp.zeros((1, 1), jnp.int32)
    inputs = (words, words, lm.model.initial_state(1))
  else:
    inputs = (jnp.zeros((1, config.order - 1), jnp.int32), jnp.zeros(1, jnp.int32))
  return lm.init(key, *inputs, method=lm.log_prob)['params']


def _shapes(tree) -> dict[str, tuple[int, ...]]:
  """'model/C/embedding' -> shape, for every array of a parameter tree."""
  leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
  return {'/'.join(str(getattr(key, 'key', key)) for key in path): tuple(np.shape(leaf))
          for path, leaf in leaves}
