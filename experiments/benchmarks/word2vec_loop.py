r"""word2vec's update as XLA's loop over chunks (`word2vec_update.chunked_step`, the form an
accelerator runs) on the device JAX picks: milliseconds a step for each chunk size, in the
two forms of the loop, measured in one run.

  python -m experiments.benchmarks.word2vec_loop --out=DIR/word2vec_loop

- filled: the loop runs to the last chunk that holds an example, a count computed on the
  device, and skip-gram's sampled pairs are packed first (a CPU's form without the C++
  update);
- every: every chunk runs, a count XLA knows, the pairs kept with their positions (an
  accelerator's form: XLA's GPU while loop reads the condition of a loop of unknown count
  back to the host after every iteration).
The step: --batch_size positions of Zipf words (word2vec_kernel.batch: |V| = 11,856,
Brown's; m = 100; window 5, its radius drawn from 1 … 5) for each variant of --configs, at
each size of --chunks. Compiling is left out (a step first, untimed); --repeats runs of
--steps steps each, the programs taken in turn, and the medians reported.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from absl import logging as absl_logging

from experiments.benchmarks import harness
from experiments.benchmarks.word2vec_kernel import FEATURES, VOCAB, batch
from nplm.cli import fail, refuse_arguments, run_experiment
from nplm.training import word2vec_update

VARIANTS = {'cbow_ns': ('cbow', 'negative_sampling'), 'cbow_hs': ('cbow', 'tree'),
            'skipgram_ns': ('skipgram', 'negative_sampling'), 'skipgram_hs': ('skipgram', 'tree')}
FORMS = {'filled': False, 'every': True}  # The loop's form: chunked_step's every_chunk.
ALPHA = 0.025


def programs(variant: str, chunks: list[int], batch_size: int) -> dict:
  """{(chunk, form): run(steps) -> seconds} for one variant, each with its own tables."""
  model, head = VARIANTS[variant]
  output, windows, centers, mask, rows = batch(model, head, batch_size)
  rng = np.random.default_rng(1)
  start = (rng.uniform(-0.5, 0.5, (VOCAB, FEATURES)).astype(np.float32) / FEATURES,
           rng.normal(0, 0.1, (rows, FEATURES)).astype(np.float32))
  found = {}
  for chunk in chunks:
    for form, every_chunk in FORMS.items():
      step = jax.jit(lambda vectors, out, key, chunk=chunk, every_chunk=every_chunk:
                     word2vec_update.chunked_step(model, output, vectors, out, windows,
                                                  centers, mask, ALPHA, key, chunk,
                                                  every_chunk=every_chunk)[:2],
                     donate_argnums=(0, 1))
      found[chunk, form] = timer(step, tuple(map(jnp.asarray, start)))
  return found


def timer(step, tables):
  """run(steps) -> the seconds of `steps` steps, the tables carried from run to run; the
  first call also compiles, untimed."""
  state = {'tables': jax.block_until_ready(step(*tables, jax.random.key(0)))}

  def run(steps: int) -> float:
    began = time.perf_counter()
    for index in range(steps):
      state['tables'] = step(*state['tables'], jax.random.key(index))
    jax.block_until_ready(state['tables'])
    return time.perf_counter() - began
  return run


def measure(configs: list[str], chunks: list[int], batch_size: int, steps: int,
            repeats: int) -> dict:
  runs = {(variant, *key): run for variant in configs
          for key, run in programs(variant, chunks, batch_size).items()}
  seconds = {key: [] for key in runs}
  for _ in range(repeats):
    for key, run in runs.items():
      seconds[key].append(run(steps) / steps)
  rows = []
  for (variant, chunk, form), taken in seconds.items():
    median = float(np.median(taken))
    rows.append({'variant': variant, 'chunk': chunk, 'form': form,
                 'chunks_a_step': batch_size // chunk, 'ms_per_step': 1e3 * median,
                 'least_ms': 1e3 * min(taken), 'positions_per_second': batch_size / median})
  return {'machine': harness.machine_info(), 'batch_size': batch_size, 'steps': steps,
          'repeats': repeats, 'rows': rows}


def format_report(report: dict, markdown: bool = False) -> str:
  by_key = {(r['variant'], r['chunk'], r['form']): r for r in report['rows']}
  table = [['variant', 'positions a chunk', 'chunks a step', 'filled: ms a step',
            'every: ms a step', 'filled / every', 'every: positions/s']]
  for variant, chunk in dict.fromkeys((r['variant'], r['chunk']) for r in report['rows']):
    filled, every = by_key[variant, chunk, 'filled'], by_key[variant, chunk, 'every']
    table.append([variant, f'{chunk:,}', f'{every["chunks_a_step"]:,}',
                  f'{filled["ms_per_step"]:.2f}', f'{every["ms_per_step"]:.2f}',
                  f'{filled["ms_per_step"] / every["ms_per_step"]:.2f}',
                  f'{every["positions_per_second"]:,.0f}'])
  return '\n'.join([
      harness.machine_line(report['machine']),
      f'word2vec\'s update as XLA\'s loop, {report["batch_size"]:,} positions a step; median '
      f'of {report["repeats"]} runs of {report["steps"]} steps, the programs in turn.', '',
      *harness.table_lines(table, markdown), '',
      'filled: to the last chunk holding an example (a count computed on the device); every: '
      'every chunk (a count XLA knows), skip-gram\'s pairs with their positions.'])


def main(argv):
  refuse_arguments(argv)
  absl_logging.set_verbosity(absl_logging.WARNING)  # JAX's INFO lines would bury the table.
  f = flags.FLAGS
  unknown = sorted(set(f.configs) - set(VARIANTS))
  if unknown:
    fail(f'--configs takes {", ".join(VARIANTS)}, not {", ".join(unknown)}')
  chunks = [int(chunk) if chunk.isdigit() else 0 for chunk in f.chunks]
  if any(chunk < 1 or f.batch_size % chunk for chunk in chunks):
    fail(f'each of --chunks must be a whole number dividing --batch_size={f.batch_size}, '
         f'got {",".join(f.chunks)}')
  harness.report(measure(f.configs, chunks, f.batch_size, f.steps, f.repeats),
                 format_report, f.out)


if __name__ == '__main__':
  flags.DEFINE_list('configs', ['cbow_ns', 'skipgram_hs'], 'Variants: ' + ', '.join(VARIANTS))
  flags.DEFINE_list('chunks', ['32', '128', '512'], 'Positions a chunk.')
  flags.DEFINE_integer('batch_size', 16384, 'Positions a step.')
  flags.DEFINE_integer('steps', 5, 'Steps a timed run.')
  flags.DEFINE_integer('repeats', 5, 'Timed runs a program; the median is reported.')
  flags.DEFINE_string('out', '', 'If set, also writes OUT.json and OUT.md.')
  run_experiment(main)
