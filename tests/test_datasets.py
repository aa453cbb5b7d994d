"""--dataset and --tokens: text files, one file cut by lines, a TFDS dataset built offline,
characters; the vocabulary knobs; preparation once, atomic, checked; the run's data identity.

Every expectation is counted independently from the fixture files the tests write.
"""

import collections
import json
import math
import tempfile

import numpy as np
import pytest
import tensorflow_datasets as tfds
from etils import epath

from nplm.run_files.checkpoint import IncompatibleCheckpointError
from nplm.config import Config, ConfigError
from nplm.data import brown, brown_source, datasets, prepared, text_sources, tfds_dirs
from nplm.data.acquire import CorpusError, CorpusNotFoundError
from nplm.data.vocab import END_OF_SENTENCE, UNK, Vocabulary
from nplm.trainer import run
from tests.conftest import FIXTURE_DIR, FIXTURE_FILES, FIXTURE_WORDS, TINY_SPLIT
from nplm.training.config_checks import validated

SPLITS = ('train', 'valid', 'test')
TEXT = {
    'train': 'the cat sat on the mat\n\nthe dog sat  on a log\n a <unk> ran away \n',
    'valid': 'the cat ran\n\n',
    'test': 'a bird sat on the mat\nthe end',  # No final line break: still a line.
}


def write_dir(directory, texts=TEXT, names='{split}.txt'):
  directory.mkdir(parents=True, exist_ok=True)
  for split, text in texts.items():
    (directory / names.format(split=split)).write_text(text)
  return directory


def lines_of(text):
  """An independent reading: the lines a text file holds (a last line without a break too)."""
  return text.split('\n')[:-1] if text.endswith('\n') else text.split('\n')


def expected_tokens(text, tokens='words'):
  """PyTorch word_language_model's count: each line's words (or characters) and one <eos>."""
  out = []
  for line in lines_of(text):
    out += (line.split() if tokens == 'words' else list(line)) + [END_OF_SENTENCE]
  return out


def seen_as(tokens, vocab):
  """Tokens as a vocabulary reads them: those it lacks as <unk>."""
  return [t if t in vocab.words else UNK for t in tokens]


def load(tmp_path, dataset, **fields):
  config = Config(workdir='unused', dataset=dataset, data_dir=str(tmp_path / 'tfds'), **fields)
  return datasets.load_dataset(validated(config.resolved()))


# --- text:DIR ---------------------------------------------------------------------------

def test_text_dir_counts_every_line_end_and_blank_line(tmp_path):
  corpus = load(tmp_path, f'text:{write_dir(tmp_path / "ptb")}')
  for split in SPLITS:
    want = expected_tokens(TEXT[split])
    assert corpus.vocab.decode(corpus.splits[split]) == seen_as(want, corpus.vocab)
    assert corpus.stats[split]['tokens'] == len(want)
  assert corpus.stats['valid']['tokens'] == 5  # 'the cat ran <eos>' and a blank line's <eos>.
  assert corpus.vocab.words[corpus.boundary_id] == END_OF_SENTENCE
  # The default keeps every training type (as published PTB results): |V| = types + <unk>.
  train_types = set(expected_tokens(TEXT['train']))
  assert corpus.vocab.size == len(train_types | {UNK})
  assert corpus.stats['test']['unk_rate'] == pytest.approx(2 / 10)  # 'bird' and 'end'.


def test_a_corpus_that_has_unk_keeps_it_as_the_unknown_token(tmp_path):
  corpus = load(tmp_path, f'text:{write_dir(tmp_path / "ptb")}')
  assert corpus.vocab.words.count(UNK) == 1
  train = expected_tokens(TEXT['train'])
  assert corpus.vocab.counts[corpus.vocab.unk_id] == train.count(UNK) == 1
  # An unseen word in valid or test becomes that same id.
  test = corpus.vocab.decode(corpus.splits['test'])
  assert test[:2] == ['a', UNK]


