"""The vocabulary-parallel output layer against brute force in float64 numpy, on 8
simulated devices in a child process (tests/multidevice.py says why)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from nplm.heads import vocab_parallel as vp
from tests import multidevice

DEVICES = 8
D, BATCH, VOCAB = 8, 8, 37  # 37 is no multiple of 4 or 8: every mesh below pads.
PAD = 50.  # Pad rows hold large values: a missing mask would dominate log Z.
MESHES = ((2, 4), (1, 8), (8, 1))  # (data, model)
TOL = dict(rtol=1e-5, atol=1e-5)


# --- Run in the child, on 8 simulated CPU devices. ---

def make_mesh(data: int, model: int):
  return jax.make_mesh((data, model), ('data', 'model'),
                       axis_types=(jax.sharding.AxisType.Auto,) * 2)


def make_arrays(vocab: int, model: int, seed: int = 0):
  """hidden, embedding, bias, targets, units as numpy float32 / int32; pad rows hold PAD."""
  rng = np.random.default_rng(seed)
  rows = vp.padded_rows(vocab, model)
  hidden = rng.normal(size=(BATCH, D)).astype(np.float32)
  embedding = np.full((rows, D), PAD, np.float32)
  embedding[:vocab] = rng.normal(scale=0.5, size=(vocab, D))
  bias = np.full((rows,), PAD, np.float32)
  bias[:vocab] = rng.normal(size=vocab)
  targets = rng.integers(0, vocab, size=BATCH).astype(np.int32)
  targets[0], targets[1] = 0, vocab - 1  # The first and the last word.
  units = rng.integers(0, vocab, size=5).astype(np.int32)
  return hidden, embedding, bias, targets, units


def place(mesh, hidden, embedding, bias, targets, units):
  put = lambda x, *spec: jax.device_put(x, NamedSharding(mesh, P(*spec)))
  return (put(hidden, 'data', None), put(embedding, 'model', None), put(bias, 'model'),
          put(targets, 'data'), put(units))


def numpy_scores(hidden, embedding, bias, vocab):
  """s(w, h) for the first `vocab` rows in float64, [b, vocab]."""
  return hidden.astype(np.float64) @ embedding[:vocab].T.astype(np.float64) + bias[:vocab]


def numpy_log_probs(hidden, embedding, bias, vocab):
  scores = numpy_scores(hidden, embedding, bias, vocab)
  top = scores.max(axis=1, keepdims=True)
  return scores - top - np.log(np.exp(scores - top).sum(axis=1, keepdims=True))


def jitted(fn, **static):
  return jax.jit(functools.partial(fn, **static))


def each_mesh():
  """(mesh, arrays in numpy, the same arrays placed on the mesh) for every mesh of MESHES."""
  for data, model in MESHES:
    mesh = make_mesh(data, model)
    arrays = make_arrays(VOCAB, model)
    yield mesh, arrays, place(mesh, *arrays)


def check_log_probs_match_numpy():
  for mesh, (hidden, embedding, bias, targets, _), (h, e, b, t, _) in each_mesh():
    expected = numpy_log_probs(hidden, embedding, bias, VOCAB)
    log_z = numpy_scores(hidden, embedding, bias, VOCAB)[:, 0] - expected[:, 0]
    np.testing.assert_allclose(
        jitted(vp.log_partition, vocab_size=VOCAB, mesh=mesh)(h, e, b), log_z, **TOL)
    np.testing.assert_allclose(
        jitted(vp.log_softmax_at, vocab_size=VOCAB, mesh=mesh)(h, e, b, t),
        expected[np.arange(BATCH), targets], **TOL)
    full = jitted(vp.log_softmax_full, vocab_size=VOCAB, mesh=mesh)(h, e, b)
    assert full.shape == (BATCH, VOCAB), full.shape
    np.testing.assert_allclose(full, expected, **TOL)


def check_full_distribution_stays_sharded():
  """With no pad columns to cut off, log_softmax_full's output stays sharded over 'model' and
  nothing is gathered. (With pad columns the slice to vocab_size gathers: no uneven shards.)"""
  mesh = make_mesh(2, 4)
  arrays = make_arrays(40, 4)
  fn = jitted(vp.log_softmax_full, vocab_size=40, mesh=mesh)
  args = place(mesh, *arrays)[:3]
  full = fn(*args)
  assert full.sharding.spec == P('data', 'model'), full.sharding
  assert 'all-gather' not in fn.lower(*args).compile().as_text()
  np.testing.assert_allclose(full, numpy_log_probs(*arrays[:3], 40), **TOL)


def check_scores_match_numpy():
  for mesh, (hidden, embedding, bias, targets, units), (h, e, b, t, u) in each_mesh():
    scores = numpy_scores(hidden, embedding, bias, VOCAB)
    np.testing.assert_allclose(jitted(vp.score_each, mesh=mesh)(h, e, b, t),
                               scores[np.arange(BATCH), targets], **TOL)
    np.testing.assert_allclose(jitted(vp.score_shared, mesh=mesh)(h, e, b, u),
                               scores[:, units], **TOL)


def nll(hidden, embedding, bias, targets, vocab, mesh):
  return -jnp.mean(vp.log_softmax_at(hidden, embedding, bias, targets, vocab, mesh))


def reference_nll(hidden, embedding, bias, targets, vocab):
  """The same loss on one device with plain jnp over the unpadded rows."""
  log_probs = jax.nn.log_softmax(hidden @ embedding[:vocab].T + bias[:vocab])
  return -jnp.mean(log_probs[jnp.arange(hidden.shape[0]), targets])


def assert_gradients_match(data, model, vocab):
  """Gradients of the mean NLL equal one device's, are finite, and are exactly 0 on pad rows."""
  mesh = make_mesh(data, model)
  arrays = make_arrays(vocab, model)
  h, e, b, t, _ = place(mesh, *arrays)
  grads = jax.jit(jax.grad(nll, argnums=(0, 1, 2)), static_argnums=(4, 5))(
      h, e, b, t, vocab, mesh)
  one = jax.devices()[0]
  hidden, embedding, bias, targets = (jax.device_put(x, one) for x in arrays[:4])
  expected = jax.grad(reference_nll, argnums=(0, 1, 2))(hidden, embedding, bias, targets, vocab)
  for name, grad, want in zip(('hidden', 'embedding', 'bias'), grads, expected):
    grad, want = np.asarray(grad), np.asarray(want)
    assert np.all(np.isfinite(grad)), name
    np.testing.assert_allclose(grad[:vocab], want[:vocab], **TOL, err_msg=name)
    if name != 'hidden':
      assert np.all(grad[vocab:] == 0), f'{name}: pad rows got {grad[vocab:]}'


