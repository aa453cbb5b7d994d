"""--tokenizer, --lowercase, --subword_vocab_size: a corpus is prepared with the tokenizer that
reads typed text; a learned tokenizer (SentencePiece) travels in the prepared dataset and the
workdir; per-word perplexity divides by words counted here, independently."""

import hashlib
import json
import math
import random
import shutil
from pathlib import Path

import pytest

from nplm.cli import summary_lines
from nplm.config import Config, ConfigError
from nplm.data import datasets, tokenizers, typed_text
from nplm.data.sources import source_of
from nplm.data.vocab import END_OF_SENTENCE, UNK
from nplm.trainer import run
from nplm.use import evaluation
from nplm.use.trained import load_trained
from nplm.training.config_checks import validated
from tests import cli

SPLITS = ('train', 'valid', 'test')
NOUNS = ('cat', 'dog', 'river', 'hill', 'bird', 'garden', 'house', 'tree')
VERBS = ('saw', 'liked', 'crossed', 'found', 'watched')


def sentence(rng) -> str:
  """'The dog saw a river.', 'Mr. Smith found the hill, then left!', capitals and punctuation."""
  subject = rng.choice(['The ' + rng.choice(NOUNS), 'Mr. Smith', 'A ' + rng.choice(NOUNS)])
  text = f'{subject} {rng.choice(VERBS)} the {rng.choice(NOUNS)}'
  if rng.random() < 0.3:
    text += f', then {rng.choice(VERBS)} it'
  return text + rng.choice(['.', '!', '?', '.'])


def write_corpus(directory, seed=0):
  rng = random.Random(seed)
  directory.mkdir(parents=True)
  for split, count in zip(SPLITS, (240, 30, 30)):
    (directory / f'{split}.txt').write_text(
        ''.join(sentence(rng) + '\n' for _ in range(count)))
  return directory


def lines_of(path) -> list[str]:
  return path.read_text().splitlines()


def whitespace_words(path) -> int:
  """What a whitespace word model counts: each line's words and its <eos>."""
  return sum(len(line.split()) + 1 for line in lines_of(path))


@pytest.fixture(scope='module')
def corpus_dir(tmp_path_factory):
  return write_corpus(tmp_path_factory.mktemp('text') / 'corpus')


def tiny_config(directory, data_dir, workdir='unused', **fields):
  return Config(workdir=str(workdir), dataset=f'text:{directory}', data_dir=str(data_dir),
                order=3, feature_size=8, hidden_size=8, batch_size=16, eval_batch_size=64,
                epochs=1, log_every=100, checkpoint_every=1000, **fields)


@pytest.fixture(scope='module')
def bpe_run(corpus_dir, tmp_path_factory):
  """A run on BPE subwords (100 pieces), its data dir and summary."""
  base = tmp_path_factory.mktemp('bpe')
  config = tiny_config(corpus_dir, base / 'tfds', base / 'run', tokenizer='bpe',
                       subword_vocab_size=100)
  return config, run(config)


def test_nltk_lowercase_preparation_and_typed_text_agree(corpus_dir, tmp_path):
  config = validated(tiny_config(corpus_dir, tmp_path / 'tfds', tokenizer='nltk',
                       lowercase=True).resolved())
  corpus = datasets.load_dataset(config)
  tokenizer = source_of(config.dataset).tokenizer(config)
  assert tokenizer.name == 'nltk-lower'
  assert [p.name.split('-')[2:4] for p in (tmp_path / 'tfds' / 'nplm_tokens').iterdir()] == [
      ['nltk', 'lower']]  # Its prepared dataset is named after its tokenization.
  want = [token for line in lines_of(corpus_dir / 'train.txt')
          for token in [*tokenizer.tokens(line), END_OF_SENTENCE]]
  assert corpus.vocab.decode(corpus.splits['train']) == want
  # Treebank words, by hand: punctuation apart, lowercased, "Mr." kept whole mid-text.
  assert tokenizer.tokens('Mr. Smith saw the River, then left.') == [
      'mr.', 'smith', 'saw', 'the', 'river', ',', 'then', 'left', '.']
  typed = typed_text.words_of('The cat saw the river.', config.dataset, tokenizer)
  assert typed == ['the', 'cat', 'saw', 'the', 'river', '.']
  assert UNK not in corpus.vocab.decode(corpus.vocab.encode(typed))
  for split in SPLITS:
    assert corpus.stats[split]['words'] == whitespace_words(corpus_dir / f'{split}.txt')


