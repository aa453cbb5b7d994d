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

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import traverse_util

from nplm import sparse_rows
from nplm.knobs import OPTIMIZER, PER_MODEL, Knob
from nplm.training import schedules

if TYPE_CHECKING:  # Config is assembled from this module's KNOBS, among others.
  from nplm.config import Config

OPTIMIZERS = ('sgd', 'adamw', 'lazy_adam')  # --optimizer
KNOBS = {
    'optimizer': Knob('adamw', 'sgd (the paper; updates only the rows of C and of sampled or '
                      'tree output layers a step reads, decay paid lazily), adamw (dense), or '
                      'lazy_adam (Adam per row: moments and rows of those tables move only '
                      'when read).', OPTIMIZER),
    'decay_embeddings': Knob(True, 'Weight decay on the embedding tables too (C, learned '
                             'positions; the paper decays C). Biases and normalization gains '
                             'and offsets are never decayed.', OPTIMIZER),
    'clip_norm': Knob(0.0, 'Clip the gradient to this global norm before the update (0 = no '
                      'clipping).', OPTIMIZER),
    'weight_decay': Knob(0.0, 'λ on the weights and (--decay_embeddings) the embedding tables, '
                         'never on biases or normalization parameters (paper: 1e-4 with SGD).',
                         PER_MODEL),
}
# The per-model knobs that enter the train step as traced arrays: the rates, the decay.
HYPERPARAMETERS = tuple(name for name, knob in {**schedules.KNOBS, **KNOBS}.items()
                        if knob.group == PER_MODEL and isinstance(knob.default, float))
ROW_SPARSE = ('sgd', 'lazy_adam')
# What the schedule reads beside the config (schedules.learning_rate_at), as traced values.
SCHEDULE_INPUTS = ('planned', 'steps_per_epoch', 'lr_scale')


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
      (config.weight_decay >= 0, f'--weight_decay must be 0 or more, got {config.weight_decay}'),
  ]
  return [message for ok, message in checks if not ok] + schedules.config_errors(config)


class RowSparseState(NamedTuple):
  """The state of a row-sparse optimizer."""
  dense: optax.OptState  # The dense update's, of every parameter but the tables.
  tables: dict  # Per table (nested as the parameters): sparse_rows.init_table_state.
  log_decay: jnp.ndarray  # L_t as (hi, lo): the log of the decay since step 0.


def decayed(config: Config, path: tuple) -> bool:
  """Whether weight decay applies to the parameter at `path` (its keys): the weights; never a
  bias (the paper decays none) or a normalization's gain ('scale') and offset (common practice
  since Loshchilov & Hutter 2019); the model's embedding tables (C, learned positions) as
  --decay_embeddings says."""
  if path[-1] in ('bias', 'scale'):
    return False
  embedding = path[0] == 'model' and path[-1] in ('embedding', 'positions')
  return config.decay_embeddings or not embedding


def decay_mask(config: Config):
  """optax's mask of the decayed parameters (`decayed`), a function of the parameter tree."""
  return lambda params: jax.tree_util.tree_map_with_path(
      lambda path, _: decayed(config, _path_of(path)), params)


def planned_updates(config: Config, steps_per_epoch: int) -> int:
  """T, the updates the run plans: --epochs passes of `steps_per_epoch` (the feed's)."""
  return config.epochs * steps_per_epoch


def learning_rate_at(config: Config, t, schedule_inputs: dict | None = None):
  """ε_t, the rate of update t + 1 (schedules.learning_rate_at), from the traced or host
  values of SCHEDULE_INPUTS (hyperparameters_of)."""
  return schedules.learning_rate_at(config, t, **(schedule_inputs or {}))


def reads_rows(config: Config) -> bool:
  """Whether the train step takes row gradients of the tables: a row-sparse optimizer, and
  no tied embeddings (the softmax reads every row of a tied C)."""
  return config.optimizer in ROW_SPARSE and not config.tie_embeddings


def _dense_update(config: Config, tables=(), schedule_inputs=None) -> optax.GradientTransformation:
  """The update of every parameter but the tables (those are sparse_rows')."""
  learning_rate = functools.partial(learning_rate_at, config, schedule_inputs=schedule_inputs)
  mask = decay_mask(config)
  if config.optimizer == 'sgd':  # θ ← θ - ε_t (∇ + λ θ): the paper's update with decay.
    update = optax.chain(optax.add_decayed_weights(config.weight_decay, mask),
                         optax.sgd(learning_rate))
  else:
    update = optax.adamw(learning_rate, weight_decay=config.weight_decay, mask=mask)
  if not tables:
    return update
  return optax.masked(update, lambda params: jax.tree_util.tree_map_with_path(
      lambda path, _: _path_of(path) not in tables, params))


def _path_of(key_path) -> tuple:
  return tuple(entry.key for entry in key_path)


