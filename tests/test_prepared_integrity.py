"""A prepared text dataset holds exactly what it is named after, or is not there: a corpus
edited while it is prepared, a hand-edited metadata.json, splits without a word, a data dir
that cannot be written or fills up, and SIGTERM in the middle of a preparation. Each is one
line naming the file or flag (SIGTERM: status 75 and a message), and nothing half-made is
left for a later run to read. Tiny corpora in temporary data dirs; expectations are counted
from the files the tests write."""

import errno
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from tensorflow_datasets.core import file_adapters

from nplm import paths
from nplm.config import Config
from nplm.data import datasets, lines, prepared
from nplm.data import corpus as corpus_lib
from nplm.data.acquire import CorpusError, CorruptCorpusError
from nplm.data.vocab import END_OF_SENTENCE, UNK
from nplm.stop_requests import Interrupted
from nplm.training.config_checks import validated
from tests import cli

SPLITS = ('train', 'valid', 'test')
TEXT = {'train': 'the cat sat on the mat\n\nthe dog sat on a log\n',
        'valid': 'the cat ran\n', 'test': 'a dog sat\n'}


def write_dir(directory, texts=TEXT):
  directory.mkdir(parents=True, exist_ok=True)
  for split, text in texts.items():
    (directory / f'{split}.txt').write_text(text)
  return directory


def load(data_dir, path, **fields):
  """Every training type kept (--unk_max_count=0): the words read back are the words written."""
  config = Config(workdir='unused', dataset=f'text:{path}', data_dir=str(data_dir),
                  **{'unk_max_count': 0, **fields})
  return datasets.load_dataset(validated(config.resolved()))


def shown(path) -> str:
  return re.escape(paths.shown(path))


def words_of(text) -> list[str]:
  """Independently: each line's words and <eos> (PyTorch's word_language_model count)."""
  return [token for line in text.splitlines() for token in [*line.split(), END_OF_SENTENCE]]


def prepared_datasets(data_dir) -> list:
  """Every prepared dataset (finished or not) in the data dir."""
  root = data_dir / 'nplm_tokens'
  return sorted(p for p in root.glob('*/*') if p.is_dir()) if root.exists() else []


# --- (a) what was read is what the dataset is named after ------------------------------------

def test_reading_a_file_hashes_exactly_the_bytes_it_holds(tmp_path):
  path = tmp_path / 'mixed.txt'
  data = 'one two\r\nthree\rfour\n\nfive'.encode() * 1000
  path.write_bytes(data)
  for stop in (None, 0, 2, 10**6):  # Past `stop` the rest is read, for the digest only.
    digests = []
    read = list(lines.read_lines(path, stop, on_end=digests.append))
    everything = data.decode().replace('\r\n', '\n').replace('\r', '\n').split('\n')
    assert read == everything[:stop]
    assert digests == [hashlib.sha256(data).hexdigest()]
  digests = []
  next(lines.read_lines(path, on_end=digests.append))  # A read left unfinished.
  assert digests == []


def edit_during_preparation(monkeypatch, method, path, new_bytes, when=lambda *args: True):
  """Rewrites `path` once, when NplmTokens.<method> is called (with `when(args)`): after the
  fingerprint has named the dataset, while TFDS prepares it (`_chunks(split)` is called as
  TFDS starts to write the split, after the splits before it)."""
  real, edited = getattr(prepared.NplmTokens, method), []

  def editing(self, *args):
    if not edited and when(*args):
      path.write_bytes(new_bytes)
      edited.append(True)
    return real(self, *args)
  monkeypatch.setattr(prepared.NplmTokens, method, editing)
  return edited