def test_lowercased_characters_are_their_own_dataset(corpus_dir, tmp_path):
  config = tiny_config(corpus_dir, tmp_path / 'tfds', tokens='chars', lowercase=True)
  corpus = datasets.load_dataset(validated(config.resolved()))
  text = (corpus_dir / 'valid.txt').read_text().lower()
  want = [END_OF_SENTENCE if char == '\n' else char for char in text]
  assert corpus.vocab.decode(corpus.splits['valid']) == [
      t if t in corpus.vocab.words else UNK for t in want]


def test_lowercased_subwords_are_learned_and_cut_from_lowercased_text(corpus_dir, tmp_path):
  import sentencepiece
  config = tiny_config(corpus_dir, tmp_path / 'tfds', tokenizer='unigram', lowercase=True,
                       subword_vocab_size=60)
  corpus = datasets.load_dataset(validated(config.resolved()))
  pieces = sentencepiece.SentencePieceProcessor(model_proto=corpus.tokenizer_model)
  want = [token for line in lines_of(corpus_dir / 'train.txt')
          for token in [*pieces.encode(line.lower(), out_type=str), END_OF_SENTENCE]]
  assert corpus.vocab.decode(corpus.splits['train']) == want
  assert not any(character.isupper() for piece in pieces.id_to_piece(list(
      range(pieces.get_piece_size()))) for character in piece)
  tokenizer = tokenizers.tokenizer_of(config, corpus.tokenizer_model)
  assert tokenizer.name == 'unigram60-lower'
  assert tokenizer.tokens('The CAT saw') == pieces.encode('the cat saw', out_type=str)


def test_sentencepiece_round_trips_and_is_learned_the_same_way(corpus_dir):
  lines = lines_of(corpus_dir / 'train.txt')
  for kind in tokenizers.SUBWORD_TOKENIZERS:
    tokenization = tokenizers.Tokenization(tokenizer=kind, subword_vocab_size=60)
    model = tokenization.learn(lines)
    assert tokenization.learn(iter(lines)) == model  # Same text, same model.
    tokenizer = tokenization.tokenizer_of(model)
    assert tokenizer.name == f'{kind}60'
    for line in lines + lines_of(corpus_dir / 'test.txt'):
      pieces = tokenizer.tokens(line)
      assert ''.join(pieces).replace('\u2581', ' ').strip() == line
      assert tokenizer.detokenize(pieces) == line


@pytest.mark.slow
def test_the_workdir_keeps_the_tokenizer_of_its_prepared_data(bpe_run, corpus_dir, tmp_path):
  config, _ = bpe_run
  corpus = datasets.load_dataset(config.resolved())
  saved = Path(config.workdir) / tokenizers.TOKENIZER_FILE
  assert saved.read_bytes() == corpus.tokenizer_model
  trained = load_trained(config.workdir)
  tokenizer = trained.tokenizer
  assert tokenizer.name == 'bpe100'
  want = [token for line in lines_of(corpus_dir / 'train.txt')
          for token in [*tokenizer.tokens(line), END_OF_SENTENCE]]
  assert corpus.vocab.decode(corpus.splits['train']) == want
  # Typed text: known pieces, no <unk>, back to the text.
  typed = tokenizer.tokens('The cat saw the river.')
  assert trained.vocab.unk_id not in trained.vocab.encode(typed).tolist()
  assert tokenizer.detokenize(typed) == 'The cat saw the river.'
  # A workdir is self-contained: its data dir gone, it still reads typed text.
  copy = tmp_path / 'data_gone'
  shutil.copytree(config.data_dir, copy)
  shutil.rmtree(config.data_dir)
  try:
    assert load_trained(config.workdir).tokenizer.tokens('The cat saw the river.') == typed
  finally:
    shutil.copytree(copy, config.data_dir)


