"""Train states as an older nplm saved them, restored into today's layout.

Until issue 44 a checkpoint's optimizer state was the optimizer's own (optax's, or the
row-sparse RowSparseState); since, optax.inject_hyperparams wraps it and holds the per-step
hyperparameters beside it (nplm.training.optimizer). A checkpoint of the older layout is
restored into the inner state and wrapped; its hyperparameters are NaN, unknown, until the
trainer sets them from the run's config and progress record, as it does on every resume
(nplm.training.loop), so that a state read but never given them cannot train unnoticed.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax


def restore_target(saved, abstract_state):
  """(the target that a checkpoint whose arrays' metadata is `saved` is restored into, the
  function that turns the restored state into `abstract_state`'s layout)."""
  opt = abstract_state.opt_state
  if not isinstance(opt, optax.InjectStatefulHyperparamsState) or 'hyperparams' in saved.get(
      'opt_state', {}):
    return abstract_state, lambda state: state

  def wrapped(state):
    unknown = {name: _filled(leaf, np.nan) for name, leaf in opt.hyperparams.items()}
    count = jnp.copy(state.step)  # Its own buffer: a train step donates both.
    return state.replace(opt_state=opt._replace(count=count, hyperparams=unknown,
                                                hyperparams_states={},
                                                inner_state=state.opt_state))

  return abstract_state.replace(opt_state=opt.inner_state), wrapped


def _filled(leaf: jax.ShapeDtypeStruct, value) -> jax.Array:
  """An array of `leaf`'s shape, dtype and sharding holding `value` (each process places its
  own devices' pieces)."""
  host = np.full(leaf.shape, value, leaf.dtype)
  return jax.make_array_from_callback(leaf.shape, leaf.sharding, lambda index: host[index])
