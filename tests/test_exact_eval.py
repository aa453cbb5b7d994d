"""Exact evaluation at any |V| in bounded memory: the normalizer summed over chunks of output
rows (nplm.heads.output_layer) against numpy's log-softmax over the whole vocabulary, its
gradient against the softmax's written out, the heads and a K-model evaluation pass through
it, and the benchmark's report.

The chunk budget is lowered in each test (monkeypatch) so that tiny vocabularies take several
chunks; the tree and class heads' log_prob (their path or class only) is checked normalized
and equal to their full log_probs by tests/test_heads.py.
"""

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nplm import parallel
from nplm.config import Config
from nplm.heads import output_layer
from nplm.heads.output_layer import OutputLayer, chunk_rows
from nplm.lm import build_language_model
from nplm.training.window_feed import WindowFeed
from tests.test_heads import (log_prob_of_every_word, make_head, numpy_log_probs,
                              random_hidden, random_params)
from tests.test_model import numpy_eq1

V, D, B = 103, 6, 7
CHUNK = 21  # V = 4·21 + 19: the fifth chunk starts at 82, its rows 82 and 83 counted before.
# First chunk, its end, the overlap, the clamped chunk's first new row, the last row.
TARGETS = np.array([0, 20, 21, 83, 84, 102, 50], np.int32)


def allow_rows(monkeypatch, batch: int, rows: int) -> None:
  """At most `rows` rows of scores at once for `batch` examples."""
  monkeypatch.setattr(output_layer, 'PLAIN_BYTES', 4 * batch * rows)
  monkeypatch.setattr(output_layer, 'CHUNK_BYTES', 4 * batch * rows)
  monkeypatch.setattr(output_layer, 'MIN_CHUNK_ROWS', 1)


def layer_params(seed=0, models=None):
  rng = np.random.default_rng(seed)
  shape = () if models is None else (models,)
  return {'embedding': rng.normal(size=(*shape, V, D)).astype(np.float32),
          'bias': rng.normal(size=(*shape, V)).astype(np.float32)}


def numpy_log_softmax_at(params, hidden, targets):
  """log e^{y_t} / Σ_w e^{y_w} over all V rows, in float64."""
  y = hidden.astype(np.float64) @ params['embedding'].T.astype(np.float64) + params['bias']
  log_z = y.max(axis=1) + np.log(np.exp(y - y.max(axis=1, keepdims=True)).sum(axis=1))
  return y[np.arange(len(targets)), targets] - log_z, y - log_z[:, None]


def log_softmax_at(params, hidden, targets):
  layer = OutputLayer(V, D)
  return layer.apply({'params': params}, hidden, targets, method=layer.log_softmax_at)


