"""The data's user mistakes and damage: each is one CorpusError (or ConfigError) naming the path
or value and what to do, never a traceback or a silent misuse. Tiny corpora, prepared in
temporary data dirs (the session's shared one is never damaged)."""

import fcntl
import re
import shutil
import threading
import time

import pytest

from nplm.config import Config
from nplm.data import brown, brown_source, datasets, prepared, text_sources, tfds_dirs
from nplm.data.acquire import CorpusError, CorruptCorpusError
from nplm.errors import ConfigError
from tests.conftest import FIXTURE_DIR, FIXTURE_FILES, FIXTURE_WORDS, write_text_corpus
from nplm.training.config_checks import validated

FIXTURE = dict(expected_words=FIXTURE_WORDS, expected_files=FIXTURE_FILES)


def copy_fixture(destination, old=b'', new=b''):
  """The tiny Brown corpus copied, `old` replaced by `new` once in ca01."""
  shutil.copytree(FIXTURE_DIR, destination)
  ca01 = destination / 'ca01'
  assert old in ca01.read_bytes()
  ca01.write_bytes(ca01.read_bytes().replace(old, new, 1))
  return destination


def load_text(data_dir, path, **fields):
  config = Config(workdir='unused', dataset=f'text:{path}', data_dir=str(data_dir), **fields)
  return datasets.load_dataset(validated(config.resolved()))


def quoted(path) -> str:
  return re.escape(str(path))


# --- --corpus_dir against the prepared Brown --------------------------------------------------

def test_a_corpus_dir_other_than_the_one_brown_was_prepared_from_is_refused(tmp_path):
  original = copy_fixture(tmp_path / 'original')
  altered = copy_fixture(tmp_path / 'altered', b'Jury/nn-tl', b'Panel/nn-tl')  # Same words.
  for made_from, asked in [(original, altered), (altered, original)]:
    data_dir = tmp_path / f'tfds_{made_from.name}'
    texts = brown.load_texts(data_dir, made_from, **FIXTURE)
    dataset = data_dir / 'brown' / '1.0.0'
    with pytest.raises(CorpusError, match=(
        f'^{quoted(dataset)} was prepared from another corpus than --corpus_dir='
        f'{quoted(asked)}; delete {quoted(dataset)} to prepare it again from --corpus_dir, or '
        'drop --corpus_dir to use the prepared one$')):
      brown.load_texts(data_dir, asked, **FIXTURE)
    assert brown.load_texts(data_dir, made_from, **FIXTURE) == texts
    assert brown.load_texts(data_dir, **FIXTURE) == texts  # No --corpus_dir: the prepared one.
    assert ('Panel' in texts[0][0]) == (made_from == altered)


def test_a_brown_prepared_without_a_fingerprint_cannot_vouch_for_a_corpus_dir(tmp_path):
  data_dir = tmp_path / 'tfds'
  texts = brown.load_texts(data_dir, FIXTURE_DIR, **FIXTURE)
  dataset = data_dir / 'brown' / '1.0.0'
  (dataset / 'metadata.json').unlink(missing_ok=True)  # As an older nplm prepared it.
  with pytest.raises(CorpusError, match=(
      f'{quoted(dataset)} records no fingerprint .* --corpus_dir={quoted(FIXTURE_DIR)}; delete '
      f'{quoted(dataset)} to prepare it again from --corpus_dir, or drop --corpus_dir')):
    brown.load_texts(data_dir, FIXTURE_DIR, **FIXTURE)
  assert brown.load_texts(data_dir, **FIXTURE) == texts


def test_a_corpus_dir_without_the_files_says_it_can_be_dropped(tmp_path):
  data_dir = tmp_path / 'tfds'
  brown.load_texts(data_dir, FIXTURE_DIR, **FIXTURE)
  partial = copy_fixture(tmp_path / 'partial')
  (partial / 'cr01').unlink()
  with pytest.raises(CorruptCorpusError, match=f'{quoted(partial)} lacks 1 of the 5 corpus '
                     'files: cr01; delete .* or drop --corpus_dir to use the prepared one'):
    brown.load_texts(data_dir, partial, **FIXTURE)