@pytest.mark.slow
def test_other_data_is_cut_by_the_models_own_tokenizer(bpe_run, tmp_path):
  config, _ = bpe_run
  trained = load_trained(config.workdir)
  tokenizer = trained.tokenizer
  other = write_corpus(tmp_path / 'other', seed=1)
  for path in other.iterdir():  # Its own pieces would be others: its words spelled backwards.
    path.write_text(''.join(' '.join(word[::-1] for word in line.split()) + '\n'
                            for line in lines_of(path)))
  types, splits = evaluation.dataset_types(
      trained.config.replace(dataset=f'text:{other}', data_dir=str(tmp_path / 'tfds')),
      tokenizer.model)
  for split in SPLITS:
    assert [types[i] for i in splits[split]] == [
        token for line in lines_of(other / f'{split}.txt')
        for token in [*tokenizer.tokens(line), END_OF_SENTENCE]]
  # Its own data, named and cut by its tokenizer again, is the data it was trained on.
  own = evaluation.dataset_types(trained.config.replace(data_dir=str(tmp_path / 'again')),
                                 tokenizer.model)
  assert evaluation.same_data(trained, *own) is True


@pytest.mark.slow
def test_per_word_perplexity_divides_by_whitespace_words(bpe_run, corpus_dir):
  config, summary = bpe_run
  for split in SPLITS:
    words = whitespace_words(corpus_dir / f'{split}.txt')
    assert summary['tokens'][split] > words  # Subwords: more tokens than words.
    assert summary[f'{split}_word_ppl'] == pytest.approx(
        math.exp(summary['nll'][split] / words), rel=1e-12)
    assert summary[f'{split}_ppl'] == pytest.approx(
        math.exp(summary['nll'][split] / summary['tokens'][split]), rel=1e-12)
  lines = summary_lines(summary)
  assert all(f'per word {summary[f"{split}_word_ppl"]:9.2f}' in line
             for split, line in zip(SPLITS, lines))


@pytest.mark.slow
def test_evaluate_gives_a_text_files_perplexity_per_word(bpe_run, corpus_dir, tmp_path):
  """`nplm evaluate --text_file`, typed as a user types it: the same division by the
  file's whitespace words and line ends, counted here."""
  config, _ = bpe_run
  text = tmp_path / 'letter.txt'
  text.write_text('The cat saw the river.\n\nMr. Smith liked the garden, then left!\n')
  done = cli.run('evaluate', f'--workdir={config.workdir}', f'--text_file={text.name}',
                 '--json', cwd=tmp_path)
  assert done.returncode == 0, done.stderr
  result = json.loads(done.stdout)['file']
  assert whitespace_words(text) == 5 + 1 + 1 + 7 + 1  # The blank line: its <eos>.
  assert result['word_ppl'] == pytest.approx(math.exp(result['nll'] / whitespace_words(text)),
                                             rel=1e-12)
  assert result['tokens'] > whitespace_words(text)


@pytest.mark.slow
def test_a_missing_or_damaged_tokenizer_model_is_one_line(bpe_run, tmp_path):
  config, _ = bpe_run
  copy = shutil.copytree(config.workdir, tmp_path / 'run')
  (copy / tokenizers.TOKENIZER_FILE).write_bytes(b'not a model')
  with pytest.raises(ConfigError, match=r'^\S+ was trained with --tokenizer=bpe, .* which is '
                     r'damaged [^\n]*$'):
    _ = load_trained(copy).tokenizer
  (copy / tokenizers.TOKENIZER_FILE).unlink()
  with pytest.raises(ConfigError, match=r'^\S+ was trained with --tokenizer=bpe, .* which '
                     r'cannot be read [^\n]*$'):
    _ = load_trained(copy).tokenizer


