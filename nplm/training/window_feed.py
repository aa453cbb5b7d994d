"""Feed-forward models on n-gram windows: their batches, update and exact log-probs.

A split lives on the device once, left-padded with n-1 boundary tokens (nplm.data.batching);
an update sends B positions and the step gathers their windows. Every epoch visits every
training window once, in a shuffle derived from (seed, epoch). A model that trains every
position of its window (the Transformer) reads non-overlapping windows instead, every
(n-1)-th position: each training token is then one of its targets once per epoch.

K models of one shape may be trained together (nplm.training.feed): small models leave an
accelerator mostly idle; K of them in one step do not.

Data-parallel (nplm.parallel): the split is replicated, each update's B positions are split
over the mesh's 'data' axis, and one model's parameters live as `state_shardings` says
(replicated, or output rows split over 'model'); jit sums the gradients across the devices.
"""

import jax
import jax.numpy as jnp

from nplm import parallel, sparse_rows
from nplm.data import batching
from nplm.lm import in_compute_dtype
from nplm.training import optimizer
from nplm.training.feed import Feed, masked_mean


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
                                                           optimizer.row_debts(config, state))
  return loss, grads, rows


class WindowFeed(Feed):
  """Feed-forward models on n-gram windows of a padded split kept on the devices."""

  batch_layout = (None, 'data', 'data')  # The padded split; positions, mask.
  per_update = (False, True, True)
  chooses_updates_per_call = True
  scoring_layout = (None, 'data')  # The padded split; positions.

  @classmethod
  def example_span(cls, config) -> tuple[str, int, str]:
    return '--order', config.order, f'reads windows of {config.order:,} tokens'

  @classmethod
  def epoch_examples(cls, config, lm, train: int) -> tuple[str, int, int, str, int]:
    """n-gram windows (a model that trains every position: one every n-1 positions)."""
    stride = config.order - 1 if lm.trains_every_position else 1
    windows = batching.strided_count(train, stride)
    batch = config.batch_size
    return f'--batch_size={batch:,} windows', batch, windows, 'window', windows

  @classmethod
  def data_words(cls, config, split_sizes: dict, data: int) -> int:
    """Each split padded by n-1 boundary tokens and to its scored length, whole on every
    device."""
    del data
    return sum(batching.scored_length(n + config.order - 1) for n in split_sizes.values())

  @classmethod
  def example(cls, config, lm) -> tuple:
    return jnp.zeros((1, config.order - 1), jnp.int32), jnp.zeros(1, jnp.int32)

  def placed(self, ids):
    length = batching.scored_length(len(ids) + self.config.order - 1)
    return parallel.put(batching.pad_split(ids, self.config.order, self.boundary_id, length),
                        self.mesh)

  def prepare_training(self, ids) -> int:
    self.stride = self.config.order - 1 if self.lm.trains_every_position else 1
    windows = batching.strided_count(len(ids), self.stride)
    return batching.num_batches(windows, self.config.batch_size)

  def start_epoch(self, state, epoch: int, start: int):
    """The state to continue with and the epoch's batches from batch `start` on, each
    (positions, mask; examples in it: the targets its loss covers)."""
    batches = batching.train_batches(self.sizes['train'], self.config.batch_size,
                                     self.config.batch_order_seed, epoch, start, self.stride)
    return state, (((positions, mask), int(mask.sum()) * self.stride)
                   for positions, mask in batches)

  def step_data(self, batch) -> tuple:
    return (self.splits['train'], *(parallel.step_input(array, self.mesh, 'data') for array in batch))

  def update(self, state, padded_split, positions, mask, run_rng):
    config = self.config
    context, targets = batching.windows(padded_split, positions, config.order)
    rng = jax.random.fold_in(run_rng, state.step)  # Each update's samples from its number.
    loss, grads, rows = loss_and_grads(self.lm, config, state, context, targets, mask, rng)
    return optimizer.apply_gradients(config, state, grads, rows), loss

  def score(self, params, padded_split, positions):
    """The exact log p of each position's target given its window: [B]."""
    context, targets = batching.windows(padded_split, positions, self.config.order)
    return self.lm.apply(self.lm.variables_of(params), context, targets,
                         method=self.lm.log_prob)
