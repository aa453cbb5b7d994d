"""What every benchmark shares: the Table 1 shapes, the prepared corpus's training ids, the
trainer's own step and batches, timing (warm-up, repeats, medians, round-robin between
implementations), the machine's description and matmul rate, and the reports (printed, and
OUT.json + OUT.md written whole). Each benchmark main imports this, nplm and its own peer
model (torch_*.py), never another benchmark; the large-corpus ones (scale.py,
vocab_parallel_scale.py) also take prepare.py's generated corpus and its child steps."""

import itertools
import os
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from absl import logging as absl_logging

from nplm import parallel
from nplm.cli import fail, refuse_arguments
from nplm.config import Config
from nplm.data import batching, load_corpus
from nplm.data.brown import Brown
from nplm.files import write_json_atomically, write_text_atomically
from nplm.lm import build_language_model
from nplm.training.window_feed import WindowFeed
from nplm.training.config_checks import validated

# Table 1 rows of Bengio et al. (2003), as in the recipes mlp1 and mlp9 (nplm/recipes).
SHAPES = {
    'MLP1': dict(order=5, feature_size=60, hidden_size=50, direct=True),
    'MLP9': dict(order=5, feature_size=30, hidden_size=100, direct=False),
}


class CorpusNotPrepared(RuntimeError):
  """The benchmark never prepares the corpus (minutes, maybe a download): it says how to."""


def require_prepared_brown(data_dir: str) -> None:
  """Raises CorpusNotPrepared unless the Brown corpus is prepared in `data_dir`."""
  if not Brown(data_dir=data_dir or None).is_prepared():
    raise CorpusNotPrepared(
        f'the Brown corpus is not prepared in --data_dir={data_dir or "(TFDS default)"}; '
        'prepare it once with `python -m experiments.brown --data_dir=DIR --max_steps=1 '
        '--workdir=/tmp/prepare` or point --data_dir at a prepared one')


def load_training_ids(data_dir: str):
  """(training ids, training counts per id, boundary id) of the prepared Brown corpus."""
  require_prepared_brown(data_dir)
  corpus = load_corpus(data_dir=data_dir or None)
  return corpus.splits['train'], corpus.vocab.counts, corpus.boundary_id


def shape_config(shape: dict, batch_size: int) -> Config:
  return validated(Config(workdir='unused', batch_size=batch_size, **shape))


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


def jax_runner(config: Config, counts, padded_split: np.ndarray, mesh=None,
               updates_per_call: int = 1):
  """(run_steps, compiled step): run_steps does what the trainer's loop does per update, on
  `mesh` (default: every device on 'data'); with `updates_per_call` > 1, as the loop's
  --updates_per_call does: that many updates scanned in one call (Feed.steps)."""
  mesh = mesh or parallel.make_mesh()
  config = config.replace(updates_per_call=updates_per_call)
  lm = build_language_model(config, counts, mesh)
  init_rng, step_rng = jax.random.split(jax.random.key(config.seed))
  feed = WindowFeed(config, lm, {}, boundary_id=None, mesh=mesh)  # The split comes padded.
  state = feed.create_state(init_rng)
  train_step = feed.train_step
  padded = parallel.put(padded_split, mesh)
  positions = np.zeros(config.batch_size, np.int32)  # Shapes and dtypes of a real batch.
  mask = np.ones(config.batch_size, np.float32)
  compiled = train_step.lower(state, padded, positions, mask, step_rng).compile()
  if updates_per_call > 1:
    run_steps = grouped_runner(feed, state, padded, step_rng, updates_per_call)
  else:
    run_steps = steps_runner(train_step, state, padded, step_rng)
  return (lambda batches: float(run_steps(batches))), compiled


def steps_runner(train_step, state, padded, run_rng):
  """run_steps(batches) -> the last loss(es): `train_step` (a WindowFeed's, for one
  or K stacked models) over the batches, the state carried (donated) from call to call."""
  loop = {'state': state}

  def run_steps(batches) -> np.ndarray:
    state, loss = loop['state'], None
    for positions, mask in batches:
      state, loss = train_step(state, padded, positions, mask, run_rng)
    jax.block_until_ready((state, loss))
    loop['state'] = state
    return np.asarray(loss)

  return run_steps


