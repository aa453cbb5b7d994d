"""Feed-forward models on n-gram windows: the state, the jitted steps, exact evaluation.

A split lives on the device once, left-padded with n-1 `</text>` (nplm.data.batching); an
update sends B positions and the step gathers their windows. Every epoch visits every
training window once, in a shuffle derived from (seed, epoch).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax.training import train_state

from nplm.data import batching


def create_state(config, lm, rng, tx) -> train_state.TrainState:
  context, target = jnp.zeros((1, config.order - 1), jnp.int32), jnp.zeros(1, jnp.int32)
  # Through log_prob, which every head computes from all its parameters: the heads' full
  # log_probs can be slow op by op (the tree walks its levels).
  params = lm.init(rng, context, target, method=lm.log_prob)['params']
  return train_state.TrainState.create(apply_fn=lm.apply, params=lm.stored_params(params),
                                       tx=tx)


def make_steps(lm, order: int):
  """The jitted train step (state donated) and the eval step (a sum of exact NLLs)."""

  def train_step(state, padded_split, positions, mask, run_rng):
    context, targets = batching.windows(padded_split, positions, order)
    rng = jax.random.fold_in(run_rng, state.step)  # Each update's samples from its number.

    def mean_loss(params):
      losses = lm.apply(lm.variables_of(params), context, targets, rng, method=lm.loss)
      return jnp.sum(jnp.where(mask > 0, losses, 0.0)) / jnp.maximum(jnp.sum(mask), 1.0)

    loss, grads = jax.value_and_grad(mean_loss)(state.params)
    return state.apply_gradients(grads=grads), loss

  def eval_step(params, padded_split, positions, mask):
    context, targets = batching.windows(padded_split, positions, order)
    log_p = lm.apply(lm.variables_of(params), context, targets, method=lm.log_prob)
    return -jnp.sum(jnp.where(mask > 0, log_p, 0.0))

  return jax.jit(train_step, donate_argnums=0), jax.jit(eval_step)


def evaluate(eval_step, params, padded_split, num_tokens: int, batch_size: int) -> dict:
  """Exact perplexity exp(Σ NLL / Σ tokens) over every token of the split."""
  sums = [eval_step(params, padded_split, positions, mask)
          for positions, mask in batching.eval_batches(num_tokens, batch_size)]
  nll = float(np.sum(np.asarray(jax.device_get(sums), np.float64)))
  return {'nll': nll, 'tokens': num_tokens, 'ppl': math.exp(nll / num_tokens)}


class WindowFeed:
  """What the loop needs for a feed-forward model: its state, batches, step and evaluation."""

  def __init__(self, config, lm, splits: dict, boundary_id: int):
    self.config, self.lm = config, lm
    self.splits = {name: jnp.asarray(batching.pad_split(ids, config.order, boundary_id))
                   for name, ids in splits.items()}
    self.sizes = {name: len(ids) for name, ids in splits.items()}
    self.train_step, self.eval_step = make_steps(lm, config.order)
    self.steps_per_epoch = batching.num_batches(self.sizes['train'], config.batch_size)

  def create_state(self, rng, tx):
    return create_state(self.config, self.lm, rng, tx)

  def start_epoch(self, state, epoch: int, start: int):
    """The state to continue with and the epoch's batches from batch `start` on, each
    (arguments of the step, examples in it)."""
    batches = batching.train_batches(self.sizes['train'], self.config.batch_size,
                                     self.config.seed, epoch, start)
    return state, (((positions, mask), int(mask.sum())) for positions, mask in batches)

  def step(self, state, batch, run_rng):
    positions, mask = batch
    return self.train_step(state, self.splits['train'], positions, mask, run_rng)

  def evaluate(self, params, split: str) -> dict:
    return evaluate(self.eval_step, params, self.splits[split], self.sizes[split],
                    self.config.eval_batch_size)
