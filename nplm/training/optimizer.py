"""The optimizer: the paper's SGD with weight decay and a decaying learning rate, AdamW, or
lazy Adam; gradient clipping before any.

SGD and lazy Adam are row-sparse (nplm.sparse_rows): the tables a step reads by word (C, the
sampled and tree heads' output rows) are updated only in the rows it read, their decay paid
lazily and exactly; every other parameter gets the dense update. SGD's results are the dense
SGD's; lazy Adam moves a row's moments only when the row is read. AdamW is dense throughout.

Its per-model hyperparameters (Config fields of the 'per-model hyperparameter' group but the
seed) enter the train step as arrays, so that models trained together each trace their own
values through one compiled step, and a lone run is the same step with one model's values.
"""

import functools

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import traverse_util

from nplm import sparse_rows
from nplm.config import HYPERPARAMETERS, Config

OPTIMIZERS = ('sgd', 'adamw', 'lazy_adam')  # --optimizer
ROW_SPARSE = ('sgd', 'lazy_adam')
LR_SCHEDULES = ('inverse', 'linear')  # --lr_schedule (learning_rate_at)


def config_errors(config: Config) -> list[str]:
  """What in the optimizer's knobs cannot work (Config.validate asks)."""
  checks = [
      (config.clip_norm >= 0, f'--clip_norm must be 0 (none) or more, got {config.clip_norm}'),
      (config.optimizer in OPTIMIZERS,
       f'unknown --optimizer={config.optimizer!r}; known: {", ".join(sorted(OPTIMIZERS))}'),
      (not (config.optimizer == 'lazy_adam' and config.tie_embeddings),
       '--optimizer=lazy_adam updates the rows a step reads, but with --tie_embeddings the '
       'softmax reads every row of C: use --optimizer=adamw'),
      (config.learning_rate > 0,
       f'--learning_rate must be positive, got {config.learning_rate}'),
      (config.lr_decay >= 0, f'--lr_decay must be 0 or more, got {config.lr_decay}'),
      (config.lr_schedule in LR_SCHEDULES,
       f'unknown --lr_schedule={config.lr_schedule!r}; known: {", ".join(LR_SCHEDULES)}'),
      (config.lr_schedule != 'linear' or config.lr_decay == 0,
       '--lr_decay is the inverse schedule\'s r; --lr_schedule=linear decays by itself: '
       'leave --lr_decay out'),
      (0 <= config.min_learning_rate <= config.learning_rate,
       f'--min_learning_rate must be within [0, --learning_rate], got '
       f'{config.min_learning_rate}'),
      (config.lr_schedule == 'linear' or config.min_learning_rate == 0,
       '--min_learning_rate is where --lr_schedule=linear ends: leave it out of the '
       f'{config.lr_schedule} schedule'),
      (config.weight_decay >= 0, f'--weight_decay must be 0 or more, got {config.weight_decay}'),
  ]
  return [message for ok, message in checks if not ok]


class RowSparseState(NamedTuple):
  """The state of a row-sparse optimizer."""
  dense: optax.OptState  # The dense update's, of every parameter but the tables.
  tables: dict  # Per table (nested as the parameters): sparse_rows.init_table_state.
  log_decay: jnp.ndarray  # L_t as (hi, lo): the log of the decay since step 0.


def _decay_mask(params):
  """True for the weights and the features C, False for biases: the paper decays no bias."""
  return jax.tree_util.tree_map_with_path(lambda path, _: path[-1].key != 'bias', params)


def planned_updates(config: Config, steps_per_epoch: int) -> int:
  """T, the updates the run plans: --epochs passes of `steps_per_epoch` (the feed's)."""
  return config.epochs * steps_per_epoch


