"""Exact evaluation asks for float32 matmuls (nplm.precision): the program that scores a split,
in every family and under a tree head, and the next-word and sentence readers, state
Precision.HIGHEST on every dot_general they hand XLA; the train step keeps the backend's
default (on a GPU, TF32 for speed)."""

import re

import jax
import numpy as np
import pytest

from nplm import parallel
from nplm.config import Config
from nplm.lm import build_language_model
from nplm.training.families import feed_of
from nplm.use import next_words, sentences, trained

DOT = re.compile(r'stablehlo\.dot_general .*?precision = \[(\w+), (\w+)\]')


def precisions(lowered_text: str) -> set[str]:
  """The precisions every matmul of a lowered program asks for."""
  found = DOT.findall(lowered_text)
  assert found, 'the program has no matmul'
  return {p for pair in found for p in pair}


class Lowering:
  """A jitted function that also keeps the lowered text of its first call."""

  def __init__(self, jitted):
    self.jitted, self.text = jitted, None

  def __call__(self, *args):
    if self.text is None:
      self.text = self.jitted.lower(*args).as_text()
    return self.jitted(*args)


CASES = {
    'nnlm softmax': {},
    'nnlm tree': {'head': 'tree'},
    'transformer': {'model': 'transformer', 'num_heads': 2},
    'lstm': {'model': 'lstm', 'bptt_length': 5},
    'cbow negative sampling': {'model': 'cbow', 'head': 'negative_sampling', 'window': 2,
                               'optimizer': 'sgd'},
}


@pytest.mark.parametrize('case', CASES)
def test_a_split_is_scored_with_float32_matmuls_and_trained_with_the_default(tiny_corpus,
                                                                             case):
  config = Config(workdir='unused', order=3, feature_size=8, hidden_size=12, batch_size=8,
                  eval_batch_size=16, **CASES[case])
  mesh = parallel.make_mesh('')
  lm = build_language_model(config, tiny_corpus.vocab.counts, mesh)
  splits = {name: tiny_corpus.splits[name] for name in ('train', 'valid')}
  feed = feed_of(lm.model)(config, lm, splits, tiny_corpus.boundary_id, mesh)
  state = feed.create_state(jax.random.key(0))
  feed.log_prob_step = Lowering(feed.log_prob_step)
  log_probs = feed.log_probs(state.params, 'valid')
  assert np.all(np.isfinite(log_probs)) and np.all(log_probs < 0)
  assert precisions(feed.log_prob_step.text) == {'HIGHEST'}
  state, batches = feed.start_epoch(state, 0, 0)
  batch, _ = next(iter(batches))
  train_text = feed.train_step.lower(state, *feed.step_data(batch),
                                     jax.random.key(1)).as_text()
  if getattr(feed, 'cpu_threads', 0):  # word2vec's compiled update: no matmul of XLA's.
    assert not DOT.findall(train_text) and 'nplm_word2vec_update' in train_text
  else:
    assert precisions(train_text) == {'DEFAULT'}


@pytest.mark.parametrize('model', ['nnlm', 'lstm'])
def test_next_words_and_sentences_are_read_with_float32_matmuls(tiny_corpus, model,
                                                                monkeypatch):
  config = Config(workdir='unused', model=model, order=3, feature_size=8, hidden_size=12)
  lm = build_language_model(config, tiny_corpus.vocab.counts)
  feed = feed_of(lm.model)(config, lm, {'valid': tiny_corpus.splits['valid']},
                           tiny_corpus.boundary_id, parallel.make_mesh(''))
  reader = next_words.NextWords(lm, feed.create_state(jax.random.key(0)).params,
                                tiny_corpus.boundary_id)
  lowered = []
  for name in ('_window_log_probs', '_recurrent_step', '_recurrent_log_probs'):
    jitted = getattr(next_words, name)
    monkeypatch.setattr(next_words, name, lambda *args, jitted=jitted, **kwargs: (
        lowered.append(jitted.lower(*args, **kwargs).as_text()) or jitted(*args, **kwargs)))
  distribution, _ = reader.next(reader.start([[1, 2]]))
  assert np.allclose(np.exp(np.asarray(distribution, np.float64)).sum(-1), 1, atol=1e-5)
  assert len(lowered) == (4 if model == 'lstm' else 1)  # LSTM: 3 words pushed, 1 read.
  assert all(precisions(text) == {'HIGHEST'} for text in lowered)
  if model == 'lstm':
    words = np.array([[1, 2, 3]], np.int32)
    start = lm.model.initial_state(1)
    hidden = sentences._rows_hidden.lower(lm, reader.variables, words, start).as_text()
    positions = sentences._positions_scored.lower(
        lm, reader.variables, np.zeros((3, 12), np.float32), words[0]).as_text()
    both = sentences._rows_scored.lower(lm, reader.variables, words, start, words[0],
                                        words[0]).as_text()
    assert precisions(hidden) == precisions(positions) == precisions(both) == {'HIGHEST'}
  else:  # A window model's sentences and a correction's variants: chosen windows.
    windows = np.array([[1, 2]], np.int32)
    text = trained._window_log_prob.lower(lm, reader.variables, windows, windows[:, 0])
    assert precisions(text.as_text()) == {'HIGHEST'}
