r"""Train-step throughput of nplm on the Brown vocabulary: FLOPs, matmul share, PyTorch.

  python -m experiments.benchmark --data_dir=/tmp/nplm_tfds --out=runs/benchmark
  python -m experiments.benchmark --data_dir=/tmp/nplm_tfds --repeats=2 --steps=5  # a look

For the MLP1 and MLP9 shapes of Table 1 it times the real jitted `nplm.train` step on the
trainer's own batches (after an untimed compile, --repeats runs of --steps steps, each ended
by block_until_ready; median, min and max), counts the FLOPs of one step (XLA's cost analysis
and by hand), measures this machine's float32 matmul rate, and, when PyTorch is installed,
times the same model written plainly in PyTorch on the same batches.
"""

import itertools
import os
import platform
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from absl import logging as absl_logging

from nplm import parallel
from nplm.config import Config
from nplm.data import batching, load_corpus
from nplm.data.brown import Brown
from nplm.data.vocab import TEXT_END
from nplm.files import write_json_atomically, write_text_atomically
from nplm.lm import build_language_model
from nplm.models.nnlm import NNLM
from nplm.optimizer import make_optimizer
from nplm.window_training import create_state, make_steps

# Table 1 rows of Bengio et al. (2003), as in experiments/flags/mlp{1,9}.flags.
SHAPES = {
    'MLP1': dict(order=5, feature_size=60, hidden_size=50, direct=True),
    'MLP9': dict(order=5, feature_size=30, hidden_size=100, direct=False),
}


class CorpusNotPrepared(RuntimeError):
  """The benchmark never prepares the corpus (minutes, maybe a download): it says how to."""


def load_training_ids(data_dir: str):
  """(training ids, training counts per id, boundary id) of the prepared Brown corpus."""
  if not Brown(data_dir=data_dir or None).is_prepared():
    raise CorpusNotPrepared(
        f'the Brown corpus is not prepared in --data_dir={data_dir or "(TFDS default)"}; '
        'prepare it once with `python -m experiments.brown --data_dir=DIR --max_steps=1 '
        '--workdir=/tmp/prepare` or point --data_dir at a prepared one')
  corpus = load_corpus(data_dir=data_dir or None)
  return corpus.splits['train'], corpus.vocab.counts, int(corpus.vocab.encode([TEXT_END])[0])


def shape_config(shape: dict, batch_size: int) -> Config:
  return Config(workdir='unused', batch_size=batch_size, **shape).validate()


def analytic_step_flops(config: Config, vocab_size: int) -> int:
  """Matmul FLOPs of one update: forward 2·B·in·out for H and the output layer; backward
  twice that (gradients of the weights and of the inputs: x's gradient reaches C).
  Softmax, tanh and the AdamW update are left out (about 1% here)."""
  features = (config.order - 1) * config.feature_size
  output_inputs = NNLM.from_config(config, vocab_size).hidden_dim
  forward = 2 * config.batch_size * (features * config.hidden_size + output_inputs * vocab_size)
  return 3 * forward


def xla_flops(compiled) -> float | None:
  """'flops' of XLA's cost analysis: a dict in jax 0.10, a list of dicts in older versions."""
  cost = compiled.cost_analysis()
  if isinstance(cost, (list, tuple)):
    cost = cost[0] if cost else None
  return float(cost['flops']) if cost and 'flops' in cost else None


def benchmark_batches(num_examples: int, batch_size: int, steps: int, seed: int = 0):
  """The trainer's first `steps` batches (into the next epochs if the split is short)."""
  batches = []
  for epoch in itertools.count():
    if len(batches) >= steps:
      return batches
    epoch_batches = batching.train_batches(num_examples, batch_size, seed, epoch)
    batches.extend(itertools.islice(epoch_batches, steps - len(batches)))


def timed_runs(run, repeats: int) -> tuple[list[float], object]:
  """(seconds of each of `repeats` calls of run(), the last call's result)."""
  seconds, result = [], None
  for _ in range(repeats):
    start = time.perf_counter()
    result = run()
    seconds.append(time.perf_counter() - start)
  return seconds, result


