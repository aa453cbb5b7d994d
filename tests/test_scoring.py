"""Sentences scored many at once (nplm.use.sentences), ranked, and the score and rank
programs: each sentence's numbers against the same sentence read alone and against numpy
forward passes, on a text dataset, whose sentences end with a scored `<eos>`."""

import json
import math
from pathlib import Path

import jax
import numpy as np
import pytest

from nplm.cli import score as score_program
from nplm.data.vocab import END_OF_SENTENCE, UNK
from nplm.errors import ConfigError
from nplm.ngram import KneserNey
from nplm.trainer import run
from nplm.use.sentences import rank_sentences, score_sentences, scored
from nplm.use.ngram_run import NgramRun
from nplm.use.trained import load_trained
from tests import cli
from tests.conftest import write_text_corpus
from tests.test_model import numpy_eq1
from tests.test_rnn import numpy_split_log_probs as numpy_recurrent_log_probs
from tests.test_rnn import rnn_config
from tests.test_train import tiny_config
from tests.test_transformer import numpy_split_log_probs as numpy_transformer_log_probs
from tests.test_transformer import transformer_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parent.parent
# Lengths 1 to 20 tokens (with <eos>): several length buckets, and 'zebra' outside the
# vocabulary.
SENTENCES = ['The jury said zebra , and the election was', 'the', 'of the', 'zebra',
             'It said the jury , of the election , that the city was said to be the',
             'The election', 'the the the the the the the']
TEXT = dict(train_tokens=0, valid_tokens=0, unk_max_count=1, max_steps=12, eval_batch_size=32)


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """A feed-forward, a recurrent and a Transformer run on the tiny corpus as a text dataset,
  trained briefly and read back."""
  root = tmp_path_factory.mktemp('scoring')
  data = dict(dataset=f'text:{write_text_corpus(root / "text")}', data_dir=str(root / 'tfds'),
              **TEXT)
  configs = {'nnlm': tiny_config(root / 'nnlm', **data),
             'lstm': rnn_config(root / 'lstm', **data),
             'transformer': transformer_config(root / 'transformer', **data)}
  for config in configs.values():
    run(config)
  return {kind: load_trained(config.workdir) for kind, config in configs.items()}


def numpy_log_probs(model, ids: np.ndarray) -> np.ndarray:
  """ln p of each id of one sentence read alone, in numpy, from the boundary context."""
  params = jax.tree.map(np.asarray, model.lm.variables_of(model.params)['params'])
  config, boundary = model.config, model.boundary_id
  if config.model == 'lstm':
    return numpy_recurrent_log_probs(model.lm, model.params, ids, boundary)
  if config.model == 'transformer':
    return numpy_transformer_log_probs(params, ids, boundary, config.order, config.num_heads)
  padded = [boundary] * (config.order - 1) + ids.tolist()
  context = np.array([[padded[t + config.order - 2 - j] for j in range(config.order - 1)]
                      for t in range(len(ids))])
  return numpy_eq1(params, context, config.hidden_size, config.direct)[np.arange(len(ids)), ids]


@pytest.mark.parametrize('kind', ['nnlm', 'lstm', 'transformer'])
def test_batched_scores_are_each_sentence_read_alone_its_end_included(runs, kind):
  model = runs[kind]
  assert model.sentence_end == END_OF_SENTENCE and model.boundary_id == model.vocab.id_of(
      END_OF_SENTENCE)
  assert model.context_length == (None if kind == 'lstm' else model.config.order - 1)
  # Small batches: several batches, pieces and row groups, some cut across a sentence.
  scores = list(scored(model, SENTENCES, batch_tokens=23))
  assert [s.text for s in scores] == SENTENCES
  for text, score in zip(SENTENCES, scores):
    words = [*text.split(), END_OF_SENTENCE]
    ids = model.vocab.encode(words)
    want = numpy_log_probs(model, ids)
    alone = model.split_log_probs(ids)  # The sentence as a split of its own.
    # Closed: the model's own ln p of each token read (<unk> for an unknown word).
    got = np.array([t.log_prob - t.spelling_log_prob for t in score.tokens])
    np.testing.assert_allclose(got, want, atol=2e-5)
    np.testing.assert_allclose(got, alone, atol=2e-6)
    assert [t.word for t in score.tokens] == words
    assert [t.token for t in score.tokens] == [w if w in model.vocab.words else UNK
                                                for w in words]
    oovs = [w not in model.vocab.words for w in words]
    assert [t.oov for t in score.tokens] == oovs
    assert score.num_tokens == len(words) and score.num_oovs == sum(oovs)
    # Open: an unknown word's spelling added, the sentence's total its tokens' sum.
    spelt = [float(model.spelling.log_prob([w])[0]) if oov else 0.0
             for w, oov in zip(words, oovs)]
    np.testing.assert_allclose([t.spelling_log_prob for t in score.tokens], spelt, atol=1e-12)
    assert score.closed_log_prob == pytest.approx(float(np.sum(alone)), abs=1e-4)
    assert score.log_prob == pytest.approx(float(np.sum(alone)) + sum(spelt), abs=1e-4)
    total = math.fsum(want) + sum(spelt)
    assert score.log_prob == pytest.approx(total, abs=1e-4)
    assert score.log10_prob == pytest.approx(total / math.log(10), abs=1e-4)
    assert score.perplexity == pytest.approx(math.exp(-total / len(words)), rel=1e-4)
  one_batch = score_sentences(model, SENTENCES)  # More tokens than --eval_batch_size.
  assert sum(s.num_tokens for s in one_batch) > model.config.eval_batch_size
  for whole, small in zip(one_batch, scores):
    np.testing.assert_allclose([t.log_prob for t in whole.tokens],
                               [t.log_prob for t in small.tokens], atol=1e-5)