@pytest.mark.parametrize('layout, when', [
    ('text:DIR', 'before the read'),
    ('text:FILE', 'before the read'),
    ('text:FILE', 'between two splits'),  # One file read once per split.
])
def test_a_corpus_edited_while_it_is_prepared_is_refused_and_never_cached(
    tmp_path, monkeypatch, layout, when):
  if layout == 'text:DIR':
    source = write_dir(tmp_path / 'corpus')
    edited_file = source / 'train.txt'
  else:
    source = edited_file = tmp_path / 'corpus.txt'
    edited_file.write_text(''.join(f'the word{i} sat\n' for i in range(20)))
  original = edited_file.read_bytes()
  edited_bytes = original.replace(b'the', b'intruder')
  data_dir = tmp_path / 'tfds'
  if when == 'before the read':
    edited = edit_during_preparation(monkeypatch, '_split_generators', edited_file, edited_bytes)
  else:
    edited = edit_during_preparation(monkeypatch, '_chunks', edited_file, edited_bytes,
                                     when=lambda split: split == 'valid')
  with pytest.raises(CorpusError, match=(
      f'^{shown(edited_file)} changed while it was being prepared \\(.*\\); nothing of it was '
      'kept: rerun once it no longer changes$')):
    load(data_dir, source)
  assert edited == [True]
  assert prepared_datasets(data_dir) == []  # No dataset under the old file's fingerprint.
  monkeypatch.undo()

  edited_file.write_bytes(original)  # Restored: its own text, not the edited one.
  restored = load(data_dir, source)
  assert 'intruder' not in restored.vocab.words
  if layout == 'text:DIR':
    train_words = set(words_of(TEXT['train']))  # The vocabulary: training types only.
    expected = [t if t in train_words else UNK for split in SPLITS for t in words_of(TEXT[split])]
  else:
    cut = original.decode().splitlines(keepends=True)  # 20 lines: 16 train, 2 valid, 2 test.
    train_words = set(words_of(''.join(cut[:16])))
    expected = [t if t in train_words else UNK for t in words_of(original.decode())]
  assert [t for s in SPLITS for t in restored.vocab.decode(restored.splits[s])] == expected
  edited_file.write_bytes(edited_bytes)  # Edited for good: prepared as that text.
  assert 'intruder' in load(data_dir, source).vocab.words
  assert len(prepared_datasets(data_dir)) == 2


# --- (b) the metadata's checksum ---------------------------------------------------------------

def swap_two_types(metadata):
  types = metadata['types']
  first, second = types.index('cat'), types.index('dog')
  types[first], types[second] = types[second], types[first]


def add_a_count(metadata):
  metadata['train_counts'][metadata['types'].index('cat')] += 1


def shift_a_token_count(metadata):
  metadata['tokens']['valid'] -= 1
  metadata['tokens']['test'] += 1


@pytest.mark.parametrize('edit', [swap_two_types, add_a_count, shift_a_token_count])
def test_an_edited_metadata_json_is_damage_not_other_words(tmp_path, edit):
  directory = write_dir(tmp_path / 'corpus')
  corpus = load(tmp_path / 'tfds', directory)
  assert corpus.vocab.decode(corpus.splits['train']) == words_of(TEXT['train'])
  (dataset,) = prepared_datasets(tmp_path / 'tfds')
  metadata_file = dataset / 'metadata.json'
  metadata = json.loads(metadata_file.read_text())
  edit(metadata)
  metadata_file.write_text(json.dumps(metadata))
  with pytest.raises(CorruptCorpusError, match=(
      f'^{re.escape(str(dataset))} is damaged \\(its metadata.json does not match its '
      'checksum\\); delete it and rerun to prepare it again$')):
    load(tmp_path / 'tfds', directory)


def test_a_dataset_another_process_prepared_meanwhile_is_read_as_it_was_written(
    tmp_path, monkeypatch):
  """Two commands read one new corpus at once (two `nplm evaluate`s of edited text): the
  one whose builder was made before the other's preparation was in place reads what the
  other wrote (it had read its own empty metadata: "lacks 'checksum'", damage)."""
  directory = write_dir(tmp_path / 'corpus')
  made, builders = prepared.NplmTokens.__init__, []

  def made_then_other_prepares(self, *args, **kwargs):
    made(self, *args, **kwargs)
    builders.append(self)
    if len(builders) == 1:  # The other command, between this one's look and its use.
      load(tmp_path / 'tfds', directory)
  monkeypatch.setattr(prepared.NplmTokens, '__init__', made_then_other_prepares)
  corpus = load(tmp_path / 'tfds', directory)
  assert len(builders) == 2 and len(prepared_datasets(tmp_path / 'tfds')) == 1
  assert corpus.vocab.decode(corpus.splits['train']) == words_of(TEXT['train'])
  assert [len(corpus.splits[split]) for split in SPLITS] == [
      len(words_of(TEXT[split])) for split in SPLITS]


