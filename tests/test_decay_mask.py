"""Weight decay where it belongs: on weights (and, by --decay_embeddings, the embedding
tables), never on biases or LayerNorm's gains and offsets; for every model's parameter tree,
under AdamW's decoupled decay and under the row-sparse SGD's lazily paid one."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util
from flax.training import train_state

from nplm.config import Config
from nplm.lm import build_language_model
from nplm.training import optimizer
from nplm.training.families import feed_of
from nplm.training.config_checks import validated

pytestmark = pytest.mark.slow

COUNTS = np.arange(40, 0, -1)

# Per model: the config, and by hand the parameters that are weights and the embedding tables;
# everything else (biases, LayerNorm scales and offsets) is spared.
TREES = {
    'nnlm': (dict(model='nnlm', direct=True),
             {'model/H/kernel', 'head/output/embedding'}, {'model/C/embedding'}),
    'lstm_tied': (dict(model='lstm', num_layers=2, feature_size=12, hidden_size=12,
                       tie_embeddings=True),
                  {'model/layer0/input/kernel', 'model/layer0/recurrent',
                   'model/layer1/input/kernel', 'model/layer1/recurrent'},
                  {'model/C/embedding'}),
    'transformer': (dict(model='transformer', order=5, feature_size=8, hidden_size=16,
                         num_heads=2, positions='learned'),
                    {'model/block_0/attention/output/kernel', 'model/block_0/attention/qkv/kernel',
                     'model/block_0/ffn/hidden/kernel', 'model/block_0/ffn/output/kernel',
                     'head/output/embedding'},
                    {'model/C/embedding', 'model/positions'}),
    'class_head': (dict(model='nnlm', head='class'),
                   {'model/H/kernel', 'head/class_output/embedding', 'head/word_output/embedding'},
                   {'model/C/embedding'}),
}


def params_of(config: Config) -> dict:
  lm = build_language_model(config, COUNTS)
  return feed_of(lm.model).initial_params(config, lm, jax.random.key(0))


def flat(tree) -> dict:
  return {'/'.join(path): value for path, value in traverse_util.flatten_dict(tree).items()}


@pytest.mark.parametrize('name', sorted(TREES))
@pytest.mark.parametrize('decay_embeddings', [True, False])
def test_the_mask_names_the_weights_and_the_chosen_embeddings(name, decay_embeddings):
  changes, weights, embeddings = TREES[name]
  config = validated(Config(workdir='unused', weight_decay=0.1, decay_embeddings=decay_embeddings,
                  **changes))
  mask = flat(optimizer.decay_mask(config)(params_of(config)))
  want = weights | (embeddings if decay_embeddings else set())
  assert {path for path, decayed in mask.items() if decayed} == want
  assert any(path.endswith('scale') for path in mask) == (name == 'transformer')


@pytest.mark.parametrize('decay_embeddings', [True, False])
def test_adamw_with_zero_gradients_shrinks_exactly_the_masked_parameters(decay_embeddings):
  changes, weights, embeddings = TREES['transformer']
  config = validated(Config(workdir='unused', optimizer='adamw', learning_rate=0.1, weight_decay=0.5,
                  decay_embeddings=decay_embeddings, **changes))
  params = params_of(config)
  tx = optimizer.make_optimizer(config)
  updates, _ = tx.update(jax.tree.map(jnp.zeros_like, params), tx.init(params), params)
  decayed = weights | (embeddings if decay_embeddings else set())
  for path, update in flat(updates).items():
    value = np.asarray(flat(params)[path])
    want = -0.1 * 0.5 * value if path in decayed else np.zeros_like(value)
    np.testing.assert_allclose(np.asarray(update), want, rtol=1e-6, atol=1e-8, err_msg=path)


@pytest.mark.parametrize('decay_embeddings', [True, False])
def test_row_sparse_sgd_decays_C_only_when_embeddings_are_decayed(decay_embeddings):
  """Three updates with zero gradients, reading two rows of C: the dense SGD shrinks every
  row by (1 - ελ) per update when C is decayed, and leaves it when it is not."""
  config = validated(Config(workdir='unused', optimizer='sgd', learning_rate=0.1, weight_decay=0.2,
                  decay_embeddings=decay_embeddings))
  rng = np.random.default_rng(0)
  params = {'model': {'C': {'embedding': jnp.asarray(rng.normal(size=(6, 3)), jnp.float32)},
                      'H': {'kernel': jnp.asarray(rng.normal(size=(3, 2)), jnp.float32),
                            'bias': jnp.asarray(rng.normal(size=2), jnp.float32)}}}
  tables = (('model', 'C', 'embedding'),)
  state = train_state.TrainState.create(apply_fn=None, params=params,
                                        tx=optimizer.make_optimizer(config, tables))
  zeros = jax.tree.map(jnp.zeros_like, params)
  zero_rows = {tables[0]: (np.array([1, 4], np.int32), np.zeros((2, 3), np.float32))}
  for _ in range(3):
    state = optimizer.apply_gradients(config, state, zeros, zero_rows)
  settled = optimizer.pay_decay_debts(config, state).params
  shrink = (1 - 0.1 * 0.2) ** 3
  want_c = np.asarray(params['model']['C']['embedding']) * (shrink if decay_embeddings else 1)
  np.testing.assert_allclose(settled['model']['C']['embedding'], want_c, rtol=1e-5)
  np.testing.assert_allclose(settled['model']['H']['kernel'],
                             np.asarray(params['model']['H']['kernel']) * shrink, rtol=1e-5)
  np.testing.assert_allclose(settled['model']['H']['bias'], params['model']['H']['bias'])
  # The step reads C's rows with their decay paid only where C is decayed.
  assert ('C' in optimizer.row_debts(config, state).get('model', {})) == decay_embeddings