def test_ptb_and_wikitext_file_names_are_found(tmp_path):
  ptb = write_dir(tmp_path / 'ptb', names='ptb.{split}.txt')
  wiki = write_dir(tmp_path / 'wiki', names='wiki.{split}.tokens')
  for directory in (ptb, wiki):
    corpus = load(tmp_path, f'text:{directory}')
    assert corpus.stats['train']['tokens'] == len(expected_tokens(TEXT['train']))


def test_a_missing_split_file_names_what_is_expected(tmp_path):
  directory = write_dir(tmp_path / 'ptb', {'train': 'a b\n', 'test': 'a\n'})
  with pytest.raises(CorpusNotFoundError, match='no valid split: it needs one of valid.txt'):
    load(tmp_path, f'text:{directory}')


def test_a_file_that_is_not_utf8_is_named(tmp_path):
  directory = write_dir(tmp_path / 'ptb')
  (directory / 'valid.txt').write_bytes('caf\xe9 au lait\n'.encode('latin-1'))
  with pytest.raises(CorpusError, match=r'valid.txt is not UTF-8 text'):
    load(tmp_path, f'text:{directory}')


# --- vocabulary knobs --------------------------------------------------------------------

def test_unk_max_count_and_max_vocab_size_keep_the_most_frequent_ties_by_token():
  counts = {'<eos>': 1, 'b': 5, 'a': 5, 'c': 3, 'd': 3, 'e': 2, 'f': 1}
  vocab = Vocabulary.from_counts(list(counts), np.array(list(counts.values())), unk_max_count=0,
                                 max_size=5, reserved=(UNK, END_OF_SENTENCE))
  # <unk> and <eos> reserved; room for 3: a, b (5 each, by token), then c beats d (ties: c).
  assert set(vocab.words) == {UNK, END_OF_SENTENCE, 'a', 'b', 'c'}
  assert vocab.counts[vocab.unk_id] == 3 + 2 + 1  # d, e, f merged.
  assert list(vocab.words[:2]) == ['<unk>', 'a'] and vocab.size == 5
  # Ids follow training frequency, ties by the token: the sampling heads rely on it.
  assert list(vocab.counts) == sorted(vocab.counts, reverse=True)


def test_special_tokens_never_become_unk(tmp_path):
  directory = write_dir(tmp_path / 'ptb')
  corpus = load(tmp_path, f'text:{directory}', unk_max_count=1000)
  assert set(corpus.vocab.words) == {UNK, END_OF_SENTENCE}
  assert corpus.vocab.decode(corpus.splits['valid']).count(END_OF_SENTENCE) == 2
  with pytest.raises(ValueError, match='leaves no room'):
    load(tmp_path, f'text:{directory}', max_vocab_size=1)


def test_max_vocab_size_bounds_the_vocabulary(tmp_path):
  corpus = load(tmp_path, f'text:{write_dir(tmp_path / "ptb")}', max_vocab_size=4)
  counts = collections.Counter(expected_tokens(TEXT['train']))
  # <unk>, <eos> and the two most frequent others: 'the' (3), then of 'a', 'on', 'sat' (2
  # each) the first by the token.
  assert set(corpus.vocab.words) == {UNK, END_OF_SENTENCE, 'the', 'a'}
  assert corpus.vocab.counts[corpus.vocab.unk_id] == (
      sum(counts.values()) - counts['the'] - counts['a'] - counts[END_OF_SENTENCE])


# --- text:FILE ----------------------------------------------------------------------------

def test_text_file_is_cut_by_line_fractions(tmp_path):
  lines = [' '.join(f'w{i}' for i in range(k % 5)) for k in range(40)]
  path = tmp_path / 'one.txt'
  path.write_text('\n'.join(lines) + '\n')
  corpus = load(tmp_path, f'text:{path}', split_fractions='0.5,0.25,0.25')
  cut = {'train': lines[:20], 'valid': lines[20:30], 'test': lines[30:]}
  for split in SPLITS:
    assert corpus.vocab.decode(corpus.splits[split]) == expected_tokens(
        '\n'.join(cut[split]) + '\n')