def test_a_metadata_json_without_its_checksum_is_damage(tmp_path):
  directory = write_dir(tmp_path / 'corpus')
  load(tmp_path / 'tfds', directory)
  (dataset,) = prepared_datasets(tmp_path / 'tfds')
  metadata = json.loads((dataset / 'metadata.json').read_text())
  del metadata['checksum']
  (dataset / 'metadata.json').write_text(json.dumps(metadata))
  with pytest.raises(CorruptCorpusError, match=f"^{re.escape(str(dataset))} is damaged \\(its "
                     "metadata lacks 'checksum'\\); delete it and rerun"):
    load(tmp_path / 'tfds', directory)


# --- (c) splits without a word --------------------------------------------------------------

@pytest.mark.parametrize('text, tokens, problem', [
    ('', 'words', 'is empty'),
    ('\n', 'words', 'has no words, only 1 blank line'),
    ('\n  \n\t\n', 'words', 'has no words, only 3 blank lines'),
    ('\n\n', 'chars', 'has no characters, only 2 blank lines'),
])
@pytest.mark.parametrize('split', SPLITS)
def test_a_split_file_without_a_word_is_refused_before_anything_is_written(
    tmp_path, split, text, tokens, problem):
  directory = write_dir(tmp_path / 'corpus', {**TEXT, split: text})
  unit = 'word' if tokens == 'words' else 'character'
  with pytest.raises(CorpusError, match=(
      f'^{shown(directory / f"{split}.txt")} {problem}: every split needs at least one {unit}; '
      f'put text in it \\(--dataset=text:{shown(directory)} reads its {split} split from it\\)$')):
    load(tmp_path / 'tfds', directory, tokens=tokens)
  assert not (tmp_path / 'tfds').exists()


def test_a_space_is_a_character_so_a_line_of_spaces_is_text_for_chars(tmp_path):
  directory = write_dir(tmp_path / 'corpus', {**TEXT, 'valid': '  \n'})
  corpus = load(tmp_path / 'tfds', directory, tokens='chars')
  assert corpus.vocab.decode(corpus.splits['valid']) == [' ', ' ', END_OF_SENTENCE]


@pytest.mark.parametrize('text, message', [
    ('', '{file} is empty: text:FILE needs at least one word in each of the train, valid and '
         'test splits it is cut into$'),
    ('\n' * 10, '{file} has no words, only 10 blank lines: text:FILE needs at least one word'),
    ('a b\n' * 8 + '\nc d\n', 'the valid split of {file} \\(its lines 9 to 9 of 10, cut by '
                              'fractions 0.8,0.1,0.1\\) has no words, only blank lines: every '
                              'split needs at least one; give other --split_fractions'),
])
def test_a_text_file_without_a_word_in_a_split_is_refused_before_anything_is_written(
    tmp_path, text, message):
  path = tmp_path / 'corpus.txt'
  path.write_text(text)
  with pytest.raises(CorpusError, match='^' + message.format(file=shown(path))):
    load(tmp_path / 'tfds', path)
  assert not (tmp_path / 'tfds').exists()


def test_split_fractions_that_leave_a_split_empty_write_nothing(tmp_path):
  path = tmp_path / 'corpus.txt'
  path.write_text('a b\nc d\ne f\n')
  with pytest.raises(CorpusError, match=(f'^{shown(path)} has 3 lines: cut by fractions '
                                         '0.9,0.05,0.05, the valid, test split would be empty')):
    load(tmp_path / 'tfds', path, split_fractions='0.9,0.05,0.05')
  assert not (tmp_path / 'tfds').exists()


def test_an_empty_split_is_one_line_and_status_2_from_the_command(tmp_path):
  write_dir(tmp_path / 'corpus', {**TEXT, 'valid': ''})
  result = cli.run('train', '--dataset=text:corpus', '--data_dir=tfds', '--workdir=run',
                   cwd=tmp_path)
  assert result.returncode == 2, result.stderr
  assert result.stderr.splitlines()[-1] == (
      'error: corpus/valid.txt is empty: every split needs at least one word; put text in it '
      '(--dataset=text:corpus reads its valid split from it)')
  assert 'Traceback' not in result.stderr
  assert not (tmp_path / 'tfds').exists() and not (tmp_path / 'run').exists()


# --- (d) a data dir that cannot hold the preparation -----------------------------------------