def check_gradients_match_one_device():
  for data, model in MESHES:
    assert_gradients_match(data, model, VOCAB)


def check_shards_of_pad_only():
  """vocab 5 over 4 shards: R = 8, shard 3 holds rows 6, 7, both pad; vocab 1 over 8 shards:
  7 shards of pad. No NaN in values or gradients."""
  for (data, model), vocab in (((2, 4), 5), ((1, 8), 1)):
    mesh = make_mesh(data, model)
    arrays = make_arrays(vocab, model)
    hidden, embedding, bias, targets, _ = arrays
    h, e, b, t, _ = place(mesh, *arrays)
    expected = numpy_log_probs(hidden, embedding, bias, vocab)
    at = jitted(vp.log_softmax_at, vocab_size=vocab, mesh=mesh)(h, e, b, t)
    np.testing.assert_allclose(at, expected[np.arange(BATCH), targets], **TOL)
    full = jitted(vp.log_softmax_full, vocab_size=vocab, mesh=mesh)(h, e, b)
    np.testing.assert_allclose(full, expected, **TOL)
    assert_gradients_match(data, model, vocab)


def check_sampled_scores_gradients():
  """score_each and score_shared (the sampled heads' scores) differentiate like one device's."""
  mesh = make_mesh(2, 4)
  arrays = make_arrays(VOCAB, 4)

  def loss(hidden, embedding, bias, targets, units, each, shared):
    return jnp.sum(jnp.sin(each(hidden, embedding, bias, targets))) + jnp.sum(
        jnp.cos(shared(hidden, embedding, bias, units)))

  parallel = functools.partial(loss, each=functools.partial(vp.score_each, mesh=mesh),
                               shared=functools.partial(vp.score_shared, mesh=mesh))
  grads = jax.jit(jax.grad(parallel, argnums=(0, 1, 2)))(*place(mesh, *arrays))
  each = lambda h, e, b, u: jnp.sum(h * e[u], axis=-1) + b[u]
  shared = lambda h, e, b, u: h @ e[u].T + b[u]
  one = jax.devices()[0]
  expected = jax.grad(functools.partial(loss, each=each, shared=shared), argnums=(0, 1, 2))(
      *(jax.device_put(x, one) for x in arrays))
  for grad, want in zip(grads, expected):
    np.testing.assert_allclose(grad, want, **TOL)


def check_no_gather_of_logits():
  """The compiled log_softmax_at and log_partition, and the gradient of the NLL, move only
  [b]-sized all-reduces between shards: no all-gather, all-to-all or collective-permute."""
  mesh = make_mesh(2, 4)
  args = place(mesh, *make_arrays(VOCAB, 4))
  programs = {
      'log_softmax_at': jitted(vp.log_softmax_at, vocab_size=VOCAB, mesh=mesh).lower(*args[:4]),
      'log_partition': jitted(vp.log_partition, vocab_size=VOCAB, mesh=mesh).lower(*args[:3]),
      'grad nll': jax.jit(jax.grad(nll, argnums=(0, 1, 2)), static_argnums=(4, 5)).lower(
          *args[:4], VOCAB, mesh),
  }
  for name, lowered in programs.items():
    hlo = lowered.compile().as_text()
    assert 'all-reduce' in hlo, f'{name}: no all-reduce, is it sharded at all?'
    for op in ('all-gather', 'all-to-all', 'collective-permute'):
      assert op not in hlo, f'{name} has an {op}:\n' + '\n'.join(
          line for line in hlo.splitlines() if op in line)


CHECKS = multidevice.check_names(globals())


# --- Run by pytest. ---

@pytest.fixture(scope='module')
def report():
  return multidevice.child_report('tests.test_vocab_parallel', DEVICES)


@pytest.mark.parametrize('check', CHECKS)
@pytest.mark.slow
def test_on_8_devices(report, check):
  assert report[check] == 'ok', report[check]


def test_padded_rows():
  assert [vp.padded_rows(v, 4) for v in (1, 4, 5, 37)] == [4, 4, 8, 40]
  assert vp.padded_rows(37, 8) == 40 and vp.padded_rows(37, 1) == 37


if __name__ == '__main__':
  multidevice.run_checks(globals(), DEVICES)