def test_chunks_keep_the_plain_path_where_the_scores_fit_and_stay_within_the_budget():
  # Brown's 14,039 words and the paper's 16,383 at --eval_batch_size=2048: one chunk, the
  # plain log-softmax, results unchanged.
  assert chunk_rows(2048, 14039) == 14039 and chunk_rows(2048, 16383) == 16383
  for batch, units in [(2048, 300_000), (2048, 1_000_003), (256, 1_000_000), (4096, 99_999)]:
    rows = chunk_rows(batch, units)
    chunks = -(-units // rows)
    assert 4 * batch * rows <= output_layer.CHUNK_BYTES, (batch, units, rows)
    assert chunks * rows - units < chunks  # Equal chunks: under one row each clamped.
  assert chunk_rows(10 ** 7, 300_000) == output_layer.MIN_CHUNK_ROWS  # Never thinner.


class _Device:
  def __init__(self, platform: str, stats: dict | None):
    self.platform, self._stats = platform, stats

  def memory_stats(self):
    return self._stats


@pytest.mark.parametrize('platform,stats,plain,rows', [
    ('cpu', None, output_layer.PLAIN_BYTES, 1003),
    ('gpu', {'bytes_limit': 143 * 10 ** 9}, 143 * 10 ** 9 // 16, 14039),
    ('tpu', {'bytes_limit': 8 * 2 ** 30}, 2 ** 29, 14039),
    ('gpu', {'bytes_limit': 2 ** 30}, output_layer.PLAIN_BYTES, 1003),  # Never below a CPU's.
    ('gpu', None, output_layer.PLAIN_BYTES, 1003)])  # A device that reports no memory.
def test_an_accelerator_holds_a_share_of_its_memory_in_one_piece(monkeypatch, platform, stats,
                                                                 plain, rows):
  """On an accelerator a wide batch's scores are one matmul, not a loop of thin ones: MLP9's
  at batch 8,192 (460 MB) on an H200, where a CPU scores them in 14 chunks of 1,003 rows."""
  monkeypatch.setattr(jax, 'local_devices', lambda: [_Device(platform, stats)])
  assert output_layer.plain_bytes() == plain
  assert chunk_rows(8192, 14039) == rows


def test_the_chunked_log_softmax_at_equals_numpy_over_the_whole_vocabulary(monkeypatch):
  allow_rows(monkeypatch, B, 25)
  assert chunk_rows(B, V) == CHUNK and V % CHUNK
  params, hidden = layer_params(), random_hidden(B, D)
  got = jax.jit(log_softmax_at)(params, hidden, TARGETS)
  assert got.dtype == jnp.float32
  np.testing.assert_allclose(got, numpy_log_softmax_at(params, hidden, TARGETS)[0], atol=1e-5)
  # bfloat16 weights and hidden vectors (a --dtype=bfloat16 train step): float32 out, the
  # matmul's own rounding in it.
  half = jax.tree.map(lambda a: a.astype(jnp.bfloat16), (params, hidden))
  rounded = jax.tree.map(lambda a: np.asarray(a, np.float32), half)
  got = jax.jit(log_softmax_at)(*half, TARGETS)
  assert got.dtype == jnp.float32
  np.testing.assert_allclose(got, numpy_log_softmax_at(*rounded, TARGETS)[0], atol=0.1)


def test_its_gradient_is_the_softmax_gradient_written_out(monkeypatch):
  """d/dh = o_t - Σ p_w o_w, d/do_w = Σ_i (δ_{w t_i} - p_iw) h_i, d/db_w = Σ_i δ - p: the
  full softmax's loss trains through the chunked sum at a large |V|."""
  allow_rows(monkeypatch, B, 25)
  params, hidden = layer_params(), random_hidden(B, D)
  grads = jax.jit(jax.grad(lambda p, h: jnp.sum(log_softmax_at(p, h, TARGETS)),
                           argnums=(0, 1)))(params, hidden)
  _, log_p = numpy_log_softmax_at(params, hidden, TARGETS)
  error = np.eye(V)[TARGETS] - np.exp(log_p)  # [B, V]
  np.testing.assert_allclose(grads[1], error @ params['embedding'], atol=1e-5)
  np.testing.assert_allclose(grads[0]['embedding'], error.T @ hidden, atol=1e-5)
  np.testing.assert_allclose(grads[0]['bias'], error.sum(axis=0), atol=1e-5)


def test_the_plain_path_and_its_gradient_equal_numpy_for_weighted_examples():
  """Where the scores fit (one chunk): log p and its gradient, each example's loss weighted
  (0 for a masked one), against the softmax's gradient written out in float64."""
  assert chunk_rows(B, V) == V
  params, hidden = layer_params(), random_hidden(B, D)
  weights = np.array([1.0, 0.5, 0.0, 2.0, 1.0, 0.25, 1.0], np.float32)
  loss = lambda p, h: jnp.sum(weights * log_softmax_at(p, h, TARGETS))
  got, grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(params, hidden)
  want, log_p = numpy_log_softmax_at(params, hidden, TARGETS)
  np.testing.assert_allclose(got, np.sum(weights * want), rtol=1e-6)
  error = weights[:, None] * (np.eye(V)[TARGETS] - np.exp(log_p))
  np.testing.assert_allclose(grads[1], error @ params['embedding'], atol=1e-5)
  np.testing.assert_allclose(grads[0]['embedding'], error.T @ hidden, atol=1e-5)
  np.testing.assert_allclose(grads[0]['bias'], error.sum(axis=0), atol=1e-5)


def test_evaluation_scores_are_the_plain_expression_to_the_bit():
  """Only a training step's scores hold the bias inside the matmul (every_score on a CPU):
  evaluation's are b + U·h as written, bit for bit, so a checkpoint's perplexities do not
  move with the training step's form. The training form's scores (jax.vjp's forward) are
  the same to within rounding; at these sizes not to the bit, so the first check can fail."""
  units, width, batch, rng = 2000, 100, 64, np.random.default_rng(5)
  params = {'embedding': jnp.asarray(rng.normal(size=(units, width)) * 0.1, jnp.float32),
            'bias': jnp.asarray(rng.normal(size=units), jnp.float32)}
  hidden = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)
  layer = OutputLayer(units, width)
  scores = jax.jit(lambda p, h: layer.apply({'params': p}, h))(params, hidden)
  plain = jax.jit(lambda p, h: h @ p['embedding'].T + p['bias'])(params, hidden)
  np.testing.assert_array_equal(scores, plain)
  trained = jax.jit(lambda p, h: jax.vjp(lambda q: layer.apply({'params': q}, h), p)[0])(
      params, hidden)
  np.testing.assert_allclose(trained, plain, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('dtype', [jnp.float32, jnp.bfloat16])
def test_the_plain_path_is_autodiffs_log_softmax(dtype):
  """The hand-written backward (output_layer.log_softmax_of_scores_at, every_score) against
  autodiff of jax.nn.log_softmax's entry at the target: the same values and gradients, of
  the same dtypes (bfloat16 weights: bfloat16 gradients), under vmap, to within rounding.
  Differentiated, every_score adds the bias inside the matmul's sum over D, in another order
  than autodiff's: the values and the rows' gradients to within rounding that grows as
  √(D + 1); the hidden vectors' gradient, a sum over the units, as √units."""
  units, batch, rng = 2000, 64, np.random.default_rng(3)
  params = {'embedding': rng.normal(size=(2, units, D)), 'bias': rng.normal(size=(2, units))}
  params, hidden = jax.tree.map(lambda a: jnp.asarray(a, dtype),
                                (params, rng.normal(size=(batch, D))))
  targets = jnp.asarray(rng.integers(0, units, batch), jnp.int32)
  weights = jnp.asarray(rng.integers(0, 3, batch) / 2, jnp.float32)

  def ours(p, h):
    layer = OutputLayer(units, D)
    return layer.apply({'params': p}, h, targets, method=layer.log_softmax_at)

  def autodiffs(p, h):
    scores = (h @ p['embedding'].T + p['bias']).astype(jnp.float32)
    return jnp.take_along_axis(jax.nn.log_softmax(scores), targets[:, None], axis=-1)[:, 0]

  got, want = [jax.jit(jax.vmap(jax.value_and_grad(
      lambda p, h, way=way: jnp.sum(weights * way(p, h)), argnums=(0, 1)),
      in_axes=(0, None)))(params, hidden) for way in (ours, autodiffs)]
  assert jax.tree.map(lambda a: a.dtype, got) == jax.tree.map(lambda a: a.dtype, want)
  eps = 2 * float(jnp.finfo(dtype).eps)
  (value, (params_grad, hidden_grad)), (want_value, (want_params, want_hidden)) = got, want
  for ours_leaf, autodiff_leaf, tolerance in [
      *((a, b, eps * np.sqrt(D + 1)) for a, b in zip(jax.tree.leaves((value, params_grad)),
                                                     jax.tree.leaves((want_value, want_params)))),
      (hidden_grad, want_hidden, eps * np.sqrt(units))]:
    ours_leaf, autodiff_leaf = (np.asarray(a, np.float32) for a in (ours_leaf, autodiff_leaf))
    np.testing.assert_allclose(ours_leaf, autodiff_leaf, rtol=tolerance,
                               atol=tolerance * np.abs(autodiff_leaf).max())


def test_k_stacked_models_are_chunked_under_vmap(monkeypatch):
  allow_rows(monkeypatch, B, 25)
  params, hidden = layer_params(models=2), random_hidden(B, D)
  got = jax.jit(jax.vmap(log_softmax_at, in_axes=(0, None, None)))(params, hidden, TARGETS)
  for k in range(2):
    model = jax.tree.map(lambda a, k=k: a[k], params)
    np.testing.assert_allclose(got[k], numpy_log_softmax_at(model, hidden, TARGETS)[0],
                               atol=1e-5)


@pytest.mark.parametrize('name,knobs', [('softmax', {}), ('is', {}), ('nce', {}),
                                        ('adaptive', {'adaptive_cutoffs': '5,15'})])
def test_heads_log_prob_in_chunks_is_normalized_and_equals_numpy(name, knobs, monkeypatch):
  """log_prob of every word for each hidden vector (5 × 37 pairs, 4 rows a chunk: the
  adaptive head's 7 head units, 10 and 22 tail words each end in a clamped chunk):
  normalized, and equal to the head's formula in numpy (tests/test_heads.py), itself
  normalized."""
  head = make_head(name, **knobs)
  params, hidden = random_params(head), random_hidden()
  pairs = len(hidden) * head.vocab_size
  allow_rows(monkeypatch, pairs, 4)
  assert chunk_rows(pairs, 7) == chunk_rows(pairs, 10) == chunk_rows(pairs, 22) == 4
  every_word, _ = log_prob_of_every_word(head, params, hidden)
  expected = numpy_log_probs(name, head, params, hidden)
  np.testing.assert_allclose(np.exp(expected).sum(axis=1), 1.0, atol=1e-9)
  np.testing.assert_allclose(np.exp(every_word).sum(axis=1), 1.0, atol=1e-5)
  np.testing.assert_allclose(every_word, expected, atol=1e-5)


@pytest.mark.slow
def test_a_k_model_evaluation_pass_in_chunks_equals_numpy_eq1(monkeypatch):
  """The feed's vmapped scoring pass over a split (two NNLMs, 61 words in chunks of 16, the
  last clamped), against Eq. 1 in numpy, token by token."""
  order, counts, batch = 3, np.arange(61, 0, -1), 8
  allow_rows(monkeypatch, batch, 16)
  assert chunk_rows(batch, len(counts)) == 16
  config = Config(workdir='unused', order=order, feature_size=4, hidden_size=5, direct=True,
                  eval_batch_size=batch).resolved()
  lm = build_language_model(config, counts)
  ids = np.random.default_rng(0).integers(0, len(counts), 45).astype(np.int32)
  mesh = parallel.make_mesh('', devices=jax.devices('cpu')[:1])
  feed = WindowFeed(config, lm, {'valid': ids}, boundary_id=0, mesh=mesh, num_models=2)
  models = [WindowFeed.initial_params(config, lm, jax.random.key(seed)) for seed in (1, 2)]
  got = feed.log_probs(jax.tree.map(lambda *leaves: jnp.stack(leaves), *models), 'valid')
  assert got.shape == (2, len(ids))
  stream = np.concatenate([np.zeros(order - 1, np.int32), ids])  # Boundary id 0 first.
  context = np.stack([stream[t + order - 2 - np.arange(order - 1)] for t in range(len(ids))])
  for params, log_p in zip(models, got):
    expected = numpy_eq1(params, context, config.hidden_size, config.direct)
    np.testing.assert_allclose(log_p, expected[np.arange(len(ids)), ids], atol=1e-5)


def test_a_split_shorter_than_an_eval_batch_is_one_batch_of_its_size_and_exact():
  """45 words at --eval_batch_size=2048: one batch of 48 positions (45 rounded up to 8), not
  2,048; its log-probs Eq. 1's in numpy, token by token."""
  order, counts = 3, np.arange(30, 0, -1)
  config = Config(workdir='unused', order=order, feature_size=4, hidden_size=5, direct=True,
                  eval_batch_size=2048).resolved()
  lm = build_language_model(config, counts)
  ids = np.random.default_rng(0).integers(0, len(counts), 45).astype(np.int32)
  mesh = parallel.make_mesh('', devices=jax.devices('cpu')[:1])
  feed = WindowFeed(config, lm, {'valid': ids}, boundary_id=0, mesh=mesh)
  params = WindowFeed.initial_params(config, lm, jax.random.key(1))
  pieces, count = feed.scoring_pass(params, feed.splits['valid'], len(ids))
  assert count == 1 and [mask.shape for _, mask in pieces] == [(48,)]
  stream = np.concatenate([np.zeros(order - 1, np.int32), ids])  # Boundary id 0 first.
  context = np.stack([stream[t + order - 2 - np.arange(order - 1)] for t in range(len(ids))])
  expected = numpy_eq1(params, context, config.hidden_size, config.direct)
  np.testing.assert_allclose(feed.log_probs(params, 'valid'),
                             expected[np.arange(len(ids)), ids], atol=1e-5)


def test_splits_of_different_lengths_share_one_compiled_scoring_program():
  """Valid (45 words) and test (61) at --eval_batch_size=8: one program scores both (each
  split's device copy padded to one scored length, 64), each split exactly Eq. 1 in numpy."""
  order, counts = 3, np.arange(30, 0, -1)
  config = Config(workdir='unused', order=order, feature_size=4, hidden_size=5, direct=True,
                  eval_batch_size=8).resolved()
  lm = build_language_model(config, counts)
  rng = np.random.default_rng(0)
  splits = {name: rng.integers(0, len(counts), n).astype(np.int32)
            for name, n in (('valid', 45), ('test', 61))}
  mesh = parallel.make_mesh('', devices=jax.devices('cpu')[:1])
  feed = WindowFeed(config, lm, splits, boundary_id=0, mesh=mesh)
  params = WindowFeed.initial_params(config, lm, jax.random.key(1))
  for name, ids in splits.items():
    stream = np.concatenate([np.zeros(order - 1, np.int32), ids])  # Boundary id 0 first.
    context = np.stack([stream[t + order - 2 - np.arange(order - 1)] for t in range(len(ids))])
    expected = numpy_eq1(params, context, config.hidden_size, config.direct)
    np.testing.assert_allclose(feed.log_probs(params, name),
                               expected[np.arange(len(ids)), ids], atol=1e-5)
  assert feed.log_prob_step._cache_size() == 1  # pylint: disable=protected-access


@pytest.mark.slow
def test_the_benchmark_reports_every_figure_from_its_measurements(tmp_path):
  sizes, tokens, batch = (300, 1500), 400, 64
  out = tmp_path / 'exact_eval'
  run = subprocess.run(
      [sys.executable, '-m', 'experiments.benchmarks.exact_eval',
       f'--vocab_sizes={",".join(map(str, sizes))}', f'--tokens={tokens}',
       f'--eval_batch_size={batch}', '--repeats=1', '--square=64', f'--out={out}'],
      capture_output=True, text=True, check=False, timeout=300)
  assert run.returncode == 0, run.stderr[-3000:]
  report = json.loads(out.with_suffix('.json').read_text())
  assert out.with_suffix('.md').read_text().count('\n| ') == 2 + len(sizes) + 2
  assert [(r['head'], r['vocab_size']) for r in report['rows']] == (
      [('softmax', v) for v in sizes] + [('tree', 1500), ('adaptive', 1500)])
  width = report['output_width']
  assert width == 100  # MLP9: the output layer reads h = 100 (no direct connections).
  for row in report['rows']:
    assert row['tokens_per_second'] == pytest.approx(tokens / row['seconds'])
    if row['head'] != 'softmax':
      continue
    v = row['vocab_size']
    assert row['chunk_rows'] == chunk_rows(batch, v) and row['chunks'] == 1
    assert row['output_flops_per_token'] == 2 * width * v
    assert row['model_flops_per_token'] == 2 * 4 * 30 * 100  # (n-1)·m inputs, h units
    rate = 2 * width * v * tokens / row['seconds']
    assert row['output_flops_per_second'] == pytest.approx(rate)
    assert row['total_flops_per_second'] == pytest.approx(
        (2 * width * v + 2 * 4 * 30 * 100) * tokens / row['seconds'])
    assert row['share_of_chunk_matmul'] == pytest.approx(
        rate / row['chunk_matmul_flops_per_second'])
    assert row['share_of_square_matmul'] == pytest.approx(
        rate / report['square_flops_per_second'])
