"""A trained model read back from its workdir, and the exact log-probability of each token.

Perplexities, mixtures, sentence scores and the evaluate command all come from
`split_log_probs`: the scoring pass of the model's own feed (nplm.training.families), the one
the trainer validates with, compiled once per model and batch size, from the head's exact,
normalized `log_prob` whatever head trained it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

import jax
import numpy as np

from nplm import parallel, paths
from nplm.components import ComponentImportError
from nplm.training import memory
from nplm.training.families import feed_of
from nplm.training.feed import Feed
from nplm.run_files.checkpoint import read_identity, recorded_identity
from nplm.run_files.saved_params import saved_params
from nplm.config import Config
from nplm.data import datasets
from nplm.data.sources import source_of
from nplm.data.tokenizers import Tokenization, check_saved_model
from nplm.data.vocab import Vocabulary
from nplm.errors import ConfigError
from nplm.lm import LanguageModel, build_language_model
from nplm.use.next_words import NextWords
from nplm.ngram.spelling import Spelling
from nplm.use.ngram_run import NgramRun, is_ngram_dir, load_ngram_run
from nplm.use.open_vocabulary import read_spelling


@functools.partial(jax.jit, static_argnames='lm')
def _window_log_prob(lm, variables, windows, targets):
  return lm.apply(variables, windows, targets, method=lm.log_prob)


def _window_rows(count: int) -> int:
  """The rows window_log_probs pads `count` to: a power of two, 8 at least (few shapes to
  compile)."""
  return max(8, 1 << (count - 1).bit_length())


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
  # The SHA-256 of its learned tokenizer's model (tokenizer.model) that its run recorded;
  # None without one, or for runs recorded before it existed.
  tokenizer_sha256: str | None = None
  # How its unknown words are spelt (nplm.ngram.spelling; None: scored as <unk> alone), and
  # a note for the user about it (an older workdir's), or None.
  spelling: Spelling | None = None
  spelling_note: str | None = None
  # Its feed for scoring, by eval batch size: each compiles its steps once.
  _scorers: dict = dataclasses.field(default_factory=dict, repr=False)

  @property
  def boundary_id(self) -> int:
    """The token before a split's first: its dataset's (</text> for Brown, else <eos>)."""
    return self.vocab.id_of(datasets.boundary_token(self.config.dataset))

  @functools.cached_property
  def tokenizer(self):
    """How typed text becomes this model's tokens (nplm.data.tokenizers), as its corpus's
    text did; a learned one's saved model checked against the one its run recorded. Read
    once: a completion asks for it a dozen times."""
    tokenizer = source_of(self.config.dataset).tokenizer(self.config, self.config.workdir)
    if Tokenization.of(self.config).learned and self.tokenizer_sha256 is not None:
      check_saved_model(self.config.workdir, self.tokenizer_sha256)
    return tokenizer

  @property
  def sentence_end(self) -> str | None:
    """The token that ends a sentence in its dataset (<eos>), or None (Brown)."""
    return source_of(self.config.dataset).sentence_end

  @property
  def name(self) -> str:
    """A short description for tables and messages: 'nnlm order 5, --head=softmax'."""
    order = f' order {self.lm.model.order}' if self.lm.model.family == 'windows' else ''
    return f'{self.config.model}{order}, --head={self.config.head}'

  @property
  def context_length(self) -> int | None:
    """How many earlier tokens a prediction reads: n-1 for a window model (feed-forward,
    Transformer), None for a recurrent one (every earlier token of the split)."""
    return self.lm.model.order - 1 if self.lm.model.family == 'windows' else None

  def require_language_model(self) -> None:
    """A ConfigError for a model that gives no probability of a text (word2vec's)."""
    if not self.lm.model.language_model:
      raise ConfigError(f'{paths.shown(self.config.workdir)} is a word2vec model (--model='
                        f'{self.config.model}), not a language model: it predicts words from '
                        'both sides, so it gives no probability of a text to score, evaluate, '
                        'mix or sample from; nplm neighbours and nplm embeddings read its '
                        'word vectors')

  def next_words(self) -> NextWords:
    """The model read one word at a time: the exact distribution of the next word after
    some prompts (nplm.use.next_words), for prediction and generation."""
    self.require_language_model()
    return NextWords(self.lm, self.params, self.boundary_id)

  def split_log_probs(self, ids: np.ndarray, batch_size: int | None = None) -> np.ndarray:
    """log p(w_t | its context) for every token of a split, in order (float64): the n-1
    previous words for a feed-forward model, every earlier word of the split for a
    recurrent one (one stream, `batch_size` words per segment): its feed's scoring pass."""
    self.require_language_model()
    scorer = self._scorer(batch_size or self.config.eval_batch_size)
    return scorer.scored(self.params, scorer.placed(np.asarray(ids)), len(ids))

  def window_log_probs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """ln p(target | the n-1 tokens before it) for rows of ids (float64), a window model's:
    contexts [R, n-1] in reading order (boundary ids before a split's first token), targets
    [R]. Chosen positions scored without a stream around them (a correction's variants);
    --eval_batch_size rows at a time, a short batch padded to a power of two."""
    if self.context_length is None:
      raise ValueError(f'{self.name} reads every earlier token, not a window')
    variables, size = self.lm.variables_of(self.params), self.config.eval_batch_size
    out = np.empty(len(targets), np.float64)
    for start in range(0, len(targets), size):
      rows = slice(start, min(start + size, len(targets)))
      count = rows.stop - rows.start
      padded = np.zeros(_window_rows(count), np.int32)
      windows = np.zeros((len(padded), contexts.shape[1]), np.int32)
      padded[:count], windows[:count] = targets[rows], contexts[rows, ::-1]  # w_{t-1} first.
      out[rows] = np.asarray(_window_log_prob(self.lm, variables, windows, padded))[:count]
    return out

  def compile_window_rows(self) -> None:
    """window_log_probs compiled for every row count it pads to, 8 to --eval_batch_size's (a
    window model's; a recurrent one has none): a correction's variants meet each in turn,
    each a compile of 0.15 to 0.3 s on a CPU (the MLP9), which a server pays before its first
    request (nplm.serve.app's Service.warm)."""
    if self.context_length is None:
      return
    rows = 8
    while rows <= _window_rows(self.config.eval_batch_size):
      self.window_log_probs(np.zeros((rows, self.context_length), np.int32),
                            np.zeros(rows, np.int32))
      rows *= 2

  def _scorer(self, batch_size: int) -> Feed:
    """The model's feed without a training split, `batch_size` tokens a scoring batch, on
    one device (any batch size divides it)."""
    if batch_size not in self._scorers:
      mesh = parallel.make_mesh('', devices=jax.devices()[:1])
      config = self.config.replace(eval_batch_size=batch_size)
      self._scorers[batch_size] = feed_of(self.lm.model)(config, self.lm, {}, self.boundary_id,
                                                         mesh)
    return self._scorers[batch_size]


def load_trained(workdir: str | os.PathLike) -> TrainedModel | NgramRun:
  """The model of a run's workdir with the parameters its summary reports: the best on
  validation, or the latest where no epoch has finished (a run cut short by --max_steps);
  an n-gram DIR's model (nplm ngram --out) as an NgramRun (nplm.use.ngram_run).

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
  if identity is None and is_ngram_dir(where):
    return load_ngram_run(where)
  if identity is None:  # run.json lost: the copy its checkpoints keep (None if it has none).
    identity = recorded_identity(where)
  if identity is None or not vocab_path.exists():
    raise NoTrainedModelError(f'{shown} holds no training run (no run.json or vocab.txt); '
                              'train one there first')
  config, vocab_fingerprint = _recorded(identity, where)
  config = config.absolute_paths().replace(workdir=str(where))
  try:
    vocab = Vocabulary.load(vocab_path)
  except ValueError as error:  # Bytes that are no UTF-8, a line cut short.
    why = f'it cannot be read: {error}'
  else:
    why = (None if vocab.fingerprint() == vocab_fingerprint else
           f'it does not match the vocabulary recorded in {paths.shown(where / "run.json")}')
  if why is not None:
    raise NoTrainedModelError(f'{paths.shown(vocab_path)} is damaged ({why}); rerun the '
                              'train command of its run to write it again (a finished run is '
                              'not trained again)')
  params = saved_params(where)
  if params is None:
    raise NoTrainedModelError(f'{shown} has no checkpoint yet; let training save one')
  # A vocabulary-parallel run saved its output rows padded; read here on one device.
  params = parallel.unpadded_output_rows(params, vocab.size)
  lm = _model_of(config, vocab, params, where / 'run.json')
  memory.require_fit(config, lm, vocab.counts, training=False)  # Before any evaluation.
  data_fingerprint = identity.get('data_fingerprint')
  spelt, note = (read_spelling(where, config, vocab, data_fingerprint)
                 if lm.model.language_model else (None, None))
  return TrainedModel(config, vocab, lm, params, data_fingerprint,
                      identity.get('tokenizer_sha256'), spelt, note)


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
    # The parameters as its feed initializes them, traced for their shapes only.
    expected = _shapes(jax.eval_shape(
        lambda: feed_of(lm.model).initial_params(config, lm, jax.random.key(0))))
  except ComponentImportError:  # The run is sound; its model's package is missing here.
    raise
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


def _shapes(tree) -> dict[str, tuple[int, ...]]:
  """'model/C/embedding' -> shape, for every array of a parameter tree."""
  leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
  return {'/'.join(str(getattr(key, 'key', key)) for key in path): tuple(np.shape(leaf))
          for path, leaf in leaves}