def test_an_ngram_model_scores_each_sentence_as_its_explicit_windows(runs):
  neural = runs['nnlm']
  config, vocab, order = neural.config, neural.vocab, 4
  train = Path(config.dataset.removeprefix('text:'), 'train.txt').read_text().splitlines()
  train_ids = vocab.encode([w for line in train for w in [*line.split(), END_OF_SENTENCE]])
  model = NgramRun(config, vocab, KneserNey.fit(train_ids, order, vocab.size,
                                                neural.boundary_id), None)
  assert model.context_length == order - 1
  for text, score in zip(SENTENCES, scored(model, SENTENCES, batch_tokens=23)):
    padded = [model.boundary_id] * (order - 1) + vocab.encode(
        [*text.split(), END_OF_SENTENCE]).tolist()
    windows = np.array([padded[t:t + order] for t in range(len(padded) - order + 1)])
    want = model.model.log_prob_windows(windows)
    np.testing.assert_allclose([t.log_prob for t in score.tokens], want, rtol=1e-12)


def test_rank_orders_by_the_independently_computed_log_probs(runs):
  model = runs['lstm']
  candidates = ['the jury said', 'said jury the', 'the zebra said', 'jury the said the']
  # Open: an unknown word (zebra) pays for its spelling too.
  want = [math.fsum(numpy_log_probs(model, model.vocab.encode([*c.split(), END_OF_SENTENCE])))
          + math.fsum(model.spelling.log_prob([w]).sum() for w in c.split()
                      if w not in model.vocab.words)
          for c in candidates]
  ranked = rank_sentences(model, candidates)
  assert [s.text for s in ranked] == [candidates[i] for i in np.argsort(want)[::-1]]
  np.testing.assert_allclose([s.log_prob for s in ranked], sorted(want, reverse=True),
                             atol=1e-4)
  tied = ['the  jury', 'said', ' the jury']  # The same tokens: ties keep their order.
  scores = score_sentences(model, tied)
  assert scores[0].log_prob == scores[2].log_prob
  ranked = [s.text for s in rank_sentences(model, tied)]
  assert ranked.index('the  jury') < ranked.index(' the jury')


def test_sentences_without_tokens_or_without_known_words_are_refused(runs):
  model = runs['nnlm']
  with pytest.raises(ConfigError, match='sentence 2 has no words'):
    score_sentences(model, ['the', '  '])
  with pytest.raises(ConfigError, match="none of the words .* in the model's vocabulary"):
    score_sentences(model, ['zebra quagga', 'okapi'])
  # Known words in a later batch: the earlier all-unknown ones are scored, not refused.
  assert len(list(scored(model, ['zebra', 'okapi', 'the jury'], batch_tokens=4))) == 3


# --- the programs --------------------------------------------------------------------------

def nplm(command: str, *args: str, cwd: Path, stdin: str = ''):
  """`python -m nplm.cli <command> ...` in `cwd`, to its end (tests/cli.py)."""
  return cli.run(command, *args, cwd=cwd, stdin=stdin)


