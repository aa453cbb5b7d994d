"""Row-sparse optimizers: SGD equals the dense SGD (with decay: once the lazy decay is paid),
lazy Adam equals a numpy lazy Adam, and only the rows a step reads change."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training import train_state

from nplm import sparse_rows
from nplm.config import Config, ConfigError
from nplm.data import batching
from nplm.lm import build_language_model
from nplm.training.optimizer import apply_gradients, make_optimizer, pay_decay_debts
from nplm.training.schedules import learning_rate_at
from nplm.training.window_feed import WindowFeed, batch_loss
from nplm.training.config_checks import validated

VOCAB = 40
COUNTS = np.arange(VOCAB, 0, -1)
TRAIN = np.random.default_rng(0).integers(0, VOCAB, 300)


def window_config(**changes) -> Config:
  sampled = {'num_samples': 7} if changes.get('head') in ('is', 'nce') else {}
  return Config(**{'workdir': 'unused', 'order': 3, 'feature_size': 6, 'hidden_size': 10,
                   'batch_size': 16, **sampled, 'optimizer': 'sgd',
                   'learning_rate': 0.2, **changes})


def dense_sgd(config: Config) -> optax.GradientTransformation:
  """The paper's update on whole arrays, written with optax alone (no nplm optimizer)."""
  decayed = functools.partial(jax.tree_util.tree_map_with_path,
                              lambda path, _: path[-1].key != 'bias')
  update = optax.chain(optax.add_decayed_weights(config.weight_decay, decayed),
                       optax.sgd(functools.partial(learning_rate_at, config)))
  if config.clip_norm:
    return optax.chain(optax.clip_by_global_norm(config.clip_norm), update)
  return update


@pytest.mark.parametrize('head, changes', [
    ('nce', dict()), ('tree', dict(weight_decay=0.3, lr_decay=0.2)),
    ('nce', dict(weight_decay=0.1, lr_decay=0.1, clip_norm=0.5))])
