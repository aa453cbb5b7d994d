"""Feed-forward models on n-gram windows: the state, the jitted steps, exact log-probs.

A split lives on the device once, left-padded with n-1 boundary tokens (nplm.data.batching);
an update sends B positions and the step gathers their windows. Every epoch visits every
training window once, in a shuffle derived from (seed, epoch). A model that trains every
position of its window (the Transformer) reads non-overlapping windows instead, every
(n-1)-th position: each training token is then one of its targets once per epoch.

K models of one shape may be trained together (nplm.train): their states are stacked along
a leading axis and one compiled step updates all of them with `jax.vmap`, every model reading
the same batch with its own hyperparameters (nplm.training.optimizer). Small models leave an
accelerator mostly idle; K of them in one step do not.

Data-parallel (nplm.parallel): the split is replicated, each update's B positions are split
over the mesh's 'data' axis, and one model's parameters live as `state_shardings` says
(replicated, or output rows split over 'model'); jit sums the gradients across the devices.
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax.training import train_state

from nplm import parallel, stop_requests
from nplm.training import optimizer
from nplm.training import sparse_rows
from nplm.data import batching
from nplm.errors import ConfigError
from nplm.lm import in_compute_dtype
from nplm.perplexity import perplexity
from nplm.display import progress as show_progress


def init_state(config, lm, rng, tx) -> train_state.TrainState:
  """One model's initial state, on the default device (WindowFeed.create_state lays it out)."""
  context, target = jnp.zeros((1, config.order - 1), jnp.int32), jnp.zeros(1, jnp.int32)
  # Through log_prob, which every head computes from all its parameters: the heads' full
  # log_probs can be slow op by op (the tree walks its levels).
  params = lm.init(rng, context, target, method=lm.log_prob)['params']
  return train_state.TrainState.create(apply_fn=lm.apply, params=lm.stored_params(params),
                                       tx=tx)


def abstract_state(config, lm) -> train_state.TrainState:
  """One model's initial state (parameters and optimizer state) as shapes and dtypes only:
  `jax.eval_shape` traces the initialization and allocates nothing (nplm.training.memory)."""
  tx = optimizer.make_optimizer(config, tables_read(lm, config))
  return jax.eval_shape(lambda rng: init_state(config, lm, rng, tx), jax.random.key(0))


def masked_mean(losses, mask):
  """The losses averaged over the batch's real examples (mask 1)."""
  return jnp.sum(jnp.where(mask > 0, losses, 0.0)) / jnp.maximum(jnp.sum(mask), 1.0)


def dropout_rngs(rng) -> dict:
  """The model's dropout masks of an update, drawn apart from the head's samples (`rng`),
  so a model without dropout samples exactly as before dropout existed."""
  return {'dropout': jax.random.fold_in(rng, 1)}


def batch_loss(lm, params, context, targets, mask, rng):
  """The head's training loss averaged over the batch's real examples."""
  return masked_mean(lm.apply(lm.variables_of(params), context, targets, rng,
                              rngs=dropout_rngs(rng), method=lm.loss), mask)


def loss_and_grads(lm, config, state, context, targets, mask, rng):
  """(loss, dense gradients, row gradients of the tables or None): rows for a row-sparse
  optimizer (nplm.training.optimizer)."""
  if not optimizer.reads_rows(config):
    loss, grads = jax.value_and_grad(lambda params: batch_loss(
        lm, in_compute_dtype(params, config.dtype), context, targets, mask, rng))(state.params)
    return loss, grads, None

  def apply_loss(variables, mutable):
    variables = {**variables, 'params': in_compute_dtype(variables['params'], config.dtype)}
    losses, mutated = lm.apply(variables, context, targets, rng, rngs=dropout_rngs(rng),
                               method=lm.loss, mutable=mutable)
    return (masked_mean(losses, mask), None), mutated

  (loss, _), grads, rows = sparse_rows.value_and_row_grads(apply_loss, state.params,
                                                           optimizer.row_debts(state))
  return loss, grads, rows


def tables_read(lm, config) -> tuple:
  """The parameters the train step reads by row (nplm.training.sparse_rows), if it does."""
  if not optimizer.reads_rows(config):
    return ()
  context, targets = jnp.zeros((1, config.order - 1), jnp.int32), jnp.zeros(1, jnp.int32)
  key = jax.random.key(0)
  return sparse_rows.tables_read(lambda: lm.init(key, context, targets, key, method=lm.loss))


def make_train_step(lm, config, mesh, state_sharding, num_models: int = 1):
  """The jitted update (states donated): (states, hyperparameters, padded split, positions,
  mask, run keys) -> (states, losses); over K stacked models when num_models > 1."""

  def update(state, hyperparameters, padded_split, positions, mask, run_rng):
    context, targets = batching.windows(padded_split, positions, config.order)
    rng = jax.random.fold_in(run_rng, state.step)  # Each update's samples from its number.
    loss, grads, rows = loss_and_grads(lm, config, state, context, targets, mask, rng)
    return optimizer.apply_gradients(config, state, grads, hyperparameters, rows), loss

  step = update if num_models == 1 else jax.vmap(update, in_axes=(0, 0, None, None, None, 0))
  replicated, batch = parallel.sharding(mesh), parallel.sharding(mesh, 'data')
  return jax.jit(step, donate_argnums=0,
                 in_shardings=(state_sharding, replicated, replicated, batch, batch,
                               replicated),
                 out_shardings=(state_sharding, replicated))


