"""Recurrent models by truncated BPTT: the state, the jitted steps, exact evaluation.

The training split is cut into B contiguous streams (nplm.data.streams) kept on the device;
update s reads segment s, [B, T] words, starting from the state the previous segment ended
in. That state enters the step as a constant, so gradients stop at the segment's start
(truncation), and it is part of the train state: checkpoints keep it and a resumed run goes
on exactly. It is reset to h_0 = 0 at the start of every epoch.

Evaluation reads a split as one stream in order, T' = --eval_batch_size words at a time,
carrying the state across the whole split: every word is scored once, given all the words
before it in the split, by the head's exact log_prob.

Data-parallel (nplm.parallel): the B training streams and their carried states are split
over the mesh's 'data' axis. Evaluation's one stream is sequential: every data device reads
all of it, and only the head's output rows are split (over 'model').
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax.training import train_state

from nplm import parallel, stop_requests
from nplm.training import optimizer
from nplm.training import sparse_rows
from nplm.training import window_feed
from nplm.data import streams
from nplm.lm import COMPUTE_DTYPES, in_compute_dtype
from nplm.perplexity import perplexity
from nplm.display import progress as show_progress


class RecurrentTrainState(train_state.TrainState):
  carry: jnp.ndarray  # The recurrent state after the last segment trained on.


BATCH_AXES = {'carry': 2}  # The carry [layers, parts, B, H] is split over 'data' by stream.


def tables_read(config, lm) -> tuple:
  """The parameters the train step reads by row (nplm.training.sparse_rows), if it does."""
  if not optimizer.reads_rows(config):
    return ()
  words, key = jnp.zeros((1, 1), jnp.int32), jax.random.key(0)
  return sparse_rows.tables_read(lambda: lm.init(
      key, words, words, lm.model.initial_state(1), key, method=lm.loss))


def init_state(config, lm, rng, tx) -> RecurrentTrainState:
  """The initial state on the default device (StreamFeed.create_state lays it out): the
  parameters, the optimizer's state and h_0 = 0 for each of the --batch_size streams."""
  words = jnp.zeros((1, 1), jnp.int32)
  params = lm.init(rng, words, words, lm.model.initial_state(1), method=lm.log_prob)['params']
  return RecurrentTrainState.create(apply_fn=lm.apply, params=lm.stored_params(params), tx=tx,
                                    carry=lm.model.initial_state(config.batch_size))


def abstract_state(config, lm) -> RecurrentTrainState:
  """The initial state as shapes and dtypes only: `jax.eval_shape` traces the
  initialization and allocates nothing (nplm.training.memory)."""
  tx = optimizer.make_optimizer(config, tables_read(config, lm))
  return jax.eval_shape(lambda rng: init_state(config, lm, rng, tx), jax.random.key(0))


def _segment(array, index, length: int):
  return jax.lax.dynamic_slice_in_dim(array, index * length, length, axis=1)


def make_train_step(lm, config, mesh, state_sharding):
  """The jitted update on segment `index` of the streams (state donated)."""
  segment_length = config.bptt_length

  def train_step(state, hyperparameters, words, targets, mask, index, run_rng):
    words, targets, mask = (_segment(a, index, segment_length) for a in (words, targets, mask))
    head_rng, dropout_rng = jax.random.split(jax.random.fold_in(run_rng, state.step))

    def apply_loss(variables, mutable=False):
      variables = {**variables, 'params': in_compute_dtype(variables['params'], config.dtype)}
      carry_in = state.carry.astype(COMPUTE_DTYPES[config.dtype])
      (losses, carry), mutated = lm.apply(variables, words, targets, carry_in, head_rng,
                                          rngs={'dropout': dropout_rng}, method=lm.loss,
                                          mutable=mutable or [])
      carry = carry.astype(state.carry.dtype)  # Carried in float32 under any --dtype.
      return (window_feed.masked_mean(losses, mask), carry), mutated

    if optimizer.reads_rows(config):
      (loss, carry), grads, rows = sparse_rows.value_and_row_grads(
          apply_loss, state.params, optimizer.row_debts(state))
    else:
      (loss, carry), grads = jax.value_and_grad(
          lambda params: apply_loss(lm.variables_of(params))[0], has_aux=True)(state.params)
      rows = None
    state = optimizer.apply_gradients(config, state, grads, hyperparameters, rows)
    return state.replace(carry=carry), loss

  replicated, streams_sharding = parallel.sharding(mesh), parallel.sharding(mesh, 'data')
  return jax.jit(train_step, donate_argnums=0,
                 in_shardings=(state_sharding, replicated, *[streams_sharding] * 3, replicated,
                               replicated),
                 out_shardings=(state_sharding, replicated))


def make_log_prob_step(lm, segment_length: int, mesh):
  """The jitted exact log p of segment `index`'s targets, and the state after it (all
  replicated: one stream)."""

  def log_prob_step(params, words, targets, index, carry):
    words, targets = _segment(words, index, segment_length), _segment(targets, index,
                                                                      segment_length)
    return lm.apply(lm.variables_of(params), words, targets, carry, method=lm.log_prob)

  return jax.jit(log_prob_step, out_shardings=parallel.sharding(mesh))