def examples_per_second(run_steps, batches, repeats: int) -> dict:
  """Median, min and max examples/s over `repeats` timed runs, after an untimed warm-up."""
  # One untimed run: JAX compiles; PyTorch's first dozen steps run at half speed (allocator
  # and optimizer state settling), which a two-step warm-up did not absorb.
  run_steps(batches)
  seconds, loss = timed_runs(lambda: run_steps(batches), repeats)
  return rate_summary(seconds, batches, loss)


def rate_summary(seconds: list[float], batches, loss) -> dict:
  """Median, min and max examples/s of timed runs over `batches`, and the seconds per step."""
  examples = float(sum(mask.sum() for _, mask in batches))  # Padded rows do not count.
  rates = [examples / s for s in seconds]
  return {'median': float(np.median(rates)), 'min': min(rates), 'max': max(rates),
          'runs': rates, 'seconds_per_step': float(np.median(seconds)) / len(batches),
          'last_loss': loss}


def jax_runner(config: Config, counts, padded_split: np.ndarray, mesh=None):
  """(run_steps, compiled step): run_steps does what the trainer's loop does per update, on
  `mesh` (default: every device on 'data')."""
  mesh = mesh or parallel.make_mesh()
  lm = build_language_model(config, counts, mesh)
  init_rng, step_rng = jax.random.split(jax.random.key(config.seed))
  state, state_sharding = parallel.create_state(
      lambda rng: create_state(config, lm, rng, make_optimizer(config)), init_rng, mesh,
      lm.vocab_parallel)
  train_step, _ = make_steps(lm, config.order, mesh, state_sharding)
  loop = {'state': state}
  padded = parallel.put(padded_split, mesh)
  positions = np.zeros(config.batch_size, np.int32)  # Shapes and dtypes of a real batch.
  mask = np.ones(config.batch_size, np.float32)
  compiled = train_step.lower(loop['state'], padded, positions, mask, step_rng).compile()

  def run_steps(batches) -> float:
    state, loss = loop['state'], None
    for positions, mask in batches:
      state, loss = train_step(state, padded, positions, mask, step_rng)  # state is donated
    jax.block_until_ready((state, loss))
    loop['state'] = state
    return float(loss)

  return run_steps, compiled


def matmul_gflops(m: int, k: int, n: int, repeats: int) -> float:
  """Median GFLOP/s of a jitted float32 [m,k]·[k,n] jnp.dot: what XLA's matmul reaches here."""
  a, b = (jax.random.normal(key, shape) for key, shape in
          zip(jax.random.split(jax.random.key(0)), [(m, k), (k, n)]))
  dot = jax.jit(jnp.dot)
  jax.block_until_ready(dot(a, b))  # Compiles.
  # One dot is short and a busy machine makes it noisy: at least 10 samples, cheaply.
  seconds, _ = timed_runs(lambda: jax.block_until_ready(dot(a, b)), max(repeats, 10))
  return 2 * m * k * n / float(np.median(seconds)) / 1e9


def torch_examples_per_second(config, vocab_size, padded_split, batches, repeats):
  """(result, None) or (None, why it was skipped): PyTorch is optional."""
  try:
    from experiments import torch_nnlm
  except ImportError as error:
    return None, f'PyTorch is not importable ({error}); `pip install torch==2.13.0` adds it'
  threads = torch_nnlm.use_all_cores()
  run_steps = torch_nnlm.make_runner(config, vocab_size, padded_split, config.seed)
  result = examples_per_second(run_steps, batches, repeats)
  return {**result, 'threads': threads, 'version': torch_nnlm.torch.__version__}, None


