"""A word being typed, read back by a subword model for what reads one token at a time: nplm
predict's weights and nplm generate's draws against a brute-force sum over every spelling."""

import functools

import numpy as np
import pytest

from nplm.data.vocab import UNK
from nplm.use.generation import Sampling, generate
from nplm.use import spelling_weights
from nplm.use.prediction import next_log_probs, predict, top_tokens
from nplm.use.prompts import read_prompt
from nplm.use.spelling_weights import read_and_weigh
from nplm.use.trained import load_trained
from tests import cli
from tests.conftest import write_text_corpus

pytestmark = pytest.mark.slow

TYPING, READ_AS = 'the jury sa', 'the jury'


@pytest.fixture(scope='module', params=['kn3', 'lstm'])
def subwords(request, tmp_path_factory):
  """The tiny corpus's text cut into 80 BPE pieces, as the tools read it: KN3 (`nplm ngram
  --out`), or an LSTM (`nplm train`), whose reads carry a recurrent state along each path."""
  root = tmp_path_factory.mktemp('spelling')
  text, data_dir = write_text_corpus(root / 'text'), root / 'tfds'
  pieces = ['--tokenizer=bpe', '--subword_vocab_size=80']
  if request.param == 'kn3':
    done = cli.run('ngram', f'--dataset=text:{text}', f'--data_dir={data_dir}',
                   f'--out={root / "model"}', '--order=3', *pieces, cwd=root)
  else:
    done = cli.run('train', f'--dataset=text:{text}', f'--data_dir={data_dir}',
                   f'--workdir={root / "model"}', '--model=lstm', '--feature_size=8',
                   '--hidden_size=16', '--bptt_length=8', '--batch_size=8', '--epochs=2',
                   '--learning_rate=0.01', *pieces, cwd=root)
  assert done.returncode == 0, done.stderr
  return load_trained(root / 'model')


def brute_force_weights(model) -> np.ndarray:
  """p(t | READ_AS) · P(the text goes on to spell TYPING out | READ_AS t) for every token t,
  summed over every sequence of tokens (no end mark, no <unk>) whose text, read back whole
  after READ_AS's, goes on as TYPING does until it holds all of it."""
  vocab, reader, tokenizer = model.vocab, model.next_words(), model.tokenizer
  prompt = read_prompt(model, READ_AS)
  text_tokens = [t for t in range(vocab.size) if vocab.words[t] not in (UNK, '<eos>')]

  def text(path):
    return tokenizer.detokenize([*prompt.tokens, *vocab.decode(path)])

  def log_p(path):
    rows = np.array([[*prompt.ids, *path]], np.int32)
    return reader.next(reader.start(rows))[0][0].astype(np.float64)

  @functools.cache
  def spelt(path) -> float:  # P(what follows the path spells TYPING out).
    if text(path).startswith(TYPING):
      return 1.0
    after = np.exp(log_p(path))
    return sum(after[t] * spelt((*path, t)) for t in text_tokens
               if TYPING.startswith(text((*path, t))) or text((*path, t)).startswith(TYPING))

  first, weights = np.exp(log_p(())), np.zeros(vocab.size)
  for t in text_tokens:
    if TYPING.startswith(text((t,))) or text((t,)).startswith(TYPING):
      weights[t] = first[t] * spelt((t,))
  return weights


def test_predict_weighs_each_next_piece_by_its_spellings(subwords):
  model = subwords
  typed_as = model.tokenizer.tokens(TYPING)[len(model.tokenizer.tokens(READ_AS)):]
  assert len(typed_as) > 1  # Typed in several pieces, as the test means it.
  want = brute_force_weights(model)
  found = predict(model, TYPING, k=model.vocab.size)
  assert {p.token for p in found} == {model.vocab.words[t] for t in np.flatnonzero(want)}
  for p in found:
    assert p.probability == pytest.approx(want[model.vocab.id_of(p.token)], rel=1e-4, abs=1e-9)
  assert found[0].token == model.vocab.words[int(np.argmax(want))]


def test_generate_draws_a_typed_word_from_the_model_given_what_was_typed(subwords):
  model, draws = subwords, 3000
  want = brute_force_weights(model)
  want /= want.sum()
  typing, spelling = read_and_weigh(model, TYPING)
  samples = generate(model, typing.prompt.ids, Sampling(12, samples=draws), seed=3,
                     spelling=spelling)
  first = np.bincount([sample[0] for sample in samples], minlength=len(want)) / draws
  assert np.all(np.abs(first - want) <= 5 * np.sqrt(want * (1 - want) / draws) + 1e-3)
  texts = [model.tokenizer.detokenize([*typing.prompt.tokens, *model.vocab.decode(s)])
           for s in samples]
  assert all(text.startswith(TYPING) for text in texts)


def test_a_tree_beyond_max_nodes_reads_the_prefix_as_typed(subwords, monkeypatch):
  model = subwords
  monkeypatch.setattr(spelling_weights, 'MAX_NODES', 1)
  typing, weights = spelling_weights.read_and_weigh(model, TYPING)
  assert weights is None and typing.tokens == []
  assert typing.prompt.tokens == model.tokenizer.tokens(TYPING)
  want = read_prompt(model, TYPING)
  assert [p.token for p in predict(model, TYPING, k=3)] == [
      p.token for p in top_tokens(model, next_log_probs(model, want), 3)]
