"""The trainer's compiled step (state donated, 20 batches of 256) as this checkout builds it (A)
against the same step with the output layer patched by VARIANT.py's patch(output_layer) (B),
in one process, blocks of 20 updates alternated; the params the compiled step copies first.

  PYTHONPATH=. python experiments/results/cpu/bias_in_the_matmul/ab_step.py DATA_DIR MLP9 \
      experiments/results/cpu/bias_in_the_matmul/before_this_change.py 11
"""
import sys, time, importlib.util
import jax, jax.numpy as jnp, numpy as np
from experiments.benchmarks import harness
from nplm import parallel
from nplm.data import batching
from nplm.lm import build_language_model
from nplm.training import optimizer
from nplm.training.window_feed import WindowFeed
from nplm.heads import output_layer as ol
from absl import flags
data_dir, shape, variant_file = sys.argv[1:4]; blocks = int(sys.argv[4]) if len(sys.argv) > 4 else 11
harness.define_common_flags(steps=20, shape=True)
flags.FLAGS(['x', f'--data_dir={data_dir}'])
ids, counts, boundary = harness.training_ids_or_exit([])
config = harness.shape_config(harness.SHAPES[shape], 256)
mesh = parallel.make_mesh()
padded = parallel.put(batching.pad_split(np.asarray(ids), config.order, boundary), mesh)
rs = np.random.default_rng(0)
batches = [jnp.asarray(rs.integers(0, len(ids), 256), jnp.int32) for _ in range(20)]
mask = jnp.ones(256, jnp.float32); rng = jax.random.key(1)
def make():
  lm = build_language_model(config, counts, mesh)
  feed = WindowFeed(config, lm, {}, boundary_id=None, mesh=mesh)
  state = feed.create_state(jax.random.key(config.seed))
  values = optimizer.hyperparameters_of(config, len(ids) // 256)
  state = optimizer.with_hyperparameters(state, {n: parallel.put(v, mesh) for n, v in values.items()})
  for p in batches[:3]:
    state, loss = feed.train_step(state, padded, p, mask, rng)
  jax.block_until_ready(loss)
  return feed, [state]
runs = {'A': make()}
spec = importlib.util.spec_from_file_location('variant', variant_file)
variant = importlib.util.module_from_spec(spec); spec.loader.exec_module(variant)
variant.patch(ol)
runs['B'] = make()
for name, (feed, holder) in runs.items():
  txt = feed.train_step.lower(holder[0], padded, batches[0], mask, rng).compile().as_text()
  print(name, 'param copies:', [l.split('=')[0].strip() for l in txt.split('ENTRY')[1].splitlines() if 'copy(%state_params' in l])
times = {n: [] for n in runs}
for _ in range(blocks):
  for name, (feed, holder) in runs.items():
    state = holder[0]
    s = time.perf_counter()
    for p in batches: state, loss = feed.train_step(state, padded, p, mask, rng)
    jax.block_until_ready(loss); times[name].append((time.perf_counter() - s) / 20 * 1e3)
    holder[0] = state
for n, t in times.items(): print(f'{n} {np.median(t):.2f} ms  loss {float(loss):.4f}', ' '.join(f'{x:.1f}' for x in t))
a, b = np.array(times['A']), np.array(times['B'])
print(f'B - A per block: median {np.median(b - a):+.2f} ms; B faster in {np.sum(b < a)} of {len(a)}')