def benchmark_shape(name, shape, train_ids, counts, boundary_id, batch_size, steps,
                    repeats, with_torch=True) -> dict:
  config = shape_config(shape, batch_size)
  vocab_size = len(counts)
  padded = batching.pad_split(np.asarray(train_ids), config.order, boundary_id)
  batches = benchmark_batches(len(train_ids), batch_size, steps, config.seed)
  run_steps, compiled = jax_runner(config, counts, padded)
  jax_rate = examples_per_second(run_steps, batches, repeats)
  flops = {'xla': xla_flops(compiled), 'analytic': analytic_step_flops(config, vocab_size)}
  step_gflops = (flops['xla'] or flops['analytic']) / jax_rate['seconds_per_step'] / 1e9
  # The forward output layer's dot: [B, D] x [D, |V|].
  dims = [batch_size, NNLM.from_config(config, vocab_size).hidden_dim, vocab_size]
  matmul = matmul_gflops(*dims, repeats)
  result = {'shape': name, 'config': {**shape, 'batch_size': batch_size}, 'jax': jax_rate,
            'step_flops': flops, 'step_gflops_per_s': step_gflops,
            'output_matmul': {'dims': dims, 'gflops_per_s': matmul},
            'share_of_matmul': step_gflops / matmul, 'torch': None, 'jax_over_torch': None,
            'torch_skipped': 'disabled by --notorch'}
  if with_torch:
    result['torch'], result['torch_skipped'] = torch_examples_per_second(
        config, vocab_size, padded, batches, repeats)
  if result['torch']:
    result['jax_over_torch'] = jax_rate['median'] / result['torch']['median']
  return result


def machine_info() -> dict:
  cpuinfo = Path('/proc/cpuinfo')
  names = [line.split(':', 1)[1].strip() for line in cpuinfo.read_text().splitlines()
           if line.startswith('model name')] if cpuinfo.exists() else []
  model = names[0] if names else platform.processor() or platform.machine()
  device = jax.devices()[0]
  return {'cpu': model, 'cores': os.cpu_count(), 'jax': jax.__version__,
          'backend': jax.default_backend(),
          'device': f'{len(jax.devices())} × {device.device_kind} device',
          'python': platform.python_version()}


def run_benchmark(train_ids, counts, boundary_id, batch_size=256, steps=50, repeats=5,
                  shapes=None, with_torch=True, square=2048) -> dict:
  """Everything the CLI reports, as a dict: importable, and runnable on any ids."""
  shapes = SHAPES if shapes is None else shapes
  results = [benchmark_shape(name, shape, train_ids, counts, boundary_id, batch_size,
                             steps, repeats, with_torch) for name, shape in shapes.items()]
  return {'machine': machine_info(), 'vocab_size': len(counts),
          'settings': {'batch_size': batch_size, 'steps': steps, 'repeats': repeats},
          'square_matmul': {'size': square,
                            'gflops_per_s': matmul_gflops(square, square, square, repeats)},
          'shapes': results}


def _table(report: dict) -> list[list[str]]:
  rows = [['shape', 'JAX examples/s median [min–max]', 'step GFLOP XLA / by hand',
           'step GFLOP/s', 'output matmul GFLOP/s', 'share', 'PyTorch examples/s',
           'JAX/PyTorch']]
  for r in report['shapes']:
    j, t, f = r['jax'], r['torch'], r['step_flops']
    xla = 'n/a' if f['xla'] is None else f'{f["xla"] / 1e9:.3f}'
    rows.append([r['shape'], f'{j["median"]:,.0f} [{j["min"]:,.0f}–{j["max"]:,.0f}]',
                 f'{xla} / {f["analytic"] / 1e9:.3f}', f'{r["step_gflops_per_s"]:.1f}',
                 f'{r["output_matmul"]["gflops_per_s"]:.1f}', f'{r["share_of_matmul"]:.0%}',
                 f'{t["median"]:,.0f}' if t else 'skipped',
                 f'{r["jax_over_torch"]:.2f}' if t else '–'])
  return rows