def test_a_dataset_prepared_before_word_counts_still_reads(corpus_dir, tmp_path):
  config = validated(tiny_config(corpus_dir, tmp_path / 'tfds').resolved())
  before = datasets.load_dataset(config)
  (metadata_file,) = (tmp_path / 'tfds' / 'nplm_tokens').glob('*/*/metadata.json')
  metadata = json.loads(metadata_file.read_text())
  assert metadata['tokenizer_model'] is None
  old = {key: metadata[key] for key in ('types', 'train_counts', 'tokens', 'sha256', 'source',
                                        'tokenization')}
  old['checksum'] = hashlib.sha256(json.dumps(old, sort_keys=True, ensure_ascii=False,
                                              separators=(',', ':')).encode()).hexdigest()
  metadata_file.write_text(json.dumps(old))
  corpus = datasets.load_dataset(config)
  assert corpus.fingerprint == before.fingerprint and corpus.tokenizer_model is None
  assert all('words' not in corpus.stats[split] for split in SPLITS)
  assert 'words' in before.stats['train']


def test_too_few_subwords_for_the_text_is_one_line_and_leaves_nothing(corpus_dir, tmp_path):
  config = tiny_config(corpus_dir, tmp_path / 'tfds', tokenizer='unigram', subword_vocab_size=10)
  characters = len(set((corpus_dir / 'train.txt').read_text()) - {'\n'})
  with pytest.raises(ConfigError, match=f'^--tokenizer=unigram cannot learn '
                     f'--subword_vocab_size=10 subwords .* at least {characters + 3} '):
    datasets.load_dataset(validated(config.resolved()))
  assert not [path for path in (tmp_path / 'tfds').glob('nplm_tokens/*/*') if path.is_dir()]


@pytest.mark.parametrize('fields, message', [
    ({'dataset': 'brown', 'tokenizer': 'bpe'},
     '--dataset=brown is cut into words as its files are'),
    ({'dataset': 'brown', 'lowercase': True}, '--dataset=brown is cut into words'),
    ({'dataset': 'text:x', 'tokens': 'chars', 'tokenizer': 'bpe'},
     '--tokenizer=bpe cuts words, --tokens=chars reads every character'),
    ({'dataset': 'text:x', 'tokens': 'chars', 'tokenizer': 'nltk'},
     '--tokenizer=nltk cuts words'),
    ({'dataset': 'text:x', 'subword_vocab_size': 100},
     '--subword_vocab_size is read by --tokenizer=bpe, unigram, not --tokenizer=whitespace'),
    ({'dataset': 'text:x', 'tokenizer': 'nltk', 'subword_vocab_size': 100},
     'not --tokenizer=nltk'),
    ({'dataset': 'text:x', 'tokenizer': 'wordpiece'}, "unknown --tokenizer='wordpiece'"),
])
def test_knobs_that_cannot_work_together_are_refused_in_one_line(fields, message):
  with pytest.raises(ConfigError, match='^[^\n]+$') as error:
    validated(Config(workdir='w', **fields))
  assert message in str(error.value)


def test_the_defaults_keep_their_names():
  assert tokenizers.Tokenization.of(Config()).name == 'words'
  assert tokenizers.Tokenization.of(Config(tokens='chars')).name == 'chars'
  assert tokenizers.Tokenization.of(Config(tokens='chars', lowercase=True)).name == 'chars-lower'
  assert tokenizers.Tokenization.of(Config(tokenizer='unigram', lowercase=True)).name == (
      'unigram8000-lower')


@pytest.mark.parametrize('tokenizer', ['nltk', 'bpe', 'unigram'])
def test_a_corpus_own_unknown_token_stays_one_token(tokenizer):
  """PTB and WikiText write `<unk>` in their text: every tokenizer keeps it whole (cut
  apart, it would read as the pieces '<', 'unk', '>'), learns nothing from it, and writes it
  back as itself (NLTK's detokenizer joins "mat ." as "mat.", which reads back the same)."""
  lines = ['the cat <unk> sat on the mat .', '<unk> dogs ran to the <unk> park .'] * 100
  tokenization = tokenizers.Tokenization(tokenizer=tokenizer, subword_vocab_size=40)
  model = tokenization.learn(lines) if tokenization.learned else None
  cut = tokenization.tokenizer_of(model)
  for line in lines[:2]:
    tokens = cut.tokens(line)
    assert tokens.count('<unk>') == line.count('<unk>')
    assert not any('<' in token or '>' in token for token in tokens if token != '<unk>')
    assert cut.tokens(cut.detokenize(tokens)) == tokens
    if tokenization.learned:  # Subwords give back the text itself.
      assert cut.detokenize(tokens) == line


