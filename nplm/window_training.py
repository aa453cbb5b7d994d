"""Feed-forward models on n-gram windows: the state, the jitted steps, exact evaluation.

A split lives on the device once, left-padded with n-1 `</text>` (nplm.data.batching); an
update sends B positions and the step gathers their windows. Every epoch visits every
training window once, in a shuffle derived from (seed, epoch).

Data-parallel (nplm.parallel): the split is replicated, each update's B positions are split
over the mesh's 'data' axis, and the parameters live as `state_shardings` says (replicated,
or output rows split over 'model'); jit sums the gradients across the devices.
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax.training import train_state

from nplm import parallel
from nplm.perplexity import perplexity
from nplm.data import batching


def create_state(config, lm, rng, tx) -> train_state.TrainState:
  context, target = jnp.zeros((1, config.order - 1), jnp.int32), jnp.zeros(1, jnp.int32)
  # Through log_prob, which every head computes from all its parameters: the heads' full
  # log_probs can be slow op by op (the tree walks its levels).
  params = lm.init(rng, context, target, method=lm.log_prob)['params']
  return train_state.TrainState.create(apply_fn=lm.apply, params=lm.stored_params(params),
                                       tx=tx)


def batch_loss(lm, params, context, targets, mask, rng):
  """The head's training loss averaged over the batch's real examples (mask 1)."""
  losses = lm.apply(lm.variables_of(params), context, targets, rng, method=lm.loss)
  return jnp.sum(jnp.where(mask > 0, losses, 0.0)) / jnp.maximum(jnp.sum(mask), 1.0)


def batch_nll(lm, params, context, targets, mask):
  """Σ -log P(w_t | context) over the batch's real examples, from the exact log-probs."""
  log_p = lm.apply(lm.variables_of(params), context, targets, method=lm.log_prob)
  return -jnp.sum(jnp.where(mask > 0, log_p, 0.0))


def make_steps(lm, order: int, mesh, state_sharding):
  """The jitted train step (state donated) and the eval step (a sum of exact NLLs)."""

  def train_step(state, padded_split, positions, mask, run_rng):
    context, targets = batching.windows(padded_split, positions, order)
    rng = jax.random.fold_in(run_rng, state.step)  # Each update's samples from its number.
    loss, grads = jax.value_and_grad(
        lambda params: batch_loss(lm, params, context, targets, mask, rng))(state.params)
    return state.apply_gradients(grads=grads), loss

  def eval_step(params, padded_split, positions, mask):
    context, targets = batching.windows(padded_split, positions, order)
    return batch_nll(lm, params, context, targets, mask)

  replicated, batch = parallel.sharding(mesh), parallel.sharding(mesh, 'data')
  return (jax.jit(train_step, donate_argnums=0,
                  in_shardings=(state_sharding, replicated, batch, batch, replicated),
                  out_shardings=(state_sharding, replicated)),
          jax.jit(eval_step, in_shardings=(state_sharding.params, replicated, batch, batch),
                  out_shardings=replicated))


def exact_nll(eval_step, params, padded_split, num_tokens: int, batch_size: int, mesh):
  """Σ NLL over every token of the split, in float64: a number, or one per model when the
  eval step scores several (nplm.vmapped_training)."""
  sums = [parallel.settle(eval_step(params, padded_split, parallel.put(positions, mesh, 'data'),
                                    parallel.put(mask, mesh, 'data')))
          for positions, mask in batching.eval_batches(num_tokens, batch_size)]
  return np.sum([parallel.fetch(s) for s in sums], axis=0, dtype=np.float64)


def evaluate(eval_step, params, padded_split, num_tokens: int, batch_size: int, mesh) -> dict:
  """Exact perplexity exp(Σ NLL / Σ tokens) over every token of the split."""
  return perplexity(exact_nll(eval_step, params, padded_split, num_tokens, batch_size, mesh),
                    num_tokens)


class WindowFeed:
  """What the loop needs for a feed-forward model: its state, batches, step and evaluation."""

  def __init__(self, config, lm, splits: dict, boundary_id: int, mesh=None):
    mesh = mesh or parallel.make_mesh()
    parallel.check_divides('--batch_size', config.batch_size, mesh)
    parallel.check_divides('--eval_batch_size', config.eval_batch_size, mesh)
    self.config, self.lm, self.mesh = config, lm, mesh
    self.splits = {name: parallel.put(batching.pad_split(ids, config.order, boundary_id), mesh)
                   for name, ids in splits.items()}
    self.sizes = {name: len(ids) for name, ids in splits.items()}
    self.steps_per_epoch = batching.num_batches(self.sizes['train'], config.batch_size)

  def create_state(self, rng, tx):
    """The initial state, laid out over the mesh; the steps are compiled for that layout."""
    state, sharding = parallel.create_state(
        lambda rng: create_state(self.config, self.lm, rng, tx), rng, self.mesh,
        self.lm.vocab_parallel)
    self.train_step, self.eval_step = make_steps(self.lm, self.config.order, self.mesh, sharding)
    return state

  def start_epoch(self, state, epoch: int, start: int):
    """The state to continue with and the epoch's batches from batch `start` on, each
    (arguments of the step, examples in it)."""
    batches = batching.train_batches(self.sizes['train'], self.config.batch_size,
                                     self.config.batch_order_seed, epoch, start)
    return state, (((positions, mask), int(mask.sum())) for positions, mask in batches)

  def step(self, state, batch, run_rng):
    positions, mask = (parallel.put(array, self.mesh, 'data') for array in batch)
    return parallel.settle(
        self.train_step(state, self.splits['train'], positions, mask, run_rng))

  def evaluate(self, params, split: str) -> dict:
    return evaluate(self.eval_step, params, self.splits[split], self.sizes[split],
                    self.config.eval_batch_size, self.mesh)