@pytest.mark.parametrize('under', ['', 'sub'])
def test_a_data_dir_that_is_a_file_is_named(tmp_path, under):
  directory = write_dir(tmp_path / 'corpus')
  a_file = tmp_path / 'a_file'
  a_file.write_text('not a directory\n')
  data_dir = a_file / under if under else a_file
  with pytest.raises(CorpusError, match=(
      f'^--data_dir={shown(data_dir)} cannot hold the prepared dataset \\({shown(a_file)} is '
      'a file, not a directory\\); give a writable directory as --data_dir$')):
    load(data_dir, directory)


def refuse_writes_under(monkeypatch, data_dir):
  """As a read-only --data_dir (a chmod does not stop root): creating anything in it fails."""
  import os
  real_mkdir = os.mkdir

  def mkdir(path, *args, **kwargs):
    inside = paths.absolute(path).startswith(str(data_dir))
    if inside and os.path.isdir(os.path.dirname(paths.absolute(path))):
      raise PermissionError(errno.EACCES, 'Permission denied', os.fspath(path))
    return real_mkdir(path, *args, **kwargs)  # A missing parent: FileNotFoundError, as ever.
  monkeypatch.setattr(os, 'mkdir', mkdir)


def test_a_read_only_data_dir_is_named_yet_reads_what_it_holds(tmp_path, monkeypatch):
  directory = write_dir(tmp_path / 'corpus')
  data_dir = tmp_path / 'tfds'
  data_dir.mkdir()
  refuse_writes_under(monkeypatch, data_dir)
  with pytest.raises(CorpusError, match=(
      f'^--data_dir={shown(data_dir)} cannot hold the prepared dataset \\(Permission denied: '
      f'{shown(data_dir / "nplm_tokens")}\\); give a writable directory as --data_dir$')):
    load(data_dir, directory)
  monkeypatch.undo()
  corpus = load(data_dir, directory)  # Prepared while writable; read-only, it still reads.
  refuse_writes_under(monkeypatch, data_dir)
  assert load(data_dir, directory).fingerprint == corpus.fingerprint


@pytest.mark.parametrize('failure', [
    OSError(errno.ENOSPC, 'No space left on device'),
    RuntimeError('ArrayRecordWriter: write failed: No space left on device'),
])
def test_a_full_data_dir_is_named_and_leaves_nothing(tmp_path, monkeypatch, failure):
  directory = write_dir(tmp_path / 'corpus')
  data_dir = tmp_path / 'tfds'

  def full_disk(cls, path, examples):
    raise failure
  monkeypatch.setattr(file_adapters.ArrayRecordFileAdapter, 'write_examples',
                      classmethod(full_disk))
  with pytest.raises(CorpusError, match=(
      f'^no space left on the disk of --data_dir={shown(data_dir)} while preparing '
      'text:corpus \\(words\\); nothing of it was kept: free some space \\(or give another '
      '--data_dir\\) and rerun the same command$')):
    load(data_dir, directory)
  assert prepared_datasets(data_dir) == []
  monkeypatch.undo()
  assert load(data_dir, directory).stats['valid']['tokens'] == len(words_of(TEXT['valid']))


def test_a_full_data_dir_is_what_the_command_names_not_the_workdir(tmp_path):
  write_dir(tmp_path / 'corpus')
  full_disk = ('import errno, sys\n'
               'from tensorflow_datasets.core import file_adapters\n'
               'def write_examples(cls, path, examples):\n'
               '  raise OSError(errno.ENOSPC, "No space left on device")\n'
               'file_adapters.ArrayRecordFileAdapter.write_examples = classmethod(write_examples)\n'
               'from nplm.cli.train import run_program\n'
               'run_program(["nplm train", *sys.argv[1:]])\n')
  result = cli.run('--dataset=text:corpus', '--data_dir=tfds', '--workdir=run',
                   code=full_disk, cwd=tmp_path)
  assert result.returncode == 2, result.stderr
  assert result.stderr.splitlines()[-1] == (
      'error: no space left on the disk of --data_dir=tfds while preparing text:corpus (words); '
      'nothing of it was kept: free some space (or give another --data_dir) and rerun the same '
      'command')
  assert prepared_datasets(tmp_path / 'tfds') == [] and not (tmp_path / 'run').exists()


# --- (e) SIGTERM during a preparation -------------------------------------------------------