def learning_rate_at(config: Config, t, planned=None):
  """ε_t, the rate of update t + 1 (t updates before it). --lr_schedule=inverse: ε0 / (1 + r·t)
  (Bengio et al. 2003, section 5); linear: from ε0 down to ε_min (--min_learning_rate) over
  the T `planned` updates, never below ε0·1e-4, as word2vec decays it (Mikolov et al. 2013a,
  section 4.3; gensim's min_alpha is ε_min, the floor is the word2vec tool's)."""
  if config.lr_schedule == 'linear':
    if planned is None:
      raise ValueError('the linear schedule needs T: hyperparameters_of(configs, '
                       'steps_per_epoch)')
    start, end = config.learning_rate, config.min_learning_rate
    return jnp.maximum(end + (start - end) * (1.0 - t / planned), start * 1e-4)
  return config.learning_rate / (1.0 + config.lr_decay * t)


def reads_rows(config: Config) -> bool:
  """Whether the train step takes row gradients of the tables: a row-sparse optimizer, and
  no tied embeddings (the softmax reads every row of a tied C)."""
  return config.optimizer in ROW_SPARSE and not config.tie_embeddings


def _dense_update(config: Config, tables=(), planned=None) -> optax.GradientTransformation:
  """The update of every parameter but the tables (those are sparse_rows')."""
  learning_rate = functools.partial(learning_rate_at, config, planned=planned)
  if config.optimizer == 'sgd':  # θ ← θ - ε_t (∇ + λ θ): the paper's update with decay.
    update = optax.chain(optax.add_decayed_weights(config.weight_decay, _decay_mask),
                         optax.sgd(learning_rate))
  else:
    update = optax.adamw(learning_rate, weight_decay=config.weight_decay, mask=_decay_mask)
  if not tables:
    return update
  return optax.masked(update, lambda params: jax.tree_util.tree_map_with_path(
      lambda path, _: _path_of(path) not in tables, params))


def _path_of(key_path) -> tuple:
  return tuple(entry.key for entry in key_path)


def make_optimizer(config: Config, tables=(), planned_steps=None,
                   **hyperparameters) -> optax.GradientTransformation:
  """The config's optimizer; `tables` are the paths of the parameters the step reads by row
  (sparse_rows.tables_read; row-sparse optimizers only); `hyperparameters`
  (HYPERPARAMETERS) may replace the config's values with traced arrays; `planned_steps` is
  the linear schedule's T."""
  config = config.replace(**hyperparameters)
  if config.optimizer not in ROW_SPARSE:
    update = _dense_update(config, planned=planned_steps)
    if config.clip_norm:  # ∇ ← ∇ · min(1, c / ‖∇‖): exploding gradients (Pascanu et al. 2013).
      return optax.chain(optax.clip_by_global_norm(config.clip_norm), update)
    return update
  dense = _dense_update(config, tables)

  def init(params):
    flat = traverse_util.flatten_dict(params)
    table_states = {path: sparse_rows.init_table_state(flat[path],
                                                       config.optimizer == 'lazy_adam')
                    for path in tables}
    return RowSparseState(dense.init(params), traverse_util.unflatten_dict(table_states),
                          jnp.zeros(2, jnp.float32))

  # A TrainState holds its optimizer's state through a tx (TrainState.create calls its init),
  # but optax's update(grads, state, params) cannot take the row gradients this update
  # needs: TrainState.apply_gradients, which calls it, is refused and the real one named.
  def refuse_dense_update(updates, state, params=None):
    del updates, state, params
    raise TypeError(f'--optimizer={config.optimizer} updates the rows a step read: call '
                    'nplm.training.optimizer.apply_gradients(config, state, grads, '
                    'hyperparameters, rows), not TrainState.apply_gradients')

  return optax.GradientTransformation(init, refuse_dense_update)


def hyperparameters_of(configs: list[Config], steps_per_epoch: int = 0) -> dict:
  """The per-model hyperparameters as float32 arrays: scalars for one model, [K] for K; with
  the feed's `steps_per_epoch`, also 'planned_steps' (T of the linear schedule)."""
  values = {name: jnp.asarray([getattr(c, name) for c in configs], jnp.float32)
            for name in HYPERPARAMETERS}
  if steps_per_epoch:
    values['planned_steps'] = jnp.asarray(
        [planned_updates(c, steps_per_epoch) for c in configs], jnp.float32)
  return values if len(configs) > 1 else {name: value[0] for name, value in values.items()}