def test_text_file_is_cut_by_token_counts_at_line_ends(tmp_path):
  path = tmp_path / 'one.txt'
  path.write_text('a b c\nd e\nf\ng h i j\nk\n')  # Tokens with <eos>: 4, 3, 2, 5, 2.
  corpus = load(tmp_path, f'text:{path}', train_tokens=6, valid_tokens=2)
  # Train takes lines until 6 tokens are reached (4 + 3 = 7), valid until 2 more (2).
  assert [corpus.stats[s]['tokens'] for s in SPLITS] == [7, 2, 7]


def test_a_text_file_too_short_to_cut_is_refused(tmp_path):
  path = tmp_path / 'one.txt'
  path.write_text('a b\n')
  with pytest.raises(CorpusError, match='split would be empty'):
    load(tmp_path, f'text:{path}')


# --- characters ---------------------------------------------------------------------------

def test_chars_make_every_character_a_token_and_the_line_end_eos(tmp_path):
  corpus = load(tmp_path, f'text:{write_dir(tmp_path / "ptb")}', tokens='chars')
  for split in SPLITS:
    assert corpus.vocab.decode(corpus.splits[split]) == seen_as(
        expected_tokens(TEXT[split], 'chars'), corpus.vocab)
  assert ' ' in corpus.vocab.words and END_OF_SENTENCE in corpus.vocab.words


def test_brown_chars_are_the_text_of_brown_words_with_the_marks_kept():
  words = ['The', 'jury', 'said', '</p>', 'It', 'was', '</p>', '</text>']
  assert brown_source.words_to_chars(words) == [
      *'The jury said', '</p>', *'It was', '</p>', '</text>']


def test_brown_chars_split_the_same_text_as_brown_words(tiny_data_dir):
  checks = dict(expected_words=FIXTURE_WORDS, expected_files=FIXTURE_FILES)
  words = brown_source.tokens_from_texts(brown.load_texts(tiny_data_dir, FIXTURE_DIR, **checks))
  chars = brown_source.load_corpus(tiny_data_dir, FIXTURE_DIR, unk_max_count=0,
                                 tokenization='chars', **checks, **TINY_SPLIT)
  starts = {'train': 0, 'valid': TINY_SPLIT['train_tokens'],
            'test': TINY_SPLIT['train_tokens'] + TINY_SPLIT['valid_tokens']}
  ends = {'train': starts['valid'], 'valid': starts['test'], 'test': len(words)}
  for split in SPLITS:
    text = brown_source.words_to_chars(words[starts[split]:ends[split]])
    assert chars.vocab.decode(chars.splits[split]) == seen_as(text, chars.vocab)


# --- TFDS by name --------------------------------------------------------------------------

class NplmTestLines(tfds.core.GeneratorBasedBuilder):
  """A TFDS text dataset made offline: one sentence per example, three splits."""
  VERSION = tfds.core.Version('1.0.0')

  @tfds.core.utils.classproperty
  @classmethod
  def code_path(cls) -> epath.Path:  # As nplm.data.brown.Brown's.
    return epath.Path(__file__)

  def _info(self):
    return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(
        {'sentence': tfds.features.Text(), 'id': np.int64}), disable_shuffling=True)

  def _split_generators(self, dl_manager):
    return {split: self._generate_examples(split) for split in ('train', 'validation', 'test')}

  def _generate_examples(self, split):
    for i, line in enumerate(lines_of(TEXT[{'validation': 'valid'}.get(split, split)])):
      yield i, {'sentence': line, 'id': i}


@pytest.fixture
def tfds_dir(tmp_path, monkeypatch):
  # TFDS leaves an empty directory in the system's temporary directory for each builder of a
  # dataset not yet prepared (a user's dataset, as this one); keep it in the test's own.
  monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
  data_dir = tmp_path / 'tfds'
  NplmTestLines(data_dir=str(data_dir), file_format='array_record').download_and_prepare()
  return data_dir


