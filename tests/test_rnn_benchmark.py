"""The RNN benchmark on the tiny corpus, and its PyTorch LSTM checked against nplm's."""

import json

import jax
import numpy as np
import pytest

from experiments.benchmarks import lstm as rnn_benchmark
from nplm.config import Config, ConfigError
from nplm.data.vocab import TEXT_END
from nplm.flagfiles import config_from_flagfile
from nplm.lm import build_language_model
from nplm.training.stream_feed import StreamFeed
from tests.benchmark_clock import BenchmarkClock
from nplm.training.config_checks import validated

TINY_LSTM = validated(Config(workdir='unused', model='lstm', feature_size=8, hidden_size=8,
                   tie_embeddings=True, dropout=0.3, batch_size=2, bptt_length=5,
                   clip_norm=1.0, learning_rate=2e-3, lr_decay=2e-4))


def _feed(corpus, config) -> StreamFeed:
  lm = build_language_model(config, corpus.vocab.counts)
  return StreamFeed(config, lm, corpus.splits, int(corpus.vocab.encode([TEXT_END])[0]))


@pytest.mark.slow
def test_measure_times_nplm_and_pytorch_on_the_same_segments(tiny_corpus, tmp_path,
                                                             monkeypatch):
  """Holds with and without PyTorch installed: its rate, or the reason it was skipped."""
  BenchmarkClock(tick=0.5).install(monkeypatch)  # Every timed run takes 0.5 s.
  boundary = int(tiny_corpus.vocab.encode([TEXT_END])[0])
  report = rnn_benchmark.measure(TINY_LSTM, tiny_corpus.vocab.counts,
                                 tiny_corpus.splits['train'], boundary, steps=2, repeats=1)
  assert report['machine']['usable_cores'] >= 1 and report['shape']['hidden_size'] == 8
  nplm, torch = report['nplm'], report['torch']
  # The first two segments of 2 streams × 5 words are all real tokens: 20 per run.
  assert nplm['median'] * nplm['seconds_per_step'] * 2 == pytest.approx(20)
  assert len(nplm['runs']) == 1 and nplm['median'] > 0 and np.isfinite(nplm['last_loss'])
  assert nplm['runs'] == [40.0] and nplm['seconds_per_step'] == 0.25
  if torch is not None:
    assert torch['median'] > 0 and np.isfinite(torch['last_loss']) and torch['threads'] >= 1
    assert torch['runs'] == [40.0]  # The same 20 tokens.
    assert report['nplm_over_torch'] == nplm['median'] / torch['median']
    assert 'nplm / PyTorch' in rnn_benchmark.format_report(report)
  else:
    assert 'torch' in report['torch_skipped'].lower() and report['nplm_over_torch'] is None
    assert (f'PyTorch comparison skipped: {report["torch_skipped"]}.'
            in rnn_benchmark.format_report(report))

  rnn_benchmark.write_report(report, str(tmp_path / 'bench'))
  assert json.loads((tmp_path / 'bench' / 'rnn_benchmark.json').read_text())['nplm']['runs']
  assert '| nplm (JAX) |' in (tmp_path / 'bench' / 'rnn_benchmark.md').read_text()
  assert (f'| nplm (JAX) | 40 [40–40] | 250.0 | {nplm["last_loss"]:.3f} |'
          in (tmp_path / 'bench' / 'rnn_benchmark.md').read_text())


@pytest.mark.slow
def test_a_whole_epoch_counts_each_training_token_once(tiny_corpus, monkeypatch):
  """2 streams of 210 tokens in 4-word segments: 53 segments, the last half padding."""
  BenchmarkClock(tick=0.5).install(monkeypatch)
  monkeypatch.setattr(rnn_benchmark, 'torch_runner', lambda *args: (None, 'not timed here'))
  config = TINY_LSTM.replace(bptt_length=4)
  train = tiny_corpus.splits['train']
  assert len(train) == 420
  report = rnn_benchmark.measure(config, tiny_corpus.vocab.counts, train,
                                 int(tiny_corpus.vocab.encode([TEXT_END])[0]), steps=53,
                                 repeats=1)
  assert report['nplm']['runs'] == [420 / 0.5]


def test_the_lstm_flagfile_is_the_benchmarked_shape_and_steps_stay_in_an_epoch(tiny_corpus):
  config = rnn_benchmark.flagfile_config('lstm')
  assert (config.model, config.num_layers, config.feature_size, config.hidden_size) == (
      'lstm', 1, 200, 200)
  assert (config.batch_size, config.bptt_length, config.tie_embeddings) == (32, 35, True)
  feed = _feed(tiny_corpus, TINY_LSTM)
  assert len(rnn_benchmark.segment_batches(feed, feed.steps_per_epoch)) == feed.steps_per_epoch
  with pytest.raises(ConfigError, match='segments of an epoch'):
    rnn_benchmark.segment_batches(feed, feed.steps_per_epoch + 1)