def test_every_piece_of_a_learned_tokenizer_keeps_an_id(bpe_run):
  """Typed text can be cut into pieces the training split never used (BPE's intermediate
  merges): each still has an id, with a training count of 0, after every piece seen."""
  import sentencepiece
  config, _ = bpe_run
  vocab = load_trained(config.workdir).vocab
  processor = sentencepiece.SentencePieceProcessor(
      model_file=str(Path(config.workdir) / tokenizers.TOKENIZER_FILE))
  pieces = {processor.id_to_piece(i) for i in range(processor.get_piece_size())
            if not (processor.is_control(i) or processor.is_unknown(i))}
  assert pieces <= set(vocab.words)
  unseen = [word for word in vocab.words if vocab.counts[vocab.id_of(word)] == 0]
  assert unseen and set(unseen) <= pieces | {END_OF_SENTENCE, UNK}
  assert list(vocab.counts) == sorted(vocab.counts, reverse=True)  # Frequency order kept.
  # New words of the corpus's letters: cut into pieces, every one of them known.
  typed = processor.encode('The watchers found hills, gardens and birdhouses!', out_type=str)
  assert vocab.unk_id not in vocab.encode(typed).tolist()


def test_another_runs_tokenizer_model_in_the_workdir_is_refused_in_one_line(
    bpe_run, corpus_dir, tmp_path):
  config, _ = bpe_run
  copy = shutil.copytree(config.workdir, tmp_path / 'run')
  other = tokenizers.Tokenization(tokenizer='bpe', subword_vocab_size=60).learn(
      lines_of(corpus_dir / 'train.txt'))
  (copy / tokenizers.TOKENIZER_FILE).write_bytes(other)
  with pytest.raises(ConfigError, match=r'^\S+tokenizer.model is not the tokenizer its run '
                     r'learned [^\n]*$'):
    _ = load_trained(copy).tokenizer
  identity = json.loads((copy / 'run.json').read_text())
  del identity['tokenizer_sha256']  # As an older nplm recorded it: read as it is.
  (copy / 'run.json').write_text(json.dumps(identity))
  assert load_trained(copy).tokenizer.model == other


def test_too_few_subwords_for_sentencepiece_itself_names_the_smallest_size_that_works(
    corpus_dir):
  lines = lines_of(corpus_dir / 'train.txt')
  with pytest.raises(ConfigError, match=r'^--tokenizer=bpe cannot learn --subword_vocab_size=1 '
                     r'subwords [^\n]* give --subword_vocab_size=\d+ or more$') as raised:
    tokenizers.Tokenization(tokenizer='bpe', subword_vocab_size=1).learn(lines)
  smallest = int(str(raised.value).split('=')[-1].split()[0])
  assert tokenizers.Tokenization(tokenizer='bpe', subword_vocab_size=smallest).learn(lines)
  with pytest.raises(ConfigError):
    tokenizers.Tokenization(tokenizer='bpe', subword_vocab_size=smallest - 1).learn(lines)


def test_a_training_split_of_one_long_line_learns_the_pieces_of_its_sentences(corpus_dir):
  """SentencePiece skips a sentence over 4192 bytes: the line is cut at spaces, and since no
  piece spans a space, it learns what the same text in short lines learns."""
  lines = lines_of(corpus_dir / 'train.txt')
  assert len(' '.join(lines).encode()) > 4192
  tokenization = tokenizers.Tokenization(tokenizer='bpe', subword_vocab_size=100)
  pieces = [tokenization.tokenizer_of(tokenization.learn(text)).pieces
            for text in (lines, [' '.join(lines)])]
  assert set(pieces[1]) == set(pieces[0])


def test_a_lowercased_learned_tokenizer_gives_its_model(corpus_dir):
  tokenization = tokenizers.Tokenization(tokenizer='bpe', lowercase=True, subword_vocab_size=60)
  model = tokenization.learn(lines_of(corpus_dir / 'train.txt'))
  assert tokenization.tokenizer_of(model).model == model
