"""Eq. 1 of Bengio et al. (2003) against a direct numpy computation."""

import jax
import numpy as np
import pytest

from nplm import parallel
from nplm.config import Config
from nplm.data import batching
from nplm.lm import build_language_model
from nplm.run_files.summary import parameter_count


def numpy_eq1(params, context, hidden_size, direct):
  """y = b + W x + U tanh(d + H x), then the softmax, written out in numpy."""
  C = np.asarray(params['model']['C']['embedding'])
  x = np.concatenate([C[context[:, j]] for j in range(context.shape[1])], axis=1)
  out = params['head']['output']
  kernel, b = np.asarray(out['embedding'], np.float64).T, np.asarray(out['bias'], np.float64)
  y = np.broadcast_to(b, (len(context), len(b))).copy()
  if direct:
    W = kernel[:x.shape[1]]
    y += x @ W
  if hidden_size:
    H, d = np.asarray(params['model']['H']['kernel']), np.asarray(params['model']['H']['bias'])
    U = kernel[-hidden_size:]
    y += np.tanh(d + x @ H) @ U
  y -= y.max(axis=1, keepdims=True)
  return y - np.log(np.exp(y).sum(axis=1, keepdims=True))


@pytest.mark.parametrize('order,hidden_size,direct', [(5, 7, False), (3, 6, True), (4, 0, True)])
def test_log_probs_match_numpy_eq1(order, hidden_size, direct):
  vocab_size = 23
  config = Config(workdir='unused', order=order, feature_size=4, hidden_size=hidden_size,
                  direct=direct)
  lm = build_language_model(config, np.ones(vocab_size))
  context = np.random.default_rng(0).integers(0, vocab_size, (9, order - 1)).astype(np.int32)
  params = lm.init(jax.random.key(1), context, method=lm.log_probs)['params']
  # Random, non-zero biases so that b and d are exercised too.
  params = jax.tree.map(lambda p: p + 0.1 * np.random.default_rng(2).normal(size=p.shape),
                        params)
  got = np.asarray(lm.apply({'params': params}, context, method=lm.log_probs))
  want = numpy_eq1(params, context, hidden_size, direct)
  np.testing.assert_allclose(got, want, atol=1e-5)
  targets = np.arange(9, dtype=np.int32) % vocab_size
  got_target = np.asarray(lm.apply({'params': params}, context, targets, method=lm.log_prob))
  np.testing.assert_allclose(got_target, want[np.arange(9), targets], atol=1e-5)
  assert lm.model.output_width == hidden_size + (4 * (order - 1) if direct else 0)


def test_windows_put_the_previous_word_first_and_pad_with_the_boundary():
  ids = np.array([10, 11, 12, 13], np.int32)
  padded = batching.pad_split(ids, order=4, boundary_id=99)
  context, targets = batching.windows(padded, np.array([0, 3]), order=4)
  np.testing.assert_array_equal(context, [[99, 99, 99], [12, 11, 10]])
  np.testing.assert_array_equal(targets, [10, 13])


def test_batches_cover_every_example_once_and_mask_the_padding():
  seen = []
  for positions, mask in batching.train_batches(10, 4, seed=3, epoch=1):
    seen.extend(positions[mask > 0])
    assert len(positions) == 4
  assert sorted(seen) == list(range(10))
  first = [p.copy() for p, _ in batching.train_batches(10, 4, seed=3, epoch=1)]
  resumed = [p for p, _ in batching.train_batches(10, 4, seed=3, epoch=1, start=1)]
  np.testing.assert_array_equal(np.concatenate(first[1:]), np.concatenate(resumed))
  other_epoch = np.concatenate([p for p, _ in batching.train_batches(10, 4, seed=3, epoch=2)])
  assert not np.array_equal(np.concatenate(first), other_epoch)
  evals = list(batching.eval_batches(10, 4))
  assert [int(m.sum()) for _, m in evals] == [4, 4, 2]


