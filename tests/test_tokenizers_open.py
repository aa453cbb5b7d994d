"""experiments.tokenizers_open's raw text: Brown's words as written, laid out as `nplm export`
lays out Brown, with no vocabulary applied (no <unk>)."""

import re

import pytest

from experiments.tokenizers_open import write_raw_text
from nplm.cli.export import export_splits
from nplm.data import brown, load_corpus
from tests.conftest import FIXTURE_DIR, FIXTURE_FILES, FIXTURE_WORDS, TINY_SPLIT

SPLITS = ('train', 'valid', 'test')


def fixture_paragraphs(name: str) -> list[list[str]]:
  """A fixture file read directly: paragraphs parted by blank lines, each `word/tag` the word
  before its last slash (a word may hold one: knife/coating/nn)."""
  blocks = re.split(r'\n[ \t]*\n', (FIXTURE_DIR / name).read_text())
  return [[token[:token.rindex('/')] for token in block.split()]
          for block in blocks if block.strip()]


def fixture_splits() -> dict[str, list[str]]:
  """Every word, `</p>` after each paragraph and `</text>` after each file, cut as the paper's
  split is (the tiny corpus's sizes)."""
  stream = []
  for name in FIXTURE_FILES:
    for paragraph in fixture_paragraphs(name):
      stream += [*paragraph, '</p>']
    stream.append('</text>')
  valid_start = TINY_SPLIT['train_tokens']
  test_start = valid_start + TINY_SPLIT['valid_tokens']
  return {'train': stream[:valid_start], 'valid': stream[valid_start:test_start],
          'test': stream[test_start:]}


def lines(directory, split: str) -> list[list[str]]:
  return [line.split(' ') for line in (directory / f'{split}.txt').read_text().splitlines()]


@pytest.fixture(scope='module')
def raw_dir(tiny_data_dir, tmp_path_factory):
  texts = brown.load_texts(tiny_data_dir, FIXTURE_DIR, FIXTURE_WORDS, FIXTURE_FILES)
  return write_raw_text(texts, tmp_path_factory.mktemp('raw') / 'brown_raw', **TINY_SPLIT)


def test_raw_text_holds_every_word_as_the_fixture_writes_it(raw_dir):
  expected = fixture_splits()
  for split in SPLITS:
    words = [word for line in lines(raw_dir, split) for word in line]
    assert words == expected[split], split
    assert '<unk>' not in words


def test_raw_text_is_the_export_but_where_the_export_has_unk(raw_dir, tiny_data_dir, tmp_path):
  # unk_max_count=0: the export keeps every training word, so only unseen words differ.
  corpus = load_corpus(data_dir=tiny_data_dir, corpus_dir=FIXTURE_DIR, unk_max_count=0,
                       expected_words=FIXTURE_WORDS, expected_files=FIXTURE_FILES, **TINY_SPLIT)
  export_splits(corpus, tmp_path, 'brown')
  unknown = 0
  for split in SPLITS:
    raw, exported = lines(raw_dir, split), lines(tmp_path, split)
    assert [len(line) for line in raw] == [len(line) for line in exported], split
    for raw_line, exported_line in zip(raw, exported):
      differing = [(r, e) for r, e in zip(raw_line, exported_line) if r != e]
      assert all(e == '<unk>' for _, e in differing), differing
      unknown += len(differing)
  assert unknown  # The tiny valid and test splits hold words that training never saw.