def apply_gradients(config: Config, state, grads, hyperparameters: dict, rows=None):
  """The state after one update with this model's `hyperparameters` (traced values); `rows`
  (sparse_rows.value_and_row_grads) holds the tables' row gradients for a row-sparse one."""
  if config.optimizer not in ROW_SPARSE:
    tx = make_optimizer(config, **hyperparameters)
    return state.replace(tx=tx).apply_gradients(grads=grads).replace(tx=state.tx)
  hyperparameters = dict(hyperparameters)
  planned = hyperparameters.pop('planned_steps', None)
  config, rows = config.replace(**hyperparameters), rows or {}
  flat_params = traverse_util.flatten_dict(state.params)
  rows = {path: (ids, g.astype(flat_params[path].dtype)) for path, (ids, g) in rows.items()}
  summed = {path: sparse_rows.summed_by_row(ids, g, flat_params[path].shape[0])
            for path, (ids, g) in rows.items()}
  if config.clip_norm:  # The norm of the whole gradient: dense parts and summed rows.
    dense_grads = [g for path, g in traverse_util.flatten_dict(grads).items()
                   if path not in rows]
    norm = optax.tree.norm(dense_grads + [g for _, g in summed.values()])
    scale = jnp.minimum(1.0, config.clip_norm / jnp.maximum(norm, 1e-30))
    grads = jax.tree.map(lambda g: g * scale, grads)
    rows = {path: (ids, g * scale) for path, (ids, g) in rows.items()}
  opt = state.opt_state
  updates, dense_state = _dense_update(config, tuple(rows), planned).update(grads, opt.dense,
                                                                             state.params)
  flat_updates = traverse_util.flatten_dict(updates)
  learning_rate = learning_rate_at(config, state.step, planned)
  new_params, table_states = {}, traverse_util.flatten_dict(opt.tables, is_leaf=_is_table)
  for path, value in flat_params.items():
    if path not in rows:
      new_params[path] = value + flat_updates[path]
      continue
    ids, g = rows[path]
    new_params[path], table_states[path] = sparse_rows.update_table(
        value, table_states[path], ids, g, learning_rate=learning_rate,
        weight_decay=None if path[-1] == 'bias' else config.weight_decay,
        log_decay=opt.log_decay, count=state.step + 1, adam=config.optimizer == 'lazy_adam')
  log_decay = sparse_rows.compensated_add(
      opt.log_decay, jnp.log1p(-learning_rate * config.weight_decay))
  return state.replace(step=state.step + 1, params=traverse_util.unflatten_dict(new_params),
                       opt_state=RowSparseState(dense_state,
                                                traverse_util.unflatten_dict(table_states),
                                                log_decay))


def row_debts(state) -> dict:
  """What the step needs to read the decayed tables' rows with their decay paid
  (sparse_rows.take_rows): per table, its marks and L."""
  opt = state.opt_state
  tables = traverse_util.flatten_dict(opt.tables, is_leaf=_is_table)
  return traverse_util.unflatten_dict({
      path: {'marks': table['marks'], 'log_decay': opt.log_decay}
      for path, table in tables.items() if path[-1] != 'bias'})


def _is_table(_, value) -> bool:
  return isinstance(value, dict) and 'marks' in value


def pay_decay_debts(state):
  """The state with every table row's owed decay paid (sparse_rows): its parameters are then
  the dense optimizer's, to evaluate or save. Any other state as it is."""
  opt = state.opt_state
  if not isinstance(opt, RowSparseState):
    return state
  params = traverse_util.flatten_dict(state.params)
  tables = traverse_util.flatten_dict(opt.tables, is_leaf=_is_table)
  for path in tables:
    if path[-1] != 'bias':  # The paper decays no bias (_decay_mask).
      params[path], tables[path] = sparse_rows.settle_table(params[path], tables[path],
                                                            opt.log_decay)
  return state.replace(params=traverse_util.unflatten_dict(params),
                       opt_state=opt._replace(tables=traverse_util.unflatten_dict(tables)))