def test_a_tfds_dataset_by_name_is_tokenized_like_text(tfds_dir, tmp_path):
  corpus = load(tmp_path, 'tfds:nplm_test_lines:sentence')
  for split in SPLITS:
    assert corpus.vocab.decode(corpus.splits[split]) == seen_as(expected_tokens(TEXT[split]),
                                                                corpus.vocab)


def test_tfds_splits_map_other_split_names_and_slices(tfds_dir, tmp_path):
  corpus = load(tmp_path, 'tfds:nplm_test_lines:sentence',
                tfds_splits='train[:2],train[2:],test')
  line_tokens = [len(line.split()) + 1 for line in lines_of(TEXT['train'])]
  assert corpus.stats['train']['tokens'] == sum(line_tokens[:2])
  assert corpus.stats['valid']['tokens'] == sum(line_tokens[2:])


def test_tfds_mistakes_name_what_exists(tfds_dir, tmp_path):
  with pytest.raises(CorpusError, match="no feature 'text'; its features: .*sentence"):
    load(tmp_path, 'tfds:nplm_test_lines')
  with pytest.raises(CorpusError, match="no split 'dev'.*its splits: test, train, validation"):
    load(tmp_path, 'tfds:nplm_test_lines:sentence', tfds_splits='train,dev,test')
  with pytest.raises(CorpusNotFoundError, match='tfds:no_such_dataset'):
    load(tmp_path, 'tfds:no_such_dataset')


# --- preparation ----------------------------------------------------------------------------

def test_preparation_happens_once_and_a_change_of_content_is_another_dataset(tmp_path,
                                                                              monkeypatch):
  directory = write_dir(tmp_path / 'ptb')
  first = load(tmp_path, f'text:{directory}')
  prepared_dirs = list((tmp_path / 'tfds' / 'nplm_tokens').iterdir())
  assert len(prepared_dirs) == 1

  def no_second_preparation(*args, **kwargs):
    raise AssertionError('prepared twice')
  monkeypatch.setattr(prepared.NplmTokens, '_generate_examples', no_second_preparation)
  again = load(tmp_path, f'text:{directory}')
  assert again.fingerprint == first.fingerprint
  monkeypatch.undo()
  (directory / 'test.txt').write_text('a changed test split\n')
  changed = load(tmp_path, f'text:{directory}')
  assert changed.fingerprint != first.fingerprint
  assert len(list((tmp_path / 'tfds' / 'nplm_tokens').iterdir())) == 2


def test_preparing_leaves_nothing_in_the_systems_temporary_directory(tmp_path, monkeypatch):
  system_tmp = tmp_path / 'system_tmp'
  system_tmp.mkdir()
  monkeypatch.setattr(tempfile, 'tempdir', str(system_tmp))
  load(tmp_path, f'text:{write_dir(tmp_path / "ptb")}')
  brown.load_texts(tmp_path / 'tfds', FIXTURE_DIR, expected_words=FIXTURE_WORDS,
                   expected_files=FIXTURE_FILES)
  assert list(system_tmp.iterdir()) == []


def test_an_interrupted_preparation_leaves_nothing_and_a_rerun_completes(tmp_path, monkeypatch):
  directory = write_dir(tmp_path / 'ptb')
  real_lines = text_sources.TextFiles.lines

  def lines_then_fail(self, split):
    if split == 'valid':
      raise KeyboardInterrupt  # As Ctrl-C in the middle of the preparation.
    return real_lines(self, split)
  monkeypatch.setattr(text_sources.TextFiles, 'lines', lines_then_fail)
  with pytest.raises(KeyboardInterrupt):
    load(tmp_path, f'text:{directory}')
  leftovers = [p for p in (tmp_path / 'tfds').rglob('*') if p.is_file()
               and 'nplm_tokens' in str(p) and 'incomplete' not in str(p)
               and p.name != tfds_dirs.LOCK_NAME]
  assert leftovers == []
  monkeypatch.undo()
  corpus = load(tmp_path, f'text:{directory}')
  assert corpus.vocab.decode(corpus.splits['valid']) == expected_tokens(TEXT['valid'])