@pytest.mark.slow
def test_sigterm_during_a_preparation_exits_75_with_a_message_and_leaves_nothing(tmp_path):
  corpus = tmp_path / 'corpus'
  words = [f'w{i}' for i in range(997)]
  lines = (' '.join(words[(7 * i + 3 * j) % 997] for j in range(12)) for i in range(200_000))
  write_dir(corpus, {'train': ''.join(line + '\n' for line in lines),
                     'valid': 'w1 w2 w3\n', 'test': 'w4 w5\n'})  # 2.6M tokens to prepare.
  data_dir = tmp_path / 'tfds'
  child = subprocess.Popen(
      [sys.executable, '-m', 'nplm.cli', 'train', '--dataset=text:corpus', '--data_dir=tfds',
       '--workdir=run'], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True)
  try:
    started = time.monotonic()
    while not list(data_dir.glob('nplm_tokens/*/incomplete.*')):  # TFDS is writing.
      assert child.poll() is None, child.communicate()
      assert time.monotonic() - started < 120, 'the preparation never began'
      time.sleep(0.005)
    child.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    _, stderr = child.communicate(timeout=60)
    took = time.monotonic() - sent
  finally:
    child.kill()
  assert child.returncode == 75, stderr
  assert took < 5, f'{took:.1f} s from SIGTERM to the exit'
  assert stderr.splitlines()[-1] == (
      'Interrupted (SIGTERM) while preparing text:corpus (words) in --data_dir=tfds; rerun the '
      'same command to start it again (an unfinished preparation is never used).')
  assert prepared_datasets(data_dir) == [], [list(p.rglob('*')) for p in prepared_datasets(data_dir)]  # Neither a dataset nor an incomplete.* one.
  assert not (tmp_path / 'run').exists()
  again = load(data_dir, corpus)  # The next run prepares it whole.
  assert again.stats['train']['tokens'] == 200_000 * 13
  assert again.vocab.size == len(words) + 2  # And <unk>, <eos>: counted, not read back.
  assert UNK in again.vocab.words


@pytest.mark.filterwarnings('ignore::pytest.PytestUnraisableExceptionWarning')  # As meant.
def test_a_stop_request_whose_exception_python_dropped_still_stops_the_preparation(
    tmp_path, monkeypatch):
  """A handler's exception raised inside a __del__ (a finalizer the garbage collector runs
  at any point) is printed and dropped by Python: the preparation's next safe point raises
  it again, rather than finishing the preparation and training on."""
  directory = write_dir(tmp_path / 'corpus')
  real_indices, before = prepared.NplmTokens._indices, signal.getsignal(signal.SIGTERM)

  def indices(self, tokens):
    class SignalledWhileFinalized:
      def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)  # The handler runs here; Python drops its error.
    SignalledWhileFinalized()
    return real_indices(self, tokens)
  monkeypatch.setattr(prepared.NplmTokens, '_indices', indices)
  with pytest.raises(Interrupted, match=(
      f'^Interrupted \\(SIGTERM\\) while preparing text:corpus \\(words\\) in '
      f'--data_dir={shown(tmp_path / "tfds")}; rerun the same command')):
    load(tmp_path / 'tfds', directory)
  assert prepared_datasets(tmp_path / 'tfds') == []
  assert signal.getsignal(signal.SIGTERM) is before  # Restored once preparation ends.


# --- (f) what a reader can tell about the data it loaded -------------------------------------

def test_a_reader_can_tell_whether_it_loaded_the_data_a_model_trained_on(tmp_path):
  directory = write_dir(tmp_path / 'corpus')
  trained_on = load(tmp_path / 'tfds', directory)
  config = Config(workdir='unused', dataset=f'text:{directory}', data_dir=str(tmp_path / 'tfds'),
                  unk_max_count=0)
  prepared_tokens = datasets.load_prepared(config.resolved())

  def fingerprint_through(vocab, tokens):
    remap = vocab.encode(tokens.types)
    return corpus_lib.data_fingerprint(vocab, {s: remap[tokens.read(s)] for s in SPLITS})
  assert fingerprint_through(trained_on.vocab, prepared_tokens) == trained_on.fingerprint
  (directory / 'test.txt').write_text('a cat sat\n')  # Edited after training.
  edited = datasets.load_prepared(config.resolved())
  assert fingerprint_through(trained_on.vocab, edited) != trained_on.fingerprint
