"""Row-sparse gradients and updates of the tables a step reads by word: the features C and
the rows of the sampled and tree heads' output layers.

"Most parameters need not be updated or accessed after each example: the features C(j) of
all words j that do not occur in the input window" (Bengio et al. 2003, section 3). A dense
gradient of C is |V| rows of which n-1 per example are non-zero, and a dense optimizer reads
and writes all |V| of them every step: the step's cost grows with |V| though its work does not.

Here a module reads a table through `take_rows`. When a train step asks for row gradients
(the ROW_IDS collection is mutable), the rows are gathered from the table with its gradient
stopped, plus a zero perturbation (flax's `perturb`) whose gradient is the gradient of each
gathered row; the ids are sown beside it. The optimizer (nplm.training.optimizer) then sums the
gradients of repeated ids and updates those rows only. Evaluation reads the tables as usual.

Weight decay on a table stays exact although untouched rows are not written: row r touched
last at step a and next at step b owes the factor Π_{a<s<b} (1 - ε_s λ). The running sum
L_t = Σ_{s<t} log(1 - ε_s λ) is kept in two float32s (a compensated sum), each row keeps L at
its last update (its mark), and the owed factor is exp(L_b - mark). A step reads its rows
with their debt paid, and `pay_decay_debts` pays every row's: the parameters are then exactly those
of the dense update.
"""

from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import traverse_util

ROW_IDS = 'row_ids'
PERTURBATIONS = 'perturbations'
ROW_DEBTS = 'row_debts'  # Per decayed table: {'marks', 'log_decay'}, to read rows decayed.
ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8  # optax.adamw's defaults, as the dense AdamW.


def take_rows(module: nn.Module, name: str, table: jnp.ndarray, ids: jnp.ndarray):
  """table[ids] for the parameter `name` of `module`; its gradient per gathered row when the
  step collects row gradients. A module takes each table at most once per call."""
  if not module.is_mutable_collection(ROW_IDS):
    return jnp.take(table, ids, axis=0)
  module.sow(ROW_IDS, name, ids, init_fn=lambda: None,
             reduce_fn=lambda _, new: new)
  if module.is_initializing():  # Initialization only finds which tables are read by row.
    return jnp.take(table, ids, axis=0)
  rows = jnp.take(jax.lax.stop_gradient(table), ids, axis=0)
  if module.has_variable(ROW_DEBTS, name):  # Read as the dense update would hold them.
    debt = module.get_variable(ROW_DEBTS, name)
    owed = owed_decay(debt['log_decay'], jnp.take(debt['marks'], ids, axis=0))
    rows = (rows * owed.reshape(*ids.shape, *[1] * (table.ndim - 1))).astype(rows.dtype)
  return module.perturb(name, rows, collection=PERTURBATIONS)


class Embed(nn.Embed):
  """flax's Embed (same parameter, 'embedding'), its lookups through `take_rows`."""

  def __call__(self, inputs: jnp.ndarray) -> jnp.ndarray:
    return take_rows(self, 'embedding', self.embedding, inputs)


def value_and_row_grads(apply_loss: Callable, params, row_debts: dict):
  """((loss, aux), dense grads, rows) of `apply_loss(variables, mutable) -> ((loss, aux),
  mutated)`; rows maps each table's path in `params` to (ids [N], row gradients [N, ...]).
  `row_debts` (nplm.training.optimizer.row_debts) lets the rows be read with their decay paid."""
  def loss_of(params, perturbations):
    (loss, aux), mutated = apply_loss({'params': params, PERTURBATIONS: perturbations,
                                       ROW_DEBTS: row_debts}, mutable=[ROW_IDS])
    return loss, (aux, mutated[ROW_IDS])

  shapes = jax.eval_shape(lambda: apply_loss({'params': params, ROW_DEBTS: row_debts},
                                             mutable=[ROW_IDS, PERTURBATIONS])[1])
  zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes.get(PERTURBATIONS, {}))
  (loss, (aux, row_ids)), (grads, row_grads) = jax.value_and_grad(
      loss_of, argnums=(0, 1), has_aux=True)(params, zeros)
  ids, row_grads = traverse_util.flatten_dict(row_ids), traverse_util.flatten_dict(row_grads)
  return (loss, aux), grads, {
      path: (ids[path].reshape(-1),
             row_grads[path].reshape(-1, *row_grads[path].shape[ids[path].ndim:]))
      for path in ids}


def tables_read(init_loss: Callable) -> tuple:
  """The paths of the tables `init_loss()` (a module's init through its loss) reads by row."""
  variables = jax.eval_shape(init_loss)
  return tuple(sorted(traverse_util.flatten_dict(variables.get(ROW_IDS, {}))))