# --- damaged prepared datasets ---------------------------------------------------------------

@pytest.fixture(scope='module')
def prepared_root(tmp_path_factory):
  """Brown and a text:DIR corpus prepared once, to be copied before each damage."""
  root = tmp_path_factory.mktemp('prepared')
  brown.load_texts(root / 'brown', FIXTURE_DIR, **FIXTURE)
  load_text(root / 'text', write_text_corpus(root / 'ptb'))
  return root


def truncate(path):
  path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def flip_a_byte(path):
  data = bytearray(path.read_bytes())
  data[len(data) // 2] ^= 0xFF
  path.write_bytes(bytes(data))


def first_data_file(dataset):
  return sorted(dataset.glob('*.array_record-*'))[0]


DAMAGE = {
    'dataset_info.json deleted': lambda dataset: (dataset / 'dataset_info.json').unlink(),
    'dataset_info.json truncated': lambda dataset: truncate(dataset / 'dataset_info.json'),
    'metadata.json truncated': lambda dataset: truncate(dataset / 'metadata.json'),
    'a data file deleted': lambda dataset: first_data_file(dataset).unlink(),
    'a data file truncated': lambda dataset: truncate(first_data_file(dataset)),
    'a data file emptied': lambda dataset: first_data_file(dataset).write_bytes(b''),
    'a data file altered': lambda dataset: flip_a_byte(first_data_file(dataset)),
}
LOADS = {'brown': lambda data_dir, root: brown.load_texts(data_dir, FIXTURE_DIR, **FIXTURE),
         'text': lambda data_dir, root: load_text(data_dir, root / 'ptb')}


@pytest.mark.parametrize('damage', DAMAGE)
@pytest.mark.parametrize('kind', LOADS)
def test_a_damaged_prepared_dataset_is_named_to_be_deleted(prepared_root, tmp_path, kind,
                                                           damage):
  data_dir = shutil.copytree(prepared_root / kind, tmp_path / 'tfds')
  (dataset,) = {info.parent for info in data_dir.rglob('dataset_info.json')}
  DAMAGE[damage](dataset)
  with pytest.raises(CorruptCorpusError, match=f'^{quoted(dataset)} is damaged .*; delete it '
                     'and rerun to prepare it again$'):
    LOADS[kind](data_dir, prepared_root)


# --- files that are not UTF-8 ----------------------------------------------------------------

@pytest.mark.parametrize('expected_words', [FIXTURE_WORDS, None])  # Checked first, or not.
def test_a_brown_file_that_is_not_utf8_is_named_with_its_line(tmp_path, expected_words):
  corpus_dir = copy_fixture(tmp_path / 'latin1', b'Jury/nn-tl', 'Jüry/nn-tl'.encode('latin1'))
  raw = (corpus_dir / 'ca01').read_bytes()
  line = raw[:raw.index(b'J\xfcry')].count(b'\n') + 1
  with pytest.raises(CorruptCorpusError, match=(
      f'^{quoted(corpus_dir / "ca01")} is not UTF-8 text \\(line {line}: .*\\); convert it to '
      'UTF-8')):
    brown.load_texts(tmp_path / 'tfds', corpus_dir, expected_words, FIXTURE_FILES)


def test_a_text_file_that_is_not_utf8_is_named_with_its_line(tmp_path):
  path = tmp_path / 'one.txt'
  path.write_bytes(b'a b\nc d\n' * 5 + b'caf\xe9 au lait\n' + b'e f\n' * 5)
  with pytest.raises(CorpusError, match=f'^{quoted(path)} is not UTF-8 text \\(line 11: .*\\); '
                     'convert it to UTF-8'):
    load_text(tmp_path / 'tfds', path)


# --- token counts beyond the corpus ----------------------------------------------------------

def test_token_counts_beyond_a_text_file_name_the_counts_and_its_size(tmp_path):
  path = tmp_path / 'one.txt'
  path.write_text('a b c\nd e\nf\n')  # Tokens with <eos>: 4, 3, 2.
  assert [load_text(tmp_path / 'ok', path, train_tokens=4, valid_tokens=3).stats[split]['tokens']
          for split in ('train', 'valid', 'test')] == [4, 3, 2]
  for train, valid, empty in [(4, 4, 'test'), (8, 1, 'valid, test'), (20, 5, 'valid, test')]:
    with pytest.raises(ConfigError, match=(
        f'^--train_tokens={train} and --valid_tokens={valid} leave the {empty} split of '
        f'{quoted(path)} empty: it has 9 tokens in 3 lines .*; give smaller counts$')):
      load_text(tmp_path / f'tfds_{train}', path, train_tokens=train, valid_tokens=valid)


def test_token_counts_for_a_text_dir_are_refused_not_ignored(tmp_path):
  directory = write_text_corpus(tmp_path / 'ptb')
  with pytest.raises(ConfigError, match=f'--train_tokens and --valid_tokens cut one file '
                     f'\\(text:FILE\\); {quoted(directory)} is a directory'):
    load_text(tmp_path / 'tfds', directory, train_tokens=100, valid_tokens=10)


def test_token_counts_beyond_brown_name_the_counts_and_its_size(tiny_data_dir):
  tokens = len(brown_source.tokens_from_texts(brown.load_texts(tiny_data_dir, FIXTURE_DIR, **FIXTURE)))
  with pytest.raises(ConfigError, match=(
      f'cannot split {tokens} tokens into 600 train, 100 valid .*; give positive --train_tokens '
      f'and --valid_tokens that sum to less than {tokens}$')):
    brown_source.load_corpus(tiny_data_dir, FIXTURE_DIR, train_tokens=600, valid_tokens=100,
                       **FIXTURE)


# --- killed and concurrent preparations ------------------------------------------------------

def text_dataset_parent(tmp_path):
  """A text corpus and the directory its prepared versions (and leftovers) go into."""
  source = text_sources.text_source(str(write_text_corpus(tmp_path / 'ptb')), 'words',
                                    text_sources.SplitPlan())
  return source, tmp_path / 'tfds' / 'nplm_tokens' / prepared.config_name(source)


def test_what_killed_preparations_left_is_removed_by_the_next(tmp_path):
  parents = {prepared.NplmTokens.VERSION: text_dataset_parent(tmp_path)[1],
             brown.Brown.VERSION: tmp_path / 'tfds' / 'brown'}
  for version, parent in parents.items():
    leftover = parent / f'incomplete.K1LLED_{version}'
    leftover.mkdir(parents=True)  # As TFDS left it when SIGKILL stopped its preparation.
    (leftover / 'nplm_tokens-train.array_record-00000-of-00001').write_bytes(b'')
  load_text(tmp_path / 'tfds', tmp_path / 'ptb')
  brown.load_texts(tmp_path / 'tfds', FIXTURE_DIR, **FIXTURE)
  for version, directory in parents.items():
    assert sorted(p.name for p in directory.iterdir()) == [tfds_dirs.LOCK_NAME, str(version)]


def test_a_preparation_in_progress_is_waited_for_not_removed(tmp_path):
  source, parent = text_dataset_parent(tmp_path)
  parent.mkdir(parents=True)
  in_progress = parent / f'incomplete.OTHER0_{prepared.NplmTokens.VERSION}'
  holding, intact = threading.Event(), []

  def another_preparer():  # Its own open file: flock excludes it as another process.
    with open(parent / tfds_dirs.LOCK_NAME, 'a') as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      in_progress.mkdir()
      holding.set()
      time.sleep(0.3)  # The main thread reaches the lock meanwhile.
      prepared.NplmTokens(source=source, data_dir=str(tmp_path / 'tfds')).download_and_prepare()
      intact.append(in_progress.exists())
      in_progress.rmdir()

  thread = threading.Thread(target=another_preparer)
  thread.start()
  holding.wait()
  corpus = load_text(tmp_path / 'tfds', tmp_path / 'ptb')  # Waits, then reads theirs.
  thread.join()
  assert intact == [True]
  assert corpus.stats['train']['tokens'] == sum(
      len(line.split()) + 1 for line in (tmp_path / 'ptb' / 'train.txt').read_text().splitlines())