def split_hyperparameters(hyperparameters: dict) -> tuple[dict, dict]:
  """(the config's values, the schedule's inputs) of hyperparameters_of's dict."""
  schedule_inputs = {name: value for name, value in hyperparameters.items()
                     if name in SCHEDULE_INPUTS}
  return ({name: value for name, value in hyperparameters.items()
           if name not in SCHEDULE_INPUTS}, schedule_inputs)


def make_optimizer(config: Config, tables=(), **hyperparameters) -> optax.GradientTransformation:
  """The config's optimizer; `tables` are the paths of the parameters the step reads by row
  (sparse_rows.tables_read; row-sparse optimizers only); `hyperparameters`
  (hyperparameters_of: HYPERPARAMETERS and SCHEDULE_INPUTS) may replace the config's values
  with traced arrays and give the schedule its inputs."""
  values, schedule_inputs = split_hyperparameters(hyperparameters)
  config = config.replace(**values)
  if config.optimizer not in ROW_SPARSE:
    update = _dense_update(config, schedule_inputs=schedule_inputs)
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


def hyperparameters_of(configs: list[Config], steps_per_epoch: int = 0,
                       lr_scales: list[float] | None = None) -> dict:
  """The per-model hyperparameters as float32 arrays: scalars for one model, [K] for K; with
  the feed's `steps_per_epoch`, also the schedule's T ('planned') and the steps per epoch;
  `lr_scales`: each model's plateau factor so far (its progress record's; default 1)."""
  values = {name: [getattr(c, name) for c in configs] for name in HYPERPARAMETERS}
  values['lr_scale'] = lr_scales or [1.0] * len(configs)
  if steps_per_epoch:
    values['planned'] = [planned_updates(c, steps_per_epoch) for c in configs]
    values['steps_per_epoch'] = [steps_per_epoch] * len(configs)
  values = {name: jnp.asarray(value, jnp.float32) for name, value in values.items()}
  return values if len(configs) > 1 else {name: value[0] for name, value in values.items()}


def apply_gradients(config: Config, state, grads, hyperparameters: dict, rows=None):
  """The state after one update with this model's `hyperparameters` (traced values); `rows`
  (sparse_rows.value_and_row_grads) holds the tables' row gradients for a row-sparse one."""
  if config.optimizer not in ROW_SPARSE:
    tx = make_optimizer(config, **hyperparameters)
    return state.replace(tx=tx).apply_gradients(grads=grads).replace(tx=state.tx)
  values, schedule_inputs = split_hyperparameters(hyperparameters)
  config, rows = config.replace(**values), rows or {}
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
  updates, dense_state = _dense_update(config, tuple(rows), schedule_inputs).update(
      grads, opt.dense, state.params)
  flat_updates = traverse_util.flatten_dict(updates)
  learning_rate = learning_rate_at(config, state.step, schedule_inputs)
  new_params, table_states = {}, traverse_util.flatten_dict(opt.tables, is_leaf=_is_table)
  for path, value in flat_params.items():
    if path not in rows:
      new_params[path] = value + flat_updates[path]
      continue
    ids, g = rows[path]
    new_params[path], table_states[path] = sparse_rows.update_table(
        value, table_states[path], ids, g, learning_rate=learning_rate,
        weight_decay=config.weight_decay if decayed(config, path) else None,
        log_decay=opt.log_decay, count=state.step + 1, adam=config.optimizer == 'lazy_adam')
  log_decay = sparse_rows.compensated_add(
      opt.log_decay, jnp.log1p(-learning_rate * config.weight_decay))
  return state.replace(step=state.step + 1, params=traverse_util.unflatten_dict(new_params),
                       opt_state=RowSparseState(dense_state,
                                                traverse_util.unflatten_dict(table_states),
                                                log_decay))


def row_debts(config: Config, state) -> dict:
  """What the step needs to read the decayed tables' rows with their decay paid
  (sparse_rows.take_rows): per table, its marks and L."""
  opt = state.opt_state
  tables = traverse_util.flatten_dict(opt.tables, is_leaf=_is_table)
  return traverse_util.unflatten_dict({
      path: {'marks': table['marks'], 'log_decay': opt.log_decay}
      for path, table in tables.items() if decayed(config, path)})


def _is_table(_, value) -> bool:
  return isinstance(value, dict) and 'marks' in value


def pay_decay_debts(config: Config, state):
  """The state with every table row's owed decay paid (sparse_rows): its parameters are then
  the dense optimizer's, to evaluate or save. Any other state as it is."""
  opt = state.opt_state
  if not isinstance(opt, RowSparseState):
    return state
  params = traverse_util.flatten_dict(state.params)
  tables = traverse_util.flatten_dict(opt.tables, is_leaf=_is_table)
  for path in tables:
    if decayed(config, path):
      params[path], tables[path] = sparse_rows.settle_table(params[path], tables[path],
                                                            opt.log_decay)
  return state.replace(params=traverse_util.unflatten_dict(params),
                       opt_state=opt._replace(tables=traverse_util.unflatten_dict(tables)))
