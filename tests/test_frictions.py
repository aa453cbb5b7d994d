"""Issue 42, the smaller frictions a new user met, each against an independent computation:
a mistyped command or setting named with its close match, one sentence scored as one result,
neighbours' words as arguments and read as the model reads typed text, control characters
shown escaped, generate streaming any --length and counting sentences as a reader does."""

import itertools
import os
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from nplm import api, display
from nplm.cli import predict as predict_program
from nplm.cli import rank as rank_program
from nplm.cli import score as score_program
from nplm.config import Config
from nplm.data import tokenizers
from nplm.data.vocab import END_OF_SENTENCE, PARAGRAPH_END, TEXT_END, UNK, Vocabulary
from nplm.errors import ConfigError
from nplm.run_files.saved_params import saved_params
from nplm.trainer import run
from nplm.use import generation
from nplm.use.generation import Sampling, as_text, generate, generate_text, shown_unknowns
from nplm.use.prediction import predictions
from nplm.use.trained import load_trained
from tests.conftest import write_text_corpus
from tests.test_generation import BigramReader, reader_count
from tests import cli

ROOT = Path(__file__).parent.parent
ESCAPE = '\x1b[31m'  # An ANSI escape: red text on a terminal.


def nplm(*args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
  return cli.run(*args, cwd=cwd, timeout=timeout)


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """Tiny NNLMs on the fixture's paragraphs as text:DIR (mixed case): one as typed, one
  trained --lowercase; {name: workdir}."""
  root = tmp_path_factory.mktemp('frictions')
  corpus = write_text_corpus(root / 'text')
  workdirs = {'cased': root / 'cased', 'lower': root / 'lower'}
  for name, workdir in workdirs.items():
    run(Config(workdir=str(workdir), dataset=f'text:{corpus}', data_dir=str(root / 'tfds'),
               order=3, feature_size=8, hidden_size=12, batch_size=16, eval_batch_size=64,
               epochs=1, patience=1, log_every=1000, checkpoint_every=1000,
               lowercase=name == 'lower').resolved())
  return workdirs


# --- 1, 2: a mistyped command or setting ----------------------------------------------------

@pytest.mark.slow
def test_a_mistyped_command_is_one_line_naming_the_close_match(tmp_path):
  typo, unknown = nplm('trian', cwd=tmp_path), nplm('xyzzy', cwd=tmp_path)
  assert typo.returncode == unknown.returncode == 2
  assert typo.stderr == ("error: unknown command 'trian'; did you mean 'train'? "
                         '(nplm --help lists the commands)\n')
  assert unknown.stderr == "error: unknown command 'xyzzy' (nplm --help lists the commands)\n"
  assert typo.stdout == unknown.stdout == ''


def test_a_mistyped_setting_is_a_config_error_naming_the_close_match():
  with pytest.raises(ConfigError, match=r"^unknown setting 'datset'; did you mean 'dataset'\?$"):
    api.train({'datset': 'text:corpus', 'workdir': 'runs/x'})
  with pytest.raises(ConfigError, match=r"^unknown setting 'zzz' \(`nplm train --help`"):
    api._configs({'zzz': 1})
  with pytest.raises(ConfigError, match=r"^unknown sampling setting 'lenght'; did you mean "
                                        r"'length'\?$"):
    api.Model(read=None).generate('the', lenght=5)


# --- 3: one sentence, one result ------------------------------------------------------------

@pytest.mark.slow
def test_one_sentence_gives_one_result_and_a_list_a_list(runs):
  model = api.load(runs['cased'])
  sentences = ['The jury said it', 'It was the election']
  listed = model.score(sentences)
  one = model.score(sentences[0])
  assert not isinstance(one, list)
  assert one.as_dict() == listed[0].as_dict() == model.score(sentences[:1])[0].as_dict()
  texts = ['The jury said it', 'The jury said it\nIt was the election']
  assert model.perplexity(texts) == [model.perplexity(text) for text in texts]
  assert model.predict(sentences, k=3) == [model.predict(text, k=3) for text in sentences]
  with pytest.raises(ConfigError, match='give a list of sentences, not one string'):
    model.rank('The jury said it')
  with pytest.raises(ConfigError, match='not int'):
    model.score(42)


# --- 4: neighbours' words -------------------------------------------------------------------

def brute_force_nearest(workdir: Path, word: str, k: int) -> list[str]:
  """The k words of the saved C most cosine-similar to `word`, itself first."""
  vocab = Vocabulary.load(workdir / 'vocab.txt')
  C = np.asarray(saved_params(workdir)['model']['C']['embedding'], np.float64)
  unit = C / np.linalg.norm(C, axis=1, keepdims=True)
  target = vocab.id_of(word)
  cosines = [(float(unit[i] @ unit[target]), -i) for i in range(len(C)) if i != target]
  return [word] + [vocab.words[-i] for _, i in sorted(cosines, reverse=True)[:k - 1]]


def listed_words(stdout: str) -> dict[str, list[str]]:
  blocks, query = {}, None
  for line in stdout.splitlines():
    if line.startswith(' '):
      blocks[query].append(line.split()[1])
    else:
      query = line
      blocks[query] = []
  return blocks


@pytest.mark.slow
def test_neighbours_takes_words_as_arguments_and_reads_them_as_the_model_does(runs):
  cased, lower = runs['cased'], runs['lower']
  done = nplm('neighbours', f'--workdir={cased.name}', 'jury', 'said', '--words=the', '--k=4',
              cwd=cased.parent)
  assert done.returncode == 0, done.stderr
  assert listed_words(done.stdout) == {word: brute_force_nearest(cased, word, 4)
                                       for word in ('jury', 'said', 'the')}
  assert 'jury' in Vocabulary.load(lower / 'vocab.txt').words
  assert 'Jury' not in Vocabulary.load(lower / 'vocab.txt').words
  done = nplm('neighbours', f'--workdir={lower.name}', 'Jury', '--words=ZEBRAS,jurry',
              '--analogy=The,Jury,said', '--k=3', cwd=lower.parent)
  assert done.returncode == 0, done.stderr
  assert done.stderr.strip().splitlines()[-1] == ('not in the vocabulary, skipped: ZEBRAS, '
                                                  'jurry (did you mean jury?)')
  blocks = listed_words(done.stdout)
  assert list(blocks) == ['jury (typed Jury)', 'the - jury + said (typed The - Jury + said)']
  assert blocks['jury (typed Jury)'] == brute_force_nearest(lower, 'jury', 3)


# --- 5: control characters shown escaped ----------------------------------------------------

@pytest.mark.slow
def test_control_characters_print_escaped_and_are_scored_as_given(runs):
  model = load_trained(runs['cased'])
  typed = f'The {ESCAPE}jury\x1b[0m said\r it'
  (score,) = list(score_program.scored(model, [typed]))
  plain = list(score_program.scored(model, ['The jury said it']))[0]
  assert score.text == typed and score.log_prob != plain.log_prob  # Scored as typed:
  assert score.tokens[1].oov and not plain.tokens[1].oov  # '\x1b[31mjury' is no word.
  lines = [*score_program.report_lines([score], details=True),
           *rank_program.report_lines([score, plain])]
  assert not any(re.search(r'[\x00-\x1f\x7f]', line) for line in lines)
  escaped = 'The \\x1b[31mjury\\x1b[0m said\\r it'
  assert lines[0].endswith(escaped) and f'{UNK} (\\x1b[31mjury\\x1b[0m)' in lines[2]
  assert any(line.endswith(escaped) for line in lines[-2:])
  prompt, best = predictions(model, typed, 2)
  shown = predict_program.report([typed], [best], [prompt])
  assert shown.splitlines()[0] == escaped and '\x1b' not in shown
  assert display.printable('tab\there, bidi \u202e, NBSP\u00a0é') == \
      'tab\\there, bidi \\u202e, NBSP\u00a0é'
  done = nplm('score', f'--workdir={runs["cased"]}', typed, cwd=runs['cased'].parent)
  assert done.returncode == 0 and '\x1b' not in done.stdout, done.stderr
  assert f'ln {score.log_prob:9.2f}' in done.stdout and escaped in done.stdout


# --- 6: generate streams --------------------------------------------------------------------

def fake_model(tokenizer, words, sentence_end=END_OF_SENTENCE, successor=None):
  """A model over `words` whose next token is `successor[last]` with p = 0.9 (the rest evenly
  spread), read by `tokenizer`."""
  words = (UNK, TEXT_END, END_OF_SENTENCE, PARAGRAPH_END, *words)
  vocab = Vocabulary(words, np.ones(len(words), np.int64), 0)
  table = np.full((len(words), len(words)), 0.1 / (len(words) - 1))
  for word, following in (successor or {}).items():
    table[vocab.id_of(word), vocab.id_of(following)] = 0.9
  boundary = vocab.id_of(sentence_end or TEXT_END)
  return types.SimpleNamespace(
      vocab=vocab, boundary_id=boundary, sentence_end=sentence_end, tokenizer=tokenizer,
      next_words=lambda: BigramReader(np.log(table), boundary))


def tokenizer_and_words(kind: str):
  if kind == 'words':
    return tokenizers.Tokenizer(), ('the', 'jury', 'said', '.', 'it')
  if kind == 'chars':
    return tokenizers.Characters(), tuple('thejury .,3')
  if kind == 'nltk':
    return tokenizers.NltkWords(), ('The', 'jury', 'said', '.', '``', "''", 'do', "n't", "'s")
  tokenization = tokenizers.Tokenization(tokenizer='bpe', subword_vocab_size=40)
  tokenizer = tokenization.tokenizer_of(tokenization.learn(
      ['the cat sat on the mat .', 'dogs ran to the park , did they ?'] * 50))
  return tokenizer, tokenizer.pieces[:20]


@pytest.mark.parametrize('kind,piece_tokens', [
    *itertools.product(('words', 'chars', 'bpe'), (1, 3, 1000)),
    # NLTK's detokenizer reads quotes across a whole line: exact where lines are whole.
    ('nltk', 1000)])
def test_text_written_in_pieces_is_the_whole_text(kind, piece_tokens):
  tokenizer, words = tokenizer_and_words(kind)
  model = fake_model(tokenizer, words)
  rng = np.random.default_rng(piece_tokens)
  for _ in range(20):
    tokens = [str(token) for token in rng.choice(
        [*words, END_OF_SENTENCE], rng.integers(0, 40), p=[0.9 / len(words)] * len(words) + [0.1])]
    pieces = list(generation.written(model, tokens, piece_tokens))
    assert ''.join(pieces) == as_text(model, tokens)
    assert all(pieces)


def test_a_line_without_end_is_written_as_it_comes():
  model = fake_model(tokenizers.Tokenizer(), ('the', 'jury'))
  endless = itertools.cycle(['the', 'jury'])  # Never a line end.
  first = list(itertools.islice(generation.written(model, endless, 4), 3))
  assert first == ['the jury the jury', ' the jury the jury', ' the jury the jury']


@pytest.mark.slow
def test_a_huge_length_prints_as_it_goes_and_stops_on_a_signal(runs):
  """The old program drew every token before printing any (and held them all)."""
  workdir = runs['cased']
  env = {**os.environ, 'PYTHONPATH': str(ROOT)}
  child = subprocess.Popen([sys.executable, '-m', 'nplm.cli', 'generate', f'--workdir={workdir}',
                            '--length=1000000000', '--seed=5'], cwd=workdir.parent, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  os.set_blocking(child.stdout.fileno(), False)
  shown, started = b'', time.monotonic()
  while len(shown) < 300 and child.poll() is None and time.monotonic() - started < 120:
    shown += child.stdout.read() or b''
    time.sleep(0.05)
  child.send_signal(signal.SIGTERM)
  signalled = time.monotonic()
  rest, stderr = child.communicate(timeout=60)
  assert time.monotonic() - signalled < 20
  assert child.returncode == 75, stderr
  assert 'Traceback' not in stderr.decode()
  assert stderr.decode().strip().splitlines()[-1].startswith('Interrupted (SIGTERM)')
  assert len(shown) >= 300
  # Token t's draw does not depend on the length: the start is a short sample's start.
  (short,) = generate_text(load_trained(workdir), '', Sampling(200), seed=5)
  assert len(short) > 300 and (shown + rest).decode().startswith(short[:300])


# --- 7: sentences counted as a reader counts them ------------------------------------------

PUNCTUATED = {END_OF_SENTENCE: 'the', 'the': 'jury', 'jury': '.', '.': 'it', 'it': 'said',
              'said': '!', '!': END_OF_SENTENCE}


@pytest.mark.parametrize('sentences,want', [
    (1, 'the jury .'),  # '.' then a word: the sentence ended before 'it', which is left out.
    (2, 'the jury . it said ! <eos>'),  # '!' then the line end: one more, no third.
    (3, 'the jury . it said ! <eos> the jury .'),
    (0, 'the jury . it said ! <eos> the jury . it')])
def test_sentences_end_at_their_marks_and_at_line_ends(sentences, want):
  model = fake_model(tokenizers.Tokenizer(), ('the', 'jury', '.', 'it', 'said', '!'),
                     successor=PUNCTUATED)
  (ids,) = generate(model, [], Sampling(11, temperature=0, sentences=sentences))
  assert ' '.join(model.vocab.decode(ids)) == want


def test_characters_end_a_sentence_at_a_mark_followed_by_a_space_only():
  chain = {END_OF_SENTENCE: '3', '3': '.', '.': '5', '5': 'a', 'a': '?', '?': "'", "'": ' ',
           ' ': 'b', 'b': '.'}
  model = fake_model(tokenizers.Characters(), tuple("3.5a?' b"), successor=chain)
  (ids,) = generate(model, [], Sampling(30, temperature=0, sentences=1))
  assert ''.join(model.vocab.decode(ids)) == "3.5a?'"  # Not at '3.5'; the quote is its own.


@pytest.mark.slow
def test_sampled_sentences_stop_after_the_nth_as_a_reader_counts(runs):
  model = load_trained(runs['cased'])
  free = generate_text(model, '', Sampling(400, temperature=1.2, samples=4), seed=2)
  stopped = generate(model, [], Sampling(400, temperature=1.2, samples=4, sentences=3), seed=2)
  assert sum(reader_count(text, False) for text in free) > 12  # Sentences enough to stop at.
  for i, (ids, long) in enumerate(zip(stopped, free)):
    short = as_text(model, list(shown_unknowns(model, model.vocab.decode(ids), Sampling(), 2, i)))
    assert long.startswith(short)
    if len(ids) < 400:
      assert reader_count(short, closed=True) == 3
    else:
      assert short == long and reader_count(short, closed=False) < 3


def test_generate_help_says_what_a_sentence_is(tmp_path):
  done = nplm('generate', '--help', cwd=tmp_path)
  assert done.returncode == 0
  assert "a sentence ends at '.', '!' or '?'" in ' '.join(done.stdout.split())


@pytest.mark.slow
def test_the_start_up_line_names_the_tokens_and_the_progress_line_the_run_left(
    tiny_corpus, tmp_path, caplog):
  from nplm.data.tokenizers import token_kind
  from tests.test_train import tiny_config
  text = dict(dataset='text:corpus', workdir='w')
  assert token_kind(Config(**text, tokenizer='bpe', subword_vocab_size=2000)) == (
      'bpe subwords, 2,000')
  assert token_kind(Config(**text, tokenizer='nltk', lowercase=True)) == 'NLTK words, lowercased'
  assert token_kind(Config(**text, tokens='chars')) == 'characters'
  assert token_kind(Config(**text)) == 'words'
  with caplog.at_level('INFO', logger='nplm'):
    run(tiny_config(tmp_path / 'run', epochs=3, log_every=2), tiny_corpus)
  lines = [r.getMessage() for r in caplog.records if re.match(r'step \d+  epoch', r.getMessage())]
  timed = [l for l in lines if 'left' in l]
  assert timed and all(re.search(r'left; the run \S+ at most\)', l) for l in timed), lines