def test_score_reads_a_file_and_stdin_from_another_directory(runs, tmp_path):
  model = runs['nnlm']
  workdir = Path(model.config.workdir)
  (tmp_path / 'model').symlink_to(workdir)  # A relative --workdir from elsewhere.
  (tmp_path / 'sentences.txt').write_text('\n'.join(SENTENCES[:3]) + '\n\n  \n')
  from_file = nplm('score', '--workdir=model', '--file=sentences.txt', cwd=tmp_path)
  from_stdin = nplm('score', '--workdir=model', '-', cwd=tmp_path,
                    stdin='\n'.join(SENTENCES[:3]))
  piped = nplm('score', '--workdir=model', '--json', '--details', cwd=tmp_path,
               stdin='\n'.join(SENTENCES[:3]))
  for result in (from_file, from_stdin, piped):
    assert result.returncode == 0, result.stderr
  # The file named as an argument, a habit from tools that read files: refused, not scored.
  named = nplm('score', '--workdir=model', 'sentences.txt', cwd=tmp_path)
  assert named.returncode == 2 and named.stdout == '', named.stderr
  assert named.stderr.startswith("error: 'sentences.txt' is a file here") and (
      '--file=sentences.txt' in named.stderr and len(named.stderr.splitlines()) == 1)
  want = score_sentences(model, SENTENCES[:3])
  lines = from_file.stdout.splitlines()
  assert from_stdin.stdout == from_file.stdout and len(lines) == 3
  for line, score in zip(lines, want):
    fields = line.split()
    assert fields[:2] == ['ln', f'{score.log_prob:.2f}'] and line.endswith(score.text)
    assert fields[8:10] == ['ppl', f'{score.perplexity:.1f}']
  # Aligned: every column starts at the same place on every line.
  assert len({line.index('tokens') for line in lines}) == 1
  records = [json.loads(line) for line in piped.stdout.splitlines()]
  assert [r['text'] for r in records] == SENTENCES[:3]
  for record, score in zip(records, want):
    assert record['log_prob'] == pytest.approx(score.log_prob, abs=1e-5)
    assert record['num_tokens'] == len(record['tokens']) == score.num_tokens
    assert [t['word'] for t in record['tokens']][-1] == END_OF_SENTENCE


def test_rank_prints_the_most_probable_first_with_the_difference(runs, tmp_path):
  model = runs['nnlm']
  candidates = ['about 15 minutes from', 'the jury said', 'said the jury']
  result = nplm('rank', f'--workdir={model.config.workdir}', *candidates, cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  want = rank_sentences(model, candidates)
  assert [line.split(maxsplit=9)[-1] for line in lines] == [s.text for s in want]
  assert [float(line.split()[4]) for line in lines] == pytest.approx(
      [s.log_prob - want[0].log_prob for s in want], abs=0.006)
  assert [int(line.split()[6]) for line in lines] == [s.num_oovs for s in want]
  assert [float(line.split()[8]) for line in lines] == pytest.approx(
      [s.closed_log_prob for s in want], abs=0.006)
  # Alternatives with unknown words: which figure is which is said.
  assert len({s.num_oovs for s in want}) == 2
  assert 'ranked by ln, the open vocabulary' in result.stderr


@pytest.mark.parametrize('content, args, phrase', [
    (b'', ['--file=in.txt'], 'holds no sentence'),
    (b'\n  \n', ['--file=in.txt'], 'holds no sentence'),
    (b'\x89PNG\r\n\x1a\n\xff\xfe', ['--file=in.txt'], 'not UTF-8 text'),
    (b'the\x00jury\n', ['--file=in.txt'], 'binary'),
    (None, ['--file=absent.txt'], 'no such file'),
    (b'zebra okapi\nquagga\n', ['--file=in.txt'], "none of the words"),
    ('', ['-'], 'stdin holds no sentence'),
])
def test_score_refuses_bad_input_in_one_line(runs, tmp_path, content, args, phrase):
  if content is not None and args != ['-']:
    (tmp_path / 'in.txt').write_bytes(content)
  result = nplm('score', f'--workdir={runs["nnlm"].config.workdir}', *args, cwd=tmp_path,
                stdin=content if args == ['-'] else '')
  stderr = result.stderr
  assert result.returncode == 2, stderr
  assert stderr.startswith('error: ') and phrase in stderr, stderr
  assert len(stderr.strip().splitlines()) == 1 and 'Traceback' not in stderr
  assert result.stdout == ''


def test_an_argument_naming_a_file_is_refused_and_other_arguments_are_sentences(
    tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / 'sentences.txt').write_text('the jury met\n')
  (tmp_path / 'texts').mkdir()
  for argument in ('sentences.txt', './sentences.txt', f'{tmp_path}/sentences.txt',
                   ' sentences.txt '):
    with pytest.raises(ConfigError, match=r"is a file here.*--file=.*sentences\.txt reads"):
      score_program.sentences_of(['the jury', argument], None)
  kept = ['the jury met', 'sentences.txt is a name', 'texts', 'missing.txt', 'the']
  assert list(score_program.sentences_of(kept, None)) == kept
  with pytest.raises(ConfigError, match='prefixes themselves'):
    score_program.sentences_of(['sentences.txt'], None, units='prefixes')
