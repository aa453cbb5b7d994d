r"""Aggregate examples/s of K models trained together (one vmapped program) against the same
K models trained one after another, measured in one run.

  python -m experiments.benchmarks.vmapped --out=DIR/vmapped

For each K in --models (1, 4, 16): K models of one shape (--shape) that differ in seed and
learning rate, on the trainer's first --steps batches of the real Brown training split.
- together: the trainer's step for models trained together (nplm.training.loop) over the K
  stacked states, --steps updates;
- one by one: the trainer's own step (a WindowFeed's), --steps updates of each of the
  K models in turn, as K separate runs would take.
Aggregate examples/s = K × the examples of the batches ÷ seconds. Compilation is left out
(an untimed run first); each repeat times both ways back to back, and medians are reported.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from experiments.benchmarks import harness
from nplm import parallel
from nplm.cli import run_experiment
from nplm.data import batching
from nplm.lm import build_language_model
from nplm.training.optimizer import hyperparameters_of, with_hyperparameters
from nplm.training.window_feed import WindowFeed

LEARNING_RATES = (3e-4, 1e-3, 3e-3, 1e-2)


def model_configs(config, k: int):
  """K configs of one shape: seeds 0 … K-1, the learning rates in turn."""
  return [config.replace(seed=i, learning_rate=LEARNING_RATES[i % len(LEARNING_RATES)])
          for i in range(k)]


def together_runner(configs, counts, padded_split: np.ndarray, mesh):
  """run_steps(batches) over K stacked models, as nplm.training.loop trains models together."""
  lm = build_language_model(configs[0], counts, mesh)
  feed = WindowFeed(configs[0], lm, {}, boundary_id=None, mesh=mesh, num_models=len(configs))
  keys = [jax.random.split(jax.random.key(config.seed)) for config in configs]
  states = [with_hyperparameters(feed.create_state(init_rng), hyperparameters_of(config))
            for config, (init_rng, _) in zip(configs, keys)]

  def join(trees):  # One model is the lone step, as nplm.training.loop runs K = 1.
    return trees[0] if len(trees) == 1 else jax.tree.map(lambda *x: jnp.stack(x), *trees)

  run_rngs = join([run_rng for _, run_rng in keys])
  run_steps = harness.steps_runner(feed.train_step, join(states),
                                   parallel.put(padded_split, mesh), run_rngs)
  return lambda batches: np.atleast_1d(run_steps(batches))


def one_by_one_runner(configs, counts, padded_split: np.ndarray, mesh):
  """run_steps(batches) of the trainer's step, for each of the K models in turn."""
  runners = [harness.jax_runner(config, counts, padded_split, mesh)[0] for config in configs]
  return lambda batches: [run(batches) for run in runners]


def time_k(k: int, config, counts, padded_split, batches, repeats: int) -> dict:
  mesh = parallel.make_mesh()
  configs = model_configs(config, k)
  ways = {'together': together_runner(configs, counts, padded_split, mesh),
          'one_by_one': one_by_one_runner(configs, counts, padded_split, mesh)}
  for run in ways.values():
    run(batches)  # Compiles.
  seconds = {name: [] for name in ways}
  for _ in range(repeats):
    for name, run in ways.items():
      start = time.perf_counter()
      run(batches)
      seconds[name].append(time.perf_counter() - start)
  examples = k * float(sum(mask.sum() for _, mask in batches))
  row = {'models': k}
  for name, times in seconds.items():
    rates = [examples / s for s in times]
    row[name] = {'median': float(np.median(rates)), 'min': min(rates), 'max': max(rates),
                 'runs': rates}
  row['together_over_one_by_one'] = row['together']['median'] / row['one_by_one']['median']
  return row


def run_benchmark(train_ids, counts, boundary_id, shape_name='MLP9', batch_size=256,
                  steps=20, repeats=5, model_counts=(1, 4, 16), shape=None) -> dict:
  """Every K's rates; `shape` (Config fields) replaces harness.SHAPES[shape_name]."""
  config = harness.shape_config(shape or harness.SHAPES[shape_name], batch_size)
  padded = batching.pad_split(np.asarray(train_ids), config.order, boundary_id)
  batches = harness.benchmark_batches(len(train_ids), batch_size, steps)
  rows = [time_k(k, config, counts, padded, batches, repeats) for k in model_counts]
  one = next((r for r in rows if r['models'] == 1), None)
  for row in rows:  # The accelerator goal: 16 together at > 8× the rate of one model.
    row['together_over_one_model'] = (row['together']['median'] / one['one_by_one']['median']
                                      if one else None)
  return {'machine': harness.machine_info(), 'vocab_size': len(counts), 'shape': shape_name,
          'settings': {'batch_size': batch_size, 'steps': steps, 'repeats': repeats},
          'rows': rows}


def format_report(report: dict, markdown: bool = False) -> str:
  m, s = report['machine'], report['settings']
  lines = [harness.machine_line(m),
           f'{report["shape"]}, |V| = {report["vocab_size"]}, batch {s["batch_size"]} per model, '
           f'median of {s["repeats"]} runs of {s["steps"]} updates (aggregate examples/s).', '']
  rows = [['K models', 'together (vmapped) [min–max]', 'one by one [min–max]',
           'together ÷ one by one', 'together ÷ one model']]
  for r in report['rows']:
    t, o = r['together'], r['one_by_one']
    ratio = r['together_over_one_model']
    rows.append([str(r['models']), f'{t["median"]:,.0f} [{t["min"]:,.0f}–{t["max"]:,.0f}]',
                 f'{o["median"]:,.0f} [{o["min"]:,.0f}–{o["max"]:,.0f}]',
                 f'{r["together_over_one_by_one"]:.2f}×',
                 '' if ratio is None else f'{ratio:.2f}×'])
  lines += harness.table_lines(rows, markdown)
  lines += ['', 'together ÷ one model: the aggregate rate of K models in one program over '
            'the rate of one model trained alone (K = 1, one by one).']
  return '\n'.join(lines) + '\n'


def define_flags() -> None:
  harness.define_common_flags(steps=20, shape=True)
  flags.DEFINE_integer('batch_size', 256, 'Examples per update of each model.')
  flags.DEFINE_list('models', ['1', '4', '16'], 'The K to time.')


def main(argv):
  FLAGS = flags.FLAGS
  try:
    model_counts = [int(k) for k in FLAGS.models]
    if min(model_counts) < 1:
      raise ValueError
  except ValueError:
    raise app.UsageError(f'--models takes positive integers, got {",".join(FLAGS.models)}')
  train_ids, counts, boundary_id = harness.training_ids_or_exit(argv)
  report = run_benchmark(train_ids, counts, boundary_id, FLAGS.shape, FLAGS.batch_size,
                         FLAGS.steps, FLAGS.repeats, model_counts)
  harness.report(report, format_report, FLAGS.out)


if __name__ == '__main__':
  define_flags()
  run_experiment(main)
