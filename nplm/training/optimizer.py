"""The optimizer: the paper's SGD with weight decay and a decaying learning rate, AdamW, or
lazy Adam; gradient clipping before any.

SGD and lazy Adam are row-sparse (nplm.sparse_rows): the tables a step reads by word (C, the
sampled and tree heads' output rows) are updated only in the rows it read, their decay paid
lazily and exactly; every other parameter gets the dense update. SGD's results are the dense
SGD's; lazy Adam moves a row's moments only when the row is read. AdamW is dense throughout.

Its per-step hyperparameters (the float knobs of the 'per-model hyperparameter' group, and
the schedule's inputs: T, the steps per epoch, the plateau factor) are part of the optimizer
state (optax.inject_hyperparams): a step reads its rates from the state it updates, so that
models trained together, their states stacked, each trace their own values through one
compiled step, and a checkpoint holds the values its step ran with.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
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
# The per-model knobs that the optimizer state holds (hyperparameters_of): the rates, the decay.
HYPERPARAMETERS = tuple(name for name, knob in {**schedules.KNOBS, **KNOBS}.items()
                        if knob.group == PER_MODEL and isinstance(knob.default, float))
ROW_SPARSE = ('sgd', 'lazy_adam')


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


def reads_rows(config: Config) -> bool:
  """Whether the train step takes row gradients of the tables: a row-sparse optimizer, and
  no tied embeddings (the softmax reads every row of a tied C)."""
  return config.optimizer in ROW_SPARSE and not config.tie_embeddings


def _dense_update(config: Config, hyperparameters: dict,
                  tables=()) -> optax.GradientTransformation:
  """The update of every parameter but the tables (those are sparse_rows'), with the state's
  `hyperparameters` (traced)."""
  learning_rate = functools.partial(schedules.learning_rate_at, config,
                                    hyperparameters=hyperparameters)
  weight_decay, mask = hyperparameters['weight_decay'], decay_mask(config)
  if config.optimizer == 'sgd':  # θ ← θ - ε_t (∇ + λ θ): the paper's update with decay.
    update = optax.chain(optax.add_decayed_weights(weight_decay, mask),
                         optax.sgd(learning_rate))
  else:
    update = optax.adamw(learning_rate, weight_decay=weight_decay, mask=mask)
  if not tables:
    return update
  return optax.masked(update, lambda params: jax.tree_util.tree_map_with_path(
      lambda path, _: _path_of(path) not in tables, params))


def _path_of(key_path) -> tuple:
  return tuple(entry.key for entry in key_path)


def hyperparameters_of(config: Config, steps_per_epoch: int | None = None,
                       lr_scale: float = 1.0) -> dict:
  """One model's per-step hyperparameters as its optimizer state holds them (float32): its
  HYPERPARAMETERS; with the feed's `steps_per_epoch`, the schedule's T ('planned') and the
  steps per epoch (NaN without: a state that is not trained, whose rate is never read);
  `lr_scale`, the plateau factor so far (its progress record's)."""
  unknown = steps_per_epoch is None
  values = {name: getattr(config, name) for name in HYPERPARAMETERS}
  values.update(lr_scale=lr_scale,
                planned=np.nan if unknown else planned_updates(config, steps_per_epoch),
                steps_per_epoch=np.nan if unknown else steps_per_epoch)
  return {name: np.asarray(value, np.float32) for name, value in values.items()}


def make_optimizer(config: Config, tables=(), steps_per_epoch: int | None = None
                   ) -> optax.GradientTransformation:
  """The config's optimizer, its state holding the hyperparameters (hyperparameters_of)
  that every update reads; `tables` are the paths of the parameters the step reads by row
  (sparse_rows.tables_read; row-sparse optimizers only)."""

  # inject_hyperparams builds the update from the state's values at every step.
  def update(learning_rate, min_learning_rate, lr_decay, weight_decay, lr_scale, planned,
             steps_per_epoch):
    hyperparameters = dict(locals())  # Its arguments: hyperparameters_of's names.
    if config.optimizer in ROW_SPARSE:
      return _row_sparse(config, tables, _dense_update(config, hyperparameters, tables))
    dense = _dense_update(config, hyperparameters)
    if config.clip_norm:  # ∇ ← ∇ · min(1, c / ‖∇‖): exploding gradients (Pascanu et al. 2013).
      return optax.chain(optax.clip_by_global_norm(config.clip_norm), dense)
    return dense

  return optax.inject_hyperparams(update, hyperparam_dtype=jnp.float32)(
      **hyperparameters_of(config, steps_per_epoch))


def _row_sparse(config: Config, tables, dense) -> optax.GradientTransformation:
  """A row-sparse optimizer's state (RowSparseState) and its refusal of a dense update."""

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
                    'nplm.training.optimizer.apply_gradients(config, state, grads, rows), '
                    'not TrainState.apply_gradients')

  return optax.GradientTransformation(init, refuse_dense_update)


def hyperparameters(state) -> dict:
  """The hyperparameters a train state's next update reads (make_optimizer)."""
  return state.opt_state.hyperparams


def with_hyperparameters(state, values: dict):
  """The state with these hyperparameters (hyperparameters_of's names; each a scalar, or
  [K] for K stacked states) for its next updates."""
  return state.replace(opt_state=state.opt_state._replace(hyperparams=dict(values)))


def apply_gradients(config: Config, state, grads, rows=None):
  """The state after one update with the hyperparameters its optimizer state holds; `rows`
  (sparse_rows.value_and_row_grads) holds the tables' row gradients for a row-sparse one."""
  if config.optimizer not in ROW_SPARSE:
    return state.apply_gradients(grads=grads)
  values, rows = hyperparameters(state), rows or {}
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
  injected = state.opt_state
  opt = injected.inner_state
  updates, dense_state = _dense_update(config, values, tuple(rows)).update(
      grads, opt.dense, state.params)
  flat_updates = traverse_util.flatten_dict(updates)
  learning_rate = schedules.learning_rate_at(config, state.step, values)
  weight_decay = values['weight_decay']
  new_params, table_states = {}, traverse_util.flatten_dict(opt.tables, is_leaf=_is_table)
  for path, value in flat_params.items():
    if path not in rows:
      new_params[path] = value + flat_updates[path]
      continue
    ids, g = rows[path]
    new_params[path], table_states[path] = sparse_rows.update_table(
        value, table_states[path], ids, g, learning_rate=learning_rate,
        weight_decay=weight_decay if decayed(config, path) else None,
        log_decay=opt.log_decay, count=state.step + 1, adam=config.optimizer == 'lazy_adam')
  log_decay = sparse_rows.compensated_add(
      opt.log_decay, jnp.log1p(-learning_rate * weight_decay))
  inner = RowSparseState(dense_state, traverse_util.unflatten_dict(table_states), log_decay)
  return state.replace(step=state.step + 1, params=traverse_util.unflatten_dict(new_params),
                       opt_state=injected._replace(count=optax.safe_increment(injected.count),
                                                   inner_state=inner))


def row_debts(config: Config, state) -> dict:
  """What the step needs to read the decayed tables' rows with their decay paid
  (sparse_rows.take_rows): per table, its marks and L."""
  opt = state.opt_state.inner_state
  tables = traverse_util.flatten_dict(opt.tables, is_leaf=_is_table)
  return traverse_util.unflatten_dict({
      path: {'marks': table['marks'], 'log_decay': opt.log_decay}
      for path, table in tables.items() if decayed(config, path)})


def _is_table(_, value) -> bool:
  return isinstance(value, dict) and 'marks' in value


def pay_decay_debts(config: Config, state):
  """The state with every table row's owed decay paid (sparse_rows): its parameters are then
  the dense optimizer's, to evaluate or save. Any other state as it is."""
  opt = getattr(state.opt_state, 'inner_state', None)
  if not isinstance(opt, RowSparseState):
    return state
  params = traverse_util.flatten_dict(state.params)
  tables = traverse_util.flatten_dict(opt.tables, is_leaf=_is_table)
  for path in tables:
    if decayed(config, path):
      params[path], tables[path] = sparse_rows.settle_table(params[path], tables[path],
                                                            opt.log_decay)
  inner = opt._replace(tables=traverse_util.unflatten_dict(tables))
  return state.replace(params=traverse_util.unflatten_dict(params),
                       opt_state=state.opt_state._replace(inner_state=inner))