def make_log_prob_step(lm, order: int, mesh, params_sharding=None, num_models: int = 1):
  """The jitted exact log p of each position's target given its window: [B], or [K, B]."""

  def log_probs(params, padded_split, positions):
    context, targets = batching.windows(padded_split, positions, order)
    return lm.apply(lm.variables_of(params), context, targets, method=lm.log_prob)

  step = log_probs if num_models == 1 else jax.vmap(log_probs, in_axes=(0, None, None))
  replicated = parallel.sharding(mesh)
  return jax.jit(step, in_shardings=(params_sharding or replicated, replicated,
                                     parallel.sharding(mesh, 'data')),
                 out_shardings=replicated)


def split_log_probs(log_prob_step, params, padded_split, num_tokens: int, batch_size: int,
                    mesh, progress: str = '') -> np.ndarray:
  """log p(w_t | its n-1 previous words) for every token of a split, in order (float64):
  [N], or [K, N] for K models. `progress` names the pass in progress lines (nplm.display)."""
  batches = show_progress(batching.eval_batches(num_tokens, batch_size),
                          batching.num_batches(num_tokens, batch_size), progress, 'batch')
  pieces, masks = [], []
  for positions, mask in batches:
    pieces.append(parallel.wait_on_cpu_devices(log_prob_step(params, padded_split,
                                                parallel.put(positions, mesh, 'data'))))
    masks.append(mask)
    stop_requests.pace(pieces)  # A few batches queued at most; a stop request ends the pass.
  return np.concatenate([parallel.fetch(log_p)[..., mask > 0]
                         for log_p, mask in zip(pieces, masks)], axis=-1).astype(np.float64)


class WindowFeed:
  """What the loop needs for feed-forward models: states, batches, steps, exact log-probs."""

  recurrent = False

  def __init__(self, config, lm, splits: dict, boundary_id: int, mesh=None,
               num_models: int = 1):
    mesh = mesh or parallel.make_mesh()
    parallel.check_divides('--batch_size', config.batch_size, mesh)
    parallel.check_divides('--eval_batch_size', config.eval_batch_size, mesh)
    if num_models > 1 and lm.vocab_parallel:
      raise ConfigError('models trained together keep their output rows whole: use a mesh '
                        'with data only (e.g. --mesh=data:8)')
    self.config, self.lm, self.mesh, self.num_models = config, lm, mesh, num_models
    self.splits = {name: parallel.put(batching.pad_split(ids, config.order, boundary_id), mesh)
                   for name, ids in splits.items()}
    self.sizes = {name: len(ids) for name, ids in splits.items()}
    self.stride = config.order - 1 if lm.trains_every_position else 1
    windows = len(batching.strided_positions(self.sizes['train'], self.stride))
    self.steps_per_epoch = batching.num_batches(windows, config.batch_size)
    # One optimizer for every state it creates: K models' states join as one tree.
    self.tables = tables_read(lm, config)
    self.tx = optimizer.make_optimizer(config, self.tables)

  def create_state(self, rng):
    """One model's initial state, laid out over the mesh; the steps are compiled for that
    layout (K models together: replicated, stacked)."""
    state, sharding = parallel.create_state(
        lambda rng: init_state(self.config, self.lm, rng, self.tx), rng, self.mesh,
        self.lm.vocab_parallel)
    if self.num_models > 1:
      sharding = jax.tree.map(lambda _: parallel.sharding(self.mesh), sharding)
    self.train_step = make_train_step(self.lm, self.config, self.mesh, sharding,
                                      self.num_models)
    self.log_prob_step = make_log_prob_step(self.lm, self.config.order, self.mesh,
                                            sharding.params, self.num_models)
    settle = optimizer.pay_decay_debts if self.num_models == 1 else jax.vmap(optimizer.pay_decay_debts)
    self.pay_decay_debts = (jax.jit(settle, donate_argnums=0, out_shardings=sharding) if self.tables
                   else lambda state: state)
    return state

  def start_epoch(self, state, epoch: int, start: int):
    """The state to continue with and the epoch's batches from batch `start` on, each
    (arguments of the step, examples in it: the targets its loss covers)."""
    batches = batching.train_batches(self.sizes['train'], self.config.batch_size,
                                     self.config.batch_order_seed, epoch, start, self.stride)
    return state, (((positions, mask), int(mask.sum()) * self.stride)
                   for positions, mask in batches)

  def step(self, state, batch, run_rng, hyperparameters=None):
    """(state, loss) after one update: K stacked states and K losses for K models, each
    with its own `hyperparameters` (nplm.training.optimizer.hyperparameters_of; default: the
    config's)."""
    hyperparameters = hyperparameters or optimizer.hyperparameters_of([self.config],
                                                                      self.steps_per_epoch)
    positions, mask = (parallel.put(array, self.mesh, 'data') for array in batch)
    return parallel.wait_on_cpu_devices(self.train_step(state, hyperparameters, self.splits['train'],
                                           positions, mask, run_rng))

  def log_probs(self, params, split: str, progress: str = '') -> np.ndarray:
    """Exact log p of every token of the split, in order: [N], or [K, N] for K models."""
    return split_log_probs(self.log_prob_step, params, self.splits[split], self.sizes[split],
                           self.config.eval_batch_size, self.mesh, progress)

  def evaluate(self, params, split: str) -> dict:
    """Exact perplexity exp(Σ NLL / Σ tokens) over every token of the split (one model)."""
    return perplexity(-np.sum(self.log_probs(params, split)), self.sizes[split])