def summed_by_row(ids: jnp.ndarray, grads: jnp.ndarray, num_rows: int):
  """(distinct ids padded with num_rows, which no row has; the summed gradient of each)."""
  unique, inverse = jnp.unique(ids, size=ids.shape[0], fill_value=num_rows,
                               return_inverse=True)
  return unique, jax.ops.segment_sum(grads, inverse.reshape(-1), num_segments=ids.shape[0])


# --- lazy weight decay -----------------------------------------------------------------

def compensated_add(total: jnp.ndarray, x) -> jnp.ndarray:
  """(hi, lo) + x as a float32 pair: the rounding error of hi + x (Knuth's TwoSum) joins lo,
  and the pair is renormalized (Dekker's Fast2Sum), so lo stays below hi's last bit."""
  hi, lo = total[..., 0], total[..., 1]
  s = hi + x
  back = s - hi
  error = (hi - (s - back)) + (x - back) + lo
  new_hi = s + error
  return jnp.stack([new_hi, error - (new_hi - s)], axis=-1)


def owed_decay(log_decay: jnp.ndarray, marks: jnp.ndarray) -> jnp.ndarray:
  """exp(L - mark) per row: the decay of the steps since each row was last updated."""
  return jnp.exp((log_decay[0] - marks[..., 0]) + (log_decay[1] - marks[..., 1]))


def init_table_state(table: jnp.ndarray, adam: bool) -> dict:
  """Per-row optimizer state of a table: 'marks' [rows, 2] (L at each row's last update),
  and Adam's moments 'mu' and 'nu' for lazy Adam."""
  state = {'marks': jnp.zeros((table.shape[0], 2), jnp.float32)}
  if adam:
    state.update(mu=jnp.zeros_like(table), nu=jnp.zeros_like(table))
  return state


def update_table(table, state: dict, ids, grads, *, learning_rate, weight_decay, log_decay,
                 count, adam: bool):
  """(table, state) after one update of the rows in `ids` (repeats summed), the others
  untouched: SGD θ ← θ(1 - ελ) - ε g, or lazy Adam (AdamW's update, per row, its moments
  moving only when the row is read: as TensorFlow's LazyAdam and PyTorch's SparseAdam),
  each row first paying the decay it owes (weight_decay None: a table never decayed, as
  biases). `count` (t ≥ 1) corrects Adam's bias."""
  rows, g = summed_by_row(ids, grads, table.shape[0])
  theta = table.at[rows].get(mode='fill', fill_value=0)
  state = dict(state)
  if weight_decay is not None:
    marks = state['marks'].at[rows].get(mode='fill', fill_value=0)
    theta = theta * (owed_decay(log_decay, marks) * (1.0 - learning_rate * weight_decay)
                     ).reshape(-1, *[1] * (theta.ndim - 1))
  if adam:
    b1, b2, eps = ADAM_BETAS + (ADAM_EPS,)
    mu = b1 * state['mu'].at[rows].get(mode='fill', fill_value=0) + (1 - b1) * g
    nu = b2 * state['nu'].at[rows].get(mode='fill', fill_value=0) + (1 - b2) * g * g
    state['mu'] = state['mu'].at[rows].set(mu, mode='drop')
    state['nu'] = state['nu'].at[rows].set(nu, mode='drop')
    g = (mu / (1 - b1 ** count)) / (jnp.sqrt(nu / (1 - b2 ** count)) + eps)
  theta = theta - learning_rate * g
  if weight_decay is not None:
    next_log_decay = compensated_add(log_decay, jnp.log1p(-learning_rate * weight_decay))
    # The new marks are written as a function of the updated rows (a NaN row keeps its old
    # mark; any other takes the new one) so that XLA orders every read of the marks, this
    # step's forward pass included, before this write and makes it in place. A scatter
    # whose values read nothing of what came before gets two whole copies of the marks per
    # step, and the step's cost grows with |V| again.
    state['marks'] = state['marks'].at[rows].set(
        jnp.where(jnp.isnan(theta.reshape(theta.shape[0], -1)[:, :1]), marks, next_log_decay),
        mode='drop')
  return table.at[rows].set(theta.astype(table.dtype), mode='drop'), state


def settle_table(table: jnp.ndarray, state: dict, log_decay: jnp.ndarray):
  """(table, state) with every row's owed decay applied: the dense optimizer's values."""
  factor = owed_decay(log_decay, state['marks']).reshape(-1, *[1] * (table.ndim - 1))
  marks = jnp.broadcast_to(log_decay, state['marks'].shape)
  return (table * factor).astype(table.dtype), {**state, 'marks': marks}