def matmul_flops_per_second(rows: int, inner: int, cols: int, repeats: int = 5,
                            dtype=jnp.float32) -> float:
  """Median FLOP/s (2·rows·inner·cols per call) of a jitted [rows, inner] @ [inner, cols] in
  `dtype`: what XLA's matmul reaches here, compiled and warmed first, each call waited for."""
  a, b = (jax.random.normal(key, shape, dtype) for key, shape in
          zip(jax.random.split(jax.random.key(0)), [(rows, inner), (inner, cols)]))
  dot = jax.jit(jnp.dot)
  jax.block_until_ready(dot(a, b))  # Compiles.
  jax.block_until_ready(dot(a, b))  # Warms (allocations, caches) untimed.
  seconds, _ = timed_runs(lambda: jax.block_until_ready(dot(a, b)), repeats)
  return 2 * rows * inner * cols / float(np.median(seconds))


def matmul_gflops(m: int, k: int, n: int, repeats: int, dtype=jnp.float32) -> float:
  """Median GFLOP/s of a jitted [m,k]·[k,n] jnp.dot (float32 unless `dtype`): what XLA's
  matmul reaches here."""
  # One dot is short and a busy machine makes it noisy: at least 10 samples, cheaply.
  return matmul_flops_per_second(m, k, n, max(repeats, 10), dtype) / 1e9


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


def write_report(report: dict, out: str, formatter) -> None:
  """OUT.json and OUT.md (`formatter(report, markdown=True)`), each whole or not at all (a
  trailing .json or .md is dropped)."""
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
  refuse_arguments(argv)
  absl_logging.set_verbosity(absl_logging.WARNING)  # TFDS's INFO lines would bury the table.
  try:
    return load_training_ids(flags.FLAGS.data_dir)
  except CorpusNotPrepared as error:
    fail(error)


def report(report: dict, formatter, out: str) -> None:
  """Prints the report; with `out`, also writes OUT.json and OUT.md."""
  print(formatter(report))
  if out:
    write_report(report, out, formatter)


def grouped_runner(feed, state, padded, run_rng, updates_per_call: int):
  """run_steps(batches) -> the last loss: the feed's `train_steps` over the batches,
  `updates_per_call` in each call (stacked), the state carried (donated) from call to call;
  the batches past the last whole group one a call, as the loop runs them."""
  loop = {'state': state}

  def run_steps(batches) -> np.ndarray:
    state, losses = loop['state'], None
    whole = len(batches) - len(batches) % updates_per_call
    for start in range(0, whole, updates_per_call):
      group = batches[start:start + updates_per_call]
      positions, masks = (np.stack(part) for part in zip(*group))
      state, losses = feed.train_steps(state, padded, positions, masks, run_rng)
    for positions, mask in batches[whole:]:
      state, losses = feed.train_step(state, padded, positions, mask, run_rng)
    jax.block_until_ready((state, losses))
    loop['state'] = state
    return np.asarray(losses).reshape(-1)[-1]

  return run_steps


def interleaved_rates(runners: dict, batches, repeats: int) -> dict:
  """examples_per_second for every runner, its timed runs taken round-robin."""
  for run_steps in runners.values():
    run_steps(batches)  # The untimed warm-up, as in examples_per_second.
  seconds = {name: [] for name in runners}
  losses = {}
  for _ in range(repeats):
    for name, run_steps in runners.items():
      (elapsed,), losses[name] = timed_runs(lambda: run_steps(batches), 1)
      seconds[name].append(elapsed)
  return {name: rate_summary(seconds[name], batches, losses[name]) for name in runners}


def compiled_first_step(run_steps, about, batches):
  """(run_steps, about) of a PyTorch runner under torch.compile once its first step ran
  (compiling there), or (None, why not): compiling needs a toolchain (Triton on a GPU, a C++
  compiler on a CPU) that a machine may lack, which should cost that comparison only."""
  if run_steps is None:
    return None, about  # PyTorch is not importable: `about` says so.
  try:
    run_steps(batches[:1])
  except Exception as error:  # torch.compile's failures share no base class.
    first_line = (str(error).strip().splitlines() or [''])[0]
    return None, (f'torch.compile(backend={about["compile_backend"]!r}) failed: '
                  f'{type(error).__name__}: {first_line}')
  return run_steps, about


def use_all_cores() -> int:
  """PyTorch's intra-op threads = the cores this process may use (XLA's pool uses them all)."""
  import torch  # Optional: only the PyTorch comparisons call this.
  cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
  torch.set_num_threads(cores)
  return torch.get_num_threads()