def _torch_gates(array: np.ndarray, torch):
  """nplm's gate blocks [f, i, o, c̃] along the last axis -> nn.LSTM's rows [i, f, g, o]."""
  f, i, o, candidate = np.split(np.asarray(array), 4, axis=-1)
  return torch.from_numpy(np.ascontiguousarray(np.concatenate([i, f, candidate, o], -1).T))


def test_the_pytorch_lstm_computes_nplms_losses_and_state():
  """With nplm's weights in it and no dropout, two segments in a row: the same per-word
  losses and the same carried (h, c). Without PyTorch there is nothing to compare."""
  torch = pytest.importorskip('torch', reason='the PyTorch baseline needs PyTorch')
  from experiments.benchmarks import torch_lstm
  config = TINY_LSTM.replace(dropout=0.0)
  vocab_size = 12
  lm = build_language_model(config, np.ones(vocab_size))
  state = StreamFeed(config, lm, {'train': np.arange(40) % vocab_size}, 0).create_state(
      jax.random.key(0))
  # Random values everywhere (the initial biases are mostly 0): a misplaced gate shows.
  leaves, tree = jax.tree.flatten(state.params)
  keys = jax.random.split(jax.random.key(1), len(leaves))
  params = jax.tree.unflatten(tree, [0.5 * jax.random.normal(k, leaf.shape)
                                     for k, leaf in zip(keys, leaves)])
  assert 'embedding' not in params['head']['output']  # Tied: stored once, as C.

  model = torch_lstm.TorchLSTMLM(vocab_size, 8, 8, 1, 0.0, tie_embeddings=True)
  assert model.output.weight is model.embedding.weight
  layer = params['model']['layer0']
  with torch.no_grad():
    model.embedding.weight.copy_(torch.tensor(np.asarray(params['model']['C']['embedding'])))
    model.lstm.weight_ih_l0.copy_(_torch_gates(layer['input']['kernel'], torch))
    model.lstm.weight_hh_l0.copy_(_torch_gates(layer['recurrent'], torch))
    model.lstm.bias_ih_l0.copy_(_torch_gates(layer['input']['bias'], torch))
    model.lstm.bias_hh_l0.zero_()
    model.output.bias.copy_(torch.tensor(np.asarray(params['head']['output']['bias'])))

  words, targets = (np.random.default_rng(seed).integers(0, vocab_size, (2, 10)) for seed in (2, 3))
  carry, torch_state = lm.model.initial_state(2), torch_lstm.initial_state(config, 2)
  for columns in (slice(0, 5), slice(5, 10)):
    losses, carry = lm.apply(lm.variables_of(params), words[:, columns], targets[:, columns],
                             carry, method=lm.loss)
    with torch.no_grad():
      torch_losses, torch_state = torch_lstm.segment_losses(
          model, torch.from_numpy(words[:, columns]), torch.from_numpy(targets[:, columns]),
          torch_state)
    np.testing.assert_allclose(torch_losses.numpy(), np.asarray(losses), atol=1e-4)
    h, c = (s.numpy()[0] for s in torch_state)
    np.testing.assert_allclose(np.stack([h, c]), np.asarray(carry)[0], atol=1e-4)


@pytest.mark.parametrize('recipe, kind', [('lstm', 'AdamW'), ('zaremba_medium', 'SGD')])
def test_the_pytorch_lstm_trains_with_the_recipes_optimizer(recipe, kind):
  """The peer's step costs what nplm's does: AdamW where the recipe says adamw, plain SGD at
  the recipe's rate where it says sgd (an AdamW at Zaremba's rate 35 diverges)."""
  torch = pytest.importorskip('torch', reason='the PyTorch baseline needs PyTorch')
  from experiments.benchmarks import torch_lstm
  config = config_from_flagfile(recipe).replace(feature_size=8, hidden_size=8)
  model = torch_lstm.TorchLSTMLM(12, 8, 8, config.num_layers, 0.0,
                                 tie_embeddings=config.tie_embeddings)
  optimizer, _ = torch_lstm.make_optimizer(model, config)
  assert type(optimizer).__name__ == kind and isinstance(optimizer, torch.optim.Optimizer)
  assert all(group['lr'] == config.learning_rate for group in optimizer.param_groups)


def test_a_recipe_optimizer_the_peer_lacks_skips_the_comparison_with_the_reason():
  pytest.importorskip('torch', reason='the PyTorch baseline needs PyTorch')
  config = config_from_flagfile('lstm').replace(optimizer='lazy_adam')
  run_steps, why = rnn_benchmark.torch_runner(config, 12, feed=None)
  assert run_steps is None
  assert why == 'the PyTorch LSTM has sgd and adamw, not --optimizer=lazy_adam'