def test_a_damaged_prepared_file_is_refused(tmp_path):
  directory = write_dir(tmp_path / 'ptb')
  load(tmp_path, f'text:{directory}')
  (record,) = (tmp_path / 'tfds').rglob('nplm_tokens-train.array_record*')
  data = bytearray(record.read_bytes())
  data[len(data) // 2] ^= 0xFF
  record.write_bytes(bytes(data))
  with pytest.raises(CorpusError, match='delete it and rerun'):
    load(tmp_path, f'text:{directory}')


# --- configuration and the run's identity ---------------------------------------------------

def test_bad_dataset_settings_are_named():
  for fields, message in [({'dataset': 'ptb'}, "unknown --dataset='ptb'"),
                          ({'tokens': 'bytes'}, "unknown --tokens='bytes'"),
                          ({'dataset': 'text:x', 'split_fractions': '0.8,0.3,0.1'},
                           'summing to 1'),
                          ({'dataset': 'tfds:x', 'train_tokens': 5, 'valid_tokens': 5},
                           'comes split'),
                          ({'max_vocab_size': -1}, '--max_vocab_size')]:
    with pytest.raises(ConfigError, match=message):
      validated(Config(workdir='w', **fields).resolved())


def test_brown_defaults_resolve_to_the_papers_settings():
  brown = Config(workdir='w').resolved()
  assert (brown.unk_max_count, brown.train_tokens, brown.valid_tokens) == (3, 800_000, 200_000)
  text = Config(workdir='w', dataset='text:x').resolved()
  # Text's --unk_max_count is the training counts' to decide (vocab.trained_unk_max_count).
  assert (text.unk_max_count, text.train_tokens) == (-1, 0)
  # A run recorded before --dataset existed is the same run as today's Brown default.
  old = {**Config(workdir='w').to_dict(), 'unk_max_count': 3, 'train_tokens': 800_000,
         'valid_tokens': 200_000}
  for new_field in ('dataset', 'tokens', 'max_vocab_size', 'split_fractions', 'tfds_splits'):
    old.pop(new_field)
  assert Config(workdir='w').incompatibilities(old) == []


def tiny_run_config(tmp_path, dataset, **fields):
  return Config(workdir=str(tmp_path / 'run'), dataset=dataset, data_dir=str(tmp_path / 'tfds'),
                order=3, feature_size=8, hidden_size=8, batch_size=8, eval_batch_size=16,
                epochs=1, log_every=100, checkpoint_every=100, **fields)


@pytest.mark.slow
def test_a_workdir_refuses_to_continue_on_other_data(tmp_path):
  directory = write_dir(tmp_path / 'ptb')
  config = tiny_run_config(tmp_path, f'text:{directory}')
  summary = run(config)
  assert summary['dataset'] == f'text:{directory}'
  identity = json.loads((tmp_path / 'run' / 'run.json').read_text())
  assert identity['data_fingerprint'] == summary['data_fingerprint']
  # Same words, so the same vocabulary, but other text: the data fingerprint tells.
  (directory / 'valid.txt').write_text('the cat sat\n\n')
  with pytest.raises(IncompatibleCheckpointError, match='now holds other text'):
    run(config.replace(epochs=2))
  with pytest.raises(IncompatibleCheckpointError, match='dataset'):
    run(config.replace(dataset=f'text:{write_dir(tmp_path / "other")}'))


@pytest.mark.slow
def test_a_character_model_reports_bits_per_character(tmp_path):
  config = tiny_run_config(tmp_path, f'text:{write_dir(tmp_path / "ptb")}', tokens='chars')
  summary = run(config)
  for split in SPLITS:
    assert summary['tokens'][split] == len(expected_tokens(TEXT[split], 'chars'))
    assert summary['bpc'][split] == pytest.approx(
        math.log2(summary[f'{split}_ppl']), rel=1e-12)
