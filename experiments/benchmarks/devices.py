r"""Train-step examples/s against device count: data-parallel and vocabulary-parallel.

  python -m experiments.benchmarks.devices --out=DIR/devices
  JAX_NUM_CPU_DEVICES=8 python -m experiments.benchmarks.devices   # simulated: correctness only

For each device count n (1, 2, 4, … up to every device) it times the trainer's own jitted
step on a mesh over the first n devices, in one run:
- data: `--mesh=data:n` with the global batch n × --per_device_batch (weak scaling; the ideal
  is n times the one-device rate, and efficiency = rate / (n × that rate));
- model: `--mesh=model:n` with the global batch --per_device_batch (the output rows split n
  ways; the ideal is again n times the one-device rate).
Simulated CPU devices share the host's cores, so their figures show that the layouts run,
not how they scale; scaling needs real accelerators.
"""

import sys

import jax
import numpy as np
from absl import flags

from experiments.benchmarks import harness
from nplm import parallel
from nplm.cli import run_experiment
from nplm.data import batching

MODES = ('data', 'model')


def device_counts(limit: int) -> list[int]:
  """1, 2, 4, … up to `limit`, and `limit` itself."""
  counts = [1]
  while counts[-1] * 2 <= limit:
    counts.append(counts[-1] * 2)
  return counts if counts[-1] == limit else counts + [limit]


def time_mesh(mode: str, n: int, shape: dict, train_ids, counts, boundary_id,
              per_device_batch: int, steps: int, repeats: int) -> dict:
  """examples/s of the train step on `--mesh=<mode>:n` over the first n devices."""
  batch_size = per_device_batch * n if mode == 'data' else per_device_batch
  config = harness.shape_config(shape, batch_size)
  mesh = parallel.make_mesh(f'{mode}:{n}', devices=jax.devices()[:n])
  padded = batching.pad_split(np.asarray(train_ids), config.order, boundary_id)
  run_steps, _ = harness.jax_runner(config, counts, padded, mesh)
  batches = harness.benchmark_batches(len(train_ids), batch_size, steps)
  return {'mode': mode, 'devices': n, 'batch_size': batch_size,
          **harness.examples_per_second(run_steps, batches, repeats)}


def run_benchmark(train_ids, counts, boundary_id, shape_name='MLP9', per_device_batch=256,
                  steps=20, repeats=5, modes=MODES, max_devices=None) -> dict:
  """Every mode at every device count, with speed-ups over its one-device rate."""
  shape = harness.SHAPES[shape_name]
  rows = []
  for mode in modes:
    for n in device_counts(max_devices or jax.device_count()):
      row = time_mesh(mode, n, shape, train_ids, counts, boundary_id, per_device_batch,
                      steps, repeats)
      one = next(r for r in rows + [row] if r['mode'] == mode and r['devices'] == 1)
      row['speedup'] = row['median'] / one['median']
      row['efficiency'] = row['speedup'] / n
      rows.append(row)
  return {'machine': harness.machine_info(), 'vocab_size': len(counts), 'shape': shape_name,
          'settings': {'per_device_batch': per_device_batch, 'steps': steps,
                       'repeats': repeats},
          'rows': rows}


def format_report(report: dict, markdown: bool = False) -> str:
  m, s = report['machine'], report['settings']
  lines = [harness.machine_line(m),
           f'{report["shape"]}, |V| = {report["vocab_size"]}, {s["per_device_batch"]} examples '
           f'per device (data) or per update (model), median of {s["repeats"]} runs of '
           f'{s["steps"]} steps.', '']
  rows = [['mesh', 'devices', 'global batch', 'examples/s median [min–max]', 'speed-up',
           'efficiency']]
  for r in report['rows']:
    rows.append([f'{r["mode"]}:{r["devices"]}', str(r['devices']), str(r['batch_size']),
                 f'{r["median"]:,.0f} [{r["min"]:,.0f}–{r["max"]:,.0f}]',
                 f'{r["speedup"]:.2f}×', f'{r["efficiency"]:.0%}'])
  lines += harness.table_lines(rows, markdown)
  lines += ['', 'speed-up: examples/s over the same mode on one device; efficiency: '
            'speed-up ÷ devices.']
  if m['backend'] == 'cpu' and jax.device_count() > 1:
    lines.append('Simulated CPU devices share the host cores: these rates prove the layouts '
                 'run, not how they scale.')
  return '\n'.join(lines) + '\n'


def define_flags() -> None:
  harness.define_common_flags(steps=20, shape=True)
  flags.DEFINE_integer('per_device_batch', 256, 'Examples per device (data) or per update '
                       '(model).')
  flags.DEFINE_list('modes', list(MODES), 'Mesh axes to scale: data, model.')


def main(argv):
  FLAGS = flags.FLAGS
  unknown = set(FLAGS.modes) - set(MODES)
  if unknown:
    print(f'error: unknown --modes {sorted(unknown)}; known: {", ".join(MODES)}', file=sys.stderr)
    sys.exit(2)
  train_ids, counts, boundary_id = harness.training_ids_or_exit(argv)
  report = run_benchmark(train_ids, counts, boundary_id, FLAGS.shape, FLAGS.per_device_batch,
                         FLAGS.steps, FLAGS.repeats, FLAGS.modes)
  harness.report(report, format_report, FLAGS.out)


if __name__ == '__main__':
  define_flags()
  run_experiment(main)
