"""The optimizer: the paper's SGD with weight decay and a decaying learning rate, or AdamW;
gradient clipping before either.

Its per-model hyperparameters (Config fields of the 'per-model hyperparameter' group but the
seed) enter the train step as arrays, so that models trained together each trace their own
values through one compiled step, and a lone run is the same step with one model's values.
"""

import functools

import jax
import jax.numpy as jnp
import optax

from nplm.config import HYPERPARAMETERS, Config


def _decay_mask(params):
  """True for the weights and the features C, False for biases: the paper decays no bias."""
  return jax.tree_util.tree_map_with_path(lambda path, _: path[-1].key != 'bias', params)


def learning_rate_at(config: Config, t):
  """ε_t = ε0 / (1 + r·t), the rate of update t + 1 (t updates before it) (Bengio et al.
  2003, section 5)."""
  return config.learning_rate / (1.0 + config.lr_decay * t)


def make_optimizer(config: Config, **hyperparameters) -> optax.GradientTransformation:
  """The config's optimizer; `hyperparameters` (HYPERPARAMETERS) may replace its
  values with traced arrays."""
  config = config.replace(**hyperparameters)
  learning_rate = functools.partial(learning_rate_at, config)
  if config.optimizer == 'sgd':  # θ ← θ - ε_t (∇ + λ θ): the paper's update with decay.
    update = optax.chain(optax.add_decayed_weights(config.weight_decay, _decay_mask),
                         optax.sgd(learning_rate))
  else:
    update = optax.adamw(learning_rate, weight_decay=config.weight_decay, mask=_decay_mask)
  if config.clip_norm:  # ∇ ← ∇ · min(1, c / ‖∇‖): exploding gradients (Pascanu et al. 2013).
    return optax.chain(optax.clip_by_global_norm(config.clip_norm), update)
  return update


def hyperparameters_of(configs: list[Config]) -> dict:
  """The per-model hyperparameters as float32 arrays: scalars for one model, [K] for K."""
  values = {name: jnp.asarray([getattr(c, name) for c in configs], jnp.float32)
            for name in HYPERPARAMETERS}
  return values if len(configs) > 1 else {name: value[0] for name, value in values.items()}


def apply_gradients(config: Config, state, grads, hyperparameters: dict):
  """The state after one update with this model's `hyperparameters` (traced values)."""
  tx = make_optimizer(config, **hyperparameters)
  return state.replace(tx=tx).apply_gradients(grads=grads).replace(tx=state.tx)