def table_lines(rows: list[list[str]], markdown: bool) -> list[str]:
  """A header row and data rows as a markdown table, or as aligned plain-text columns."""
  if markdown:
    rows = [rows[0], ['---'] * len(rows[0]), *rows[1:]]
    return ['| ' + ' | '.join(row) + ' |' for row in rows]
  widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
  return ['  '.join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def machine_line(m: dict) -> str:
  """The first line of a report: what the figures were measured on (machine_info())."""
  return (f'Machine: {m["cpu"]}, {m["cores"]} cores; jax {m["jax"]} on {m["backend"]} '
          f'({m["device"]}); Python {m["python"]}')


def format_report(report: dict, markdown: bool = False) -> str:
  m, s, square = report['machine'], report['settings'], report['square_matmul']
  lines = [machine_line(m),
           f'Batch {s["batch_size"]}, |V| = {report["vocab_size"]}, median of {s["repeats"]} '
           f'runs of {s["steps"]} steps. Float32 matmul {square["size"]}²: '
           f'{square["gflops_per_s"]:.1f} GFLOP/s.', '']
  lines += table_lines(_table(report), markdown)
  torch_runs = [r['torch'] for r in report['shapes'] if r['torch']]
  skipped = {r['torch_skipped'] for r in report['shapes'] if not r['torch']}
  lines += [''] + [f'PyTorch comparison skipped: {why}.' for why in skipped]
  if torch_runs:
    lines.append(f'PyTorch {torch_runs[0]["version"]}, torch.set_num_threads('
                 f'{torch_runs[0]["threads"]}); its default (for-loop) AdamW.')
  lines.append("share = step GFLOP/s ÷ GFLOP/s of the step's forward output-layer matmul "
               '[B, D]·[D, |V|] timed alone.')
  return '\n'.join(lines) + '\n'


def write_report(report: dict, out: str, formatter=None) -> None:
  """OUT.json and OUT.md (`formatter(report, markdown=True)`, by default this benchmark's),
  each whole or not at all (a trailing .json or .md is dropped)."""
  formatter = formatter or format_report
  stem = Path(out).with_suffix('') if Path(out).suffix in ('.json', '.md') else Path(out)
  stem.parent.mkdir(parents=True, exist_ok=True)
  write_json_atomically(stem.with_name(stem.name + '.json'), report)
  write_text_atomically(stem.with_name(stem.name + '.md'), formatter(report, markdown=True))


def define_common_flags(steps: int, shape: bool = False) -> None:
  """The flags every train-step benchmark takes (--shape too if `shape`). Only when run as a
  program: absl refuses a flag defined twice in one process, and the trainer's flags share
  these names."""
  flags.DEFINE_string('data_dir', '', 'TFDS data dir of the prepared corpus (empty: TFDS default).')
  if shape:
    flags.DEFINE_enum('shape', 'MLP9', list(SHAPES), 'Table 1 shape to time.')
  flags.DEFINE_integer('steps', steps, 'Consecutive updates in one timed run.')
  flags.DEFINE_integer('repeats', 5, 'Timed runs per measurement; the median is reported.')
  flags.DEFINE_string('out', '', 'If set, also writes OUT.json and OUT.md.')


def training_ids_or_exit(argv):
  """A benchmark main's start: no stray arguments, quiet logs, the prepared corpus's
  (training ids, counts, boundary id), or a one-line error and exit status 2."""
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
  absl_logging.set_verbosity(absl_logging.WARNING)  # TFDS's INFO lines would bury the table.
  try:
    return load_training_ids(flags.FLAGS.data_dir)
  except CorpusNotPrepared as error:
    print(f'error: {error}', file=sys.stderr)
    sys.exit(2)


def define_flags() -> None:
  define_common_flags(steps=50)
  flags.DEFINE_integer('batch_size', 256, 'Examples per update (the flagfiles use 256).')
  flags.DEFINE_bool('torch', True, 'Also time the PyTorch version (if PyTorch is installed).')


def main(argv):
  train_ids, counts, boundary_id = training_ids_or_exit(argv)
  FLAGS = flags.FLAGS
  report = run_benchmark(train_ids, counts, boundary_id, FLAGS.batch_size, FLAGS.steps,
                         FLAGS.repeats, with_torch=FLAGS.torch)
  print(format_report(report))
  if FLAGS.out:
    write_report(report, FLAGS.out)


if __name__ == '__main__':
  define_flags()
  app.run(main)