@pytest.mark.parametrize('num_tokens, stride', [(1, 1), (17, 1), (17, 4), (24, 4), (5, 9)])
def test_the_int32_shuffle_is_numpys_permutation_of_the_strided_positions(num_tokens, stride):
  """The batch order held as int32 and shuffled in place (4 bytes a token at 100M tokens) is
  the order `rng.permutation` gives the positions: runs recorded before keep their numbers."""
  positions = np.arange((num_tokens - 1) % stride, num_tokens, stride)
  expected = positions[np.random.default_rng([7, 3]).permutation(len(positions))]
  batches = list(batching.train_batches(num_tokens, 3, seed=7, epoch=3, stride=stride))
  got = np.concatenate([p[m > 0] for p, m in batches])
  np.testing.assert_array_equal(got, expected)
  assert batching.strided_count(num_tokens, stride) == len(positions)
  assert all(p.dtype == np.int32 for p, _ in batches)


@pytest.mark.slow
def test_nnlm_dropout_is_inverted_dropout_in_training_and_off_in_evaluation():
  order, hidden_size, rate, vocab_size = 4, 16, 0.5, 23
  config = Config(workdir='unused', order=order, feature_size=8, hidden_size=hidden_size,
                  direct=True, dropout=rate)
  lm = build_language_model(config, np.ones(vocab_size))
  context = np.random.default_rng(0).integers(0, vocab_size, (64, order - 1)).astype(np.int32)
  params = lm.init(jax.random.key(1), context, method=lm.log_probs)['params']
  # Evaluation: Eq. 1 exactly, as if there were no dropout.
  got = np.asarray(lm.apply({'params': params}, context, method=lm.log_probs))
  np.testing.assert_allclose(got, numpy_eq1(params, context, hidden_size, True), atol=1e-5)
  # Training: each unit of x and of tanh(d + H x̃) is 0 or scaled by 1/(1 - rate), where x̃ is
  # x after its own dropout.
  hidden = np.asarray(lm.model.apply({'params': params['model']}, context, train=True,
                                     rngs={'dropout': jax.random.key(2)}))
  C = np.asarray(params['model']['C']['embedding'])
  x = np.concatenate([C[context[:, j]] for j in range(order - 1)], axis=1)
  x_dropped, tanh_dropped = hidden[:, :x.shape[1]], hidden[:, x.shape[1]:]
  kept_x = x_dropped != 0
  np.testing.assert_allclose(x_dropped[kept_x], x[kept_x] / (1 - rate), rtol=1e-5)
  H, d = np.asarray(params['model']['H']['kernel']), np.asarray(params['model']['H']['bias'])
  tanh_units = np.tanh(d + x_dropped @ H)
  kept_h = tanh_dropped != 0
  np.testing.assert_allclose(tanh_dropped[kept_h], tanh_units[kept_h] / (1 - rate), atol=1e-5)
  dropped_share = 1 - np.concatenate([kept_x.ravel(), kept_h.ravel()]).mean()
  assert abs(dropped_share - rate) < 0.05


@pytest.mark.parametrize('direct', [False, True])
def test_the_parameter_count_is_the_papers_from_arrays_or_shapes_padding_aside(direct):
  """Bengio et al. (2003), section 4: |V|(1 + nm + h) + h(1 + (n - 1)m) free parameters with
  the direct connections W, |V|(n - 1)m fewer without; vocabulary-parallel padding rows
  (nplm.parallel) are not parameters."""
  vocab_size, n, m, h = 23, 4, 5, 6
  config = Config(workdir='unused', order=n, feature_size=m, hidden_size=h, direct=direct)
  lm = build_language_model(config, np.ones(vocab_size))
  context = np.zeros((2, n - 1), np.int32)
  params = lm.init(jax.random.key(1), context, method=lm.log_probs)['params']
  want = vocab_size * (1 + n * m + h) + h * (1 + (n - 1) * m)
  if not direct:
    want -= vocab_size * (n - 1) * m
  shapes = jax.eval_shape(lambda: params)
  padded = jax.tree_util.tree_map_with_path(
      lambda path, p: np.pad(p, [(0, 9)] + [(0, 0)] * (p.ndim - 1))
      if parallel.is_output_row(path) else p, params)
  for tree in (params, shapes, padded):
    assert parameter_count(tree, vocab_size) == want
