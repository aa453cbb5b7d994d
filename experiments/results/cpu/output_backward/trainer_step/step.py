"""Time MLP9's trainer step; dump its optimized HLO."""
import os, sys, time, numpy as np
from nplm import host_memory
host_memory.keep_freed_blocks()
from experiments.benchmarks import harness
from nplm.data import batching
shape_name = sys.argv[1] if len(sys.argv) > 1 else 'MLP9'
train_ids, counts, boundary = harness.load_training_ids(os.environ.get('DATA_DIR', '/tmp/w2v/tfds'))
config = harness.shape_config(harness.SHAPES[shape_name], 256)
padded = batching.pad_split(np.asarray(train_ids), config.order, boundary)
batches = harness.benchmark_batches(len(train_ids), 256, 30, config.seed)
run, compiled = harness.jax_runner(config, counts, padded)
if len(sys.argv) > 2:
  open(sys.argv[2], 'w').write(compiled.as_text())
run(batches[:5])
times = []
for _ in range(7):
  t = time.perf_counter(); run(batches); times.append((time.perf_counter() - t) / len(batches) * 1e3)
print(shape_name, 'ms/step median %.2f min %.2f' % (np.median(times), min(times)), ['%.1f' % x for x in times])
