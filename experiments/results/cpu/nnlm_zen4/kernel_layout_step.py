"""The trainer's MLP9 step (batch 256) with the output rows as stored ([|V|, D], `main`) or
stored as a Dense kernel [D, |V|] (`kernel`: OutputLayer patched here, the full softmax's
path only), median ms of 7 blocks of 20 updates. Run alternately, one process each:

  for r in 1 2 3 4 5; do for v in main kernel; do
    PYTHONPATH=. python experiments/results/cpu/nnlm_zen4/kernel_layout_step.py $v; done; done
"""
import sys
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from experiments.benchmarks import harness
from nplm import parallel
from nplm.data import batching
from nplm.heads import output_layer
from nplm.lm import build_language_model
from nplm.training import optimizer
from nplm.training.window_feed import WindowFeed

layout = sys.argv[1]
if layout == 'kernel':
  def setup(self):
    init = nn.initializers.lecun_normal(in_axis=0, out_axis=1)
    self.kernel = self.param('kernel', init, (self.input_width, self.units))
    self.bias = self.param('bias', nn.initializers.zeros_init(), (self.units,))

  def scores(self, hidden):
    return (hidden @ self.kernel + self.bias).astype(jnp.float32)

  output_layer.OutputLayer.setup, output_layer.OutputLayer.__call__ = setup, scores

ids, counts, boundary = harness.load_training_ids('.tfds')
config = harness.shape_config(harness.SHAPES['MLP9'], 256)
mesh = parallel.make_mesh()
lm = build_language_model(config, counts, mesh)
feed = WindowFeed(config, lm, {}, boundary_id=None, mesh=mesh)
state = feed.create_state(jax.random.key(config.seed))
values = optimizer.hyperparameters_of(config, len(ids) // 256)
state = optimizer.with_hyperparameters(state, {name: parallel.put(value, mesh)
                                               for name, value in values.items()})
padded = parallel.put(batching.pad_split(np.asarray(ids), config.order, boundary), mesh)
mask, rng = jnp.ones(256, jnp.float32), jax.random.key(1)
positions = [jnp.asarray(np.random.default_rng(i).integers(0, len(ids), 256), jnp.int32)
             for i in range(20)]
state, loss = feed.train_step(state, padded, positions[0], mask, rng)
jax.block_until_ready(loss)
blocks = []
for _ in range(7):
  started = time.perf_counter()
  for batch in positions:
    state, loss = feed.train_step(state, padded, batch, mask, rng)
  jax.block_until_ready((state.params, loss))
  blocks.append((time.perf_counter() - started) / len(positions))
print(layout, 'MLP9 median ms', round(1e3 * float(np.median(blocks)), 2), 'loss', float(loss))