def split_log_probs(lm, params, ids: np.ndarray, boundary_id: int, segment_length: int,
                    log_prob_step=None, mesh=None, progress: str = '') -> np.ndarray:
  """log p(w_t | w_0 … w_{t-1}) for every token of a split, in order (float64): one stream
  from h_0 = 0, the state carried across every segment. `progress` names the pass in
  progress lines (nplm.display)."""
  mesh = mesh or parallel.make_mesh()
  log_prob_step = log_prob_step or make_log_prob_step(lm, segment_length, mesh)
  words, targets, mask = streams.streams(ids, 1, segment_length, boundary_id)
  words, targets = parallel.put(words, mesh), parallel.put(targets, mesh)
  carry = parallel.put(lm.model.initial_state(1), mesh)
  pieces = []
  segments = streams.num_segments(len(ids), 1, segment_length)
  for index in show_progress(range(segments), segments, progress, 'segment'):
    log_p, carry = parallel.wait_on_cpu_devices(log_prob_step(params, words, targets, index, carry))
    pieces.append(log_p)
    stop_requests.pace(pieces)  # A few segments queued at most; a stop request ends the pass.
  return np.concatenate([parallel.fetch(p) for p in pieces], axis=1)[mask > 0].astype(np.float64)


class StreamFeed:
  """What the loop needs for a recurrent model: its state, segments, step, exact log-probs."""

  recurrent = True

  def __init__(self, config, lm, splits: dict, boundary_id: int, mesh=None,
               num_models: int = 1):
    if num_models > 1:  # nplm.training.run_checks.check_together refuses it first, by name.
      raise ValueError('a StreamFeed trains one model')
    mesh = mesh or parallel.make_mesh()
    parallel.check_divides('--batch_size', config.batch_size, mesh)
    self.config, self.lm, self.boundary_id, self.mesh = config, lm, boundary_id, mesh
    self.splits, self.num_models = splits, 1
    num_streams, length = config.batch_size, config.bptt_length
    words, targets, mask = streams.streams(splits['train'], num_streams, length, boundary_id)
    self.train_arrays = tuple(parallel.put(a, mesh, 'data') for a in (words, targets, mask))
    self.steps_per_epoch = streams.num_segments(len(splits['train']), num_streams, length)
    self.tokens_per_segment = mask.reshape(num_streams, self.steps_per_epoch, length).sum(
        axis=(0, 2)).astype(int)
    self.log_prob_step = make_log_prob_step(lm, config.eval_batch_size, mesh)

  def initial_carry(self):
    """h_0 = 0 for every stream, split over 'data' like the streams."""
    return parallel.put(self.lm.model.initial_state(self.config.batch_size), self.mesh,
                        None, None, 'data')

  def create_state(self, rng):
    """The initial state, laid out over the mesh; the step is compiled for that layout."""
    tables = tables_read(self.config, self.lm)
    tx = optimizer.make_optimizer(self.config, tables)
    state, sharding = parallel.create_state(lambda rng: init_state(self.config, self.lm, rng, tx),
                                            rng, self.mesh, self.lm.vocab_parallel,
                                            batch_axes=BATCH_AXES)
    self.train_step = make_train_step(self.lm, self.config, self.mesh, sharding)
    self.pay_decay_debts = (jax.jit(optimizer.pay_decay_debts, donate_argnums=0, out_shardings=sharding)
                   if tables else lambda state: state)
    return state

  def start_epoch(self, state, epoch: int, start: int):
    """The state to continue with (reset to h_0 = 0 at an epoch's start) and the epoch's
    segments from `start` on, each (arguments of the step, tokens in it)."""
    del epoch  # Every epoch reads the streams in the same order.
    if start == 0:
      state = state.replace(carry=self.initial_carry())
    return state, (((index,), int(self.tokens_per_segment[index]))
                   for index in range(start, self.steps_per_epoch))

  def step(self, state, batch, run_rng, hyperparameters=None):
    """(state, loss) after the update on segment `batch`, with `hyperparameters`
    (nplm.training.optimizer.hyperparameters_of; default: the config's)."""
    (index,) = batch
    hyperparameters = hyperparameters or optimizer.hyperparameters_of([self.config],
                                                                      self.steps_per_epoch)
    return parallel.wait_on_cpu_devices(self.train_step(state, hyperparameters, *self.train_arrays, index,
                                           run_rng))

  def log_probs(self, params, split: str, progress: str = '') -> np.ndarray:
    """Exact log p of every token of the split, in order (float64) [N]."""
    return split_log_probs(self.lm, params, self.splits[split], self.boundary_id,
                           self.config.eval_batch_size, self.log_prob_step, self.mesh,
                           progress)

  def evaluate(self, params, split: str) -> dict:
    """Exact perplexity exp(Σ NLL / Σ tokens) over every token of the split."""
    return perplexity(-np.sum(self.log_probs(params, split)), len(self.splits[split]))