@pytest.mark.slow
def test_sgd_on_read_rows_equals_dense_sgd(head, changes):
  """Six row-sparse steps (C and the head's rows read by row; a word absent from most
  batches owes several steps of decay) give the dense SGD's parameters."""
  config = window_config(head=head, **changes)
  lm = build_language_model(config, COUNTS)
  feed = WindowFeed(config, lm, {'train': TRAIN}, boundary_id=0)
  state = feed.create_state(jax.random.key(0))
  tables = state.opt_state.inner_state.tables
  assert set(tables['model']) == {'C'} and tables['head']
  params = jax.tree.map(np.asarray, state.params)
  tx, run_rng = dense_sgd(config), jax.random.key(3)
  opt_state = tx.init(params)
  padded = batching.pad_split(TRAIN, config.order, 0)
  batches = list(batching.train_batches(len(TRAIN), config.batch_size, 0, 0, 0))[:6]
  for step, (positions, mask) in enumerate(batches):
    state, _ = feed.step(state, (positions, mask), run_rng)
    context, targets = batching.windows(jnp.asarray(padded), positions, config.order)
    grads = jax.grad(lambda p: batch_loss(lm, p, context, targets, mask,
                                          jax.random.fold_in(run_rng, step)))(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
  settled = jax.tree.map(np.asarray, feed.pay_decay_debts(state).params)
  for got, want in zip(jax.tree.leaves(settled), jax.tree.leaves(params)):
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def numpy_lazy_adam(table, steps, config, b1=0.9, b2=0.999, eps=1e-8, decayed=True):
  """Lazy Adam on a numpy table: each step sums the gradients of repeated ids, moves the read
  rows' moments and rows by Adam, and decays every row (AdamW's decoupled decay)."""
  table, mu, nu = (np.array(table, np.float64), np.zeros_like(table, np.float64),
                   np.zeros_like(table, np.float64))
  for t, (ids, grads) in enumerate(steps):
    rate = config.learning_rate / (1 + config.lr_decay * t)
    summed = np.zeros_like(table)
    np.add.at(summed, ids, grads)
    read = np.unique(ids)
    if decayed:
      table *= 1 - rate * config.weight_decay
    mu[read] = b1 * mu[read] + (1 - b1) * summed[read]
    nu[read] = b2 * nu[read] + (1 - b2) * summed[read] ** 2
    table[read] -= rate * (mu[read] / (1 - b1 ** (t + 1))) / (
        np.sqrt(nu[read] / (1 - b2 ** (t + 1))) + eps)
  return table


@pytest.mark.slow
def test_lazy_adam_equals_numpy_lazy_adam():
  """Four updates of a table (repeated ids, rows never read, decay, decaying rate) and its
  biases against numpy; a dense weight beside them takes optax's AdamW."""
  config = window_config(optimizer='lazy_adam', learning_rate=0.05, weight_decay=0.2,
                         lr_decay=0.3)
  rng = np.random.default_rng(1)
  params = {'C': {'embedding': rng.normal(size=(9, 3)).astype(np.float32),
                  'bias': rng.normal(size=9).astype(np.float32)},
            'H': {'kernel': rng.normal(size=(3, 2)).astype(np.float32)}}
  tables = (('C', 'bias'), ('C', 'embedding'))
  state = train_state.TrainState.create(apply_fn=None, params=jax.tree.map(jnp.asarray, params),
                                        tx=make_optimizer(config, tables))
  adamw = optax.adamw(functools.partial(learning_rate_at, config), weight_decay=0.2)
  dense, adamw_state = params['H']['kernel'], adamw.init(params['H']['kernel'])
  steps = []
  for ids in ([1, 1, 4], [4, 2, 2, 2], [1, 7, 7], [0, 4, 1]):  # 3, 5, 6, 8 never read.
    ids = np.asarray(ids)
    row_grads = rng.normal(size=(len(ids), 3)).astype(np.float32)
    bias_grads = rng.normal(size=len(ids)).astype(np.float32)
    dense_grad = rng.normal(size=(3, 2)).astype(np.float32)
    steps.append((ids, row_grads, bias_grads))
    grads = {'C': {'embedding': np.zeros((9, 3), np.float32), 'bias': np.zeros(9, np.float32)},
             'H': {'kernel': dense_grad}}
    rows = {('C', 'embedding'): (ids, row_grads), ('C', 'bias'): (ids, bias_grads)}
    state = apply_gradients(config, state, grads, rows)
    updates, adamw_state = adamw.update(dense_grad, adamw_state, dense)
    dense = optax.apply_updates(dense, updates)
  settled = jax.tree.map(np.asarray, pay_decay_debts(config, state).params)
  want_table = numpy_lazy_adam(params['C']['embedding'], [(i, g) for i, g, _ in steps], config)
  want_bias = numpy_lazy_adam(params['C']['bias'], [(i, b) for i, _, b in steps], config,
                              decayed=False)
  np.testing.assert_allclose(settled['C']['embedding'], want_table, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(settled['C']['bias'], want_bias, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(settled['H']['kernel'], dense, rtol=1e-5, atol=1e-6)
  never_read = [3, 5, 6, 8]
  np.testing.assert_array_equal(settled['C']['bias'][never_read],
                                params['C']['bias'][never_read])


@pytest.mark.slow
def test_a_step_writes_only_the_rows_it_reads():
  """Without decay, the rows of C no window of the batch holds are bit-for-bit unchanged."""
  config = window_config(optimizer='lazy_adam', head='is')
  feed = WindowFeed(config, build_language_model(config, COUNTS), {'train': TRAIN}, 0)
  state = feed.create_state(jax.random.key(0))
  before = np.asarray(state.params['model']['C']['embedding'])
  positions, mask = next(iter(batching.train_batches(len(TRAIN), config.batch_size, 0, 0, 0)))
  state, _ = feed.step(state, (positions, mask), jax.random.key(1))
  after = np.asarray(state.params['model']['C']['embedding'])
  context, _ = batching.windows(batching.pad_split(TRAIN, config.order, 0), positions,
                                config.order)
  read = np.zeros(VOCAB, bool)
  read[np.asarray(context).ravel()] = True
  assert np.all(np.any(after != before, axis=1)[read])
  np.testing.assert_array_equal(after[~read], before[~read])


@pytest.mark.parametrize('optimizer', ['sgd', 'lazy_adam'])
@pytest.mark.slow
def test_the_train_states_own_update_is_refused_naming_the_real_one(optimizer):
  """A row-sparse update needs the row gradients, which TrainState.apply_gradients cannot
  pass: calling it by mistake says which function updates."""
  config = window_config(optimizer=optimizer)
  feed = WindowFeed(config, build_language_model(config, COUNTS), {'train': TRAIN}, 0)
  state = feed.create_state(jax.random.key(0))
  with pytest.raises(TypeError, match=r'optimizer\.apply_gradients\(config, state, grads'):
    state.apply_gradients(grads=state.params)


def test_compensated_sum_keeps_tiny_decays():
  """A million steps of log(1 - 1e-7) (the paper's ε λ = 1e-3·1e-4) summed in float32 pairs
  as exactly as in float64; a plain float32 sum is 1% off."""
  step = jnp.log1p(jnp.float32(-1e-7))
  total, _ = jax.lax.scan(lambda total, _: (sparse_rows.compensated_add(total, step), None),
                          jnp.zeros(2, jnp.float32), None, length=1_000_000)
  np.testing.assert_allclose(float(total[0]) + float(total[1]), 1e6 * float(step), rtol=1e-9)


def test_lazy_adam_with_tied_embeddings_is_refused():
  with pytest.raises(ConfigError, match='--optimizer=lazy_adam.*--tie_embeddings'):
    validated(window_config(optimizer='lazy_adam', tie_embeddings=True, hidden_size=6))
