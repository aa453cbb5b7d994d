r"""Train-step throughput of nplm's recurrent LSTM against the same LSTM written in PyTorch.

  python -m experiments.benchmarks.lstm --out=runs/rnn_benchmark
  python -m experiments.benchmarks.lstm --steps=2 --repeats=1 --out=/tmp/rnnbench  # a look

For the shape of the recipe --flagfile_name (lstm, nplm/recipes/lstm.flags: 1 layer, E = H =
200, tied embeddings, dropout 0.3, B = 32 streams of T = 35 words, clipping, AdamW) it times
the real jitted nplm.training.stream_feed step, driven through the trainer's StreamFeed on the
Brown training streams: the epoch's first --steps segments in order, the recurrent state
carried from each to the next. An untimed run compiles; then --repeats timed runs, each ended
by block_until_ready (median, min and max). When PyTorch is installed,
experiments/benchmarks/torch_lstm.py trains on the very same segments, and the timed runs
alternate (nplm, PyTorch, nplm, …) so that a busy spell of a shared machine slows both;
--torch_compile=inductor adds the PyTorch model under torch.compile(model) (compiled before
the timing, as nplm's step; dynamo leaves nn.LSTM itself to cuDNN). Rates count real tokens:
the mask's sum, without the padding at the streams' tail.
"""

import os
import sys
from pathlib import Path

import jax
import numpy as np
from absl import app, flags
from absl import logging as absl_logging

from experiments.benchmarks.harness import (CorpusNotPrepared, compiled_first_step,
                                            interleaved_rates, load_training_ids, machine_info,
                                            use_all_cores)
from nplm.cli import run_experiment
from nplm.flagfiles import config_from_flagfile
from nplm.config import Config, ConfigError
from nplm.files import write_json_atomically, write_text_atomically
from nplm.lm import build_language_model
from nplm.training.stream_feed import StreamFeed
from nplm.training.config_checks import validated

SHAPE_FIELDS = ('model', 'num_layers', 'feature_size', 'hidden_size', 'tie_embeddings',
                'dropout', 'batch_size', 'bptt_length', 'clip_norm', 'optimizer',
                'learning_rate', 'lr_decay', 'weight_decay', 'head', 'seed')


def flagfile_config(name: str) -> Config:
  """The Config of the recipe `name` (or a flagfile at that path); the PyTorch baseline is
  a softmax LSTM."""
  config = validated(config_from_flagfile(name, workdir='unused'))
  if config.model != 'lstm' or config.head != 'softmax':
    raise ConfigError(f'{name}.flags has --model={config.model} --head={config.head}; '
                      'the PyTorch baseline is an LSTM under a full softmax')
  return config


def segment_batches(feed: StreamFeed, steps: int) -> list:
  """(index, mask [B, T]) of the epoch's first `steps` segments, in the trainer's order."""
  if steps > feed.steps_per_epoch:
    raise ConfigError(f'--steps={steps} is more than the {feed.steps_per_epoch} segments of '
                      'an epoch')
  mask, length = np.asarray(feed.train_arrays[2]), feed.config.bptt_length
  return [(index, mask[:, index * length:(index + 1) * length]) for index in range(steps)]


def nplm_runner(feed: StreamFeed, seed: int):
  """run_steps(batches) -> last loss: the trainer's loop over these segments."""
  init_rng, step_rng = jax.random.split(jax.random.key(seed))
  loop = {'state': feed.create_state(init_rng)}

  def run_steps(batches) -> float:
    state, loss = loop['state'], None
    for index, _ in batches:
      state, loss = feed.step(state, (index,), step_rng)  # state is donated
    jax.block_until_ready((state, loss))
    loop['state'] = state
    return float(loss)

  return run_steps


def torch_runner(config: Config, vocab_size: int, feed: StreamFeed, compile_backend: str = ''):
  """(run_steps, what ran it) or (None, why it was skipped): PyTorch is optional. With
  `compile_backend`, the model runs under torch.compile(backend=compile_backend)."""
  try:
    from experiments.benchmarks import torch_lstm
  except ImportError as error:
    return None, f'PyTorch is not importable ({error}); `pip install torch==2.13.0` adds it'
  if config.optimizer not in torch_lstm.OPTIMIZERS:
    return None, (f'the PyTorch LSTM has {" and ".join(torch_lstm.OPTIMIZERS)}, not '
                  f'--optimizer={config.optimizer}')
  threads = use_all_cores()
  # Writable copies: torch.from_numpy warns about the read-only views of device arrays.
  words, targets, mask = (np.array(a) for a in feed.train_arrays)
  run_steps = torch_lstm.make_runner(config, vocab_size, words, targets, mask, config.seed,
                                     compile_backend)
  return run_steps, {'threads': threads, 'version': torch_lstm.torch.__version__,
                     'compile_backend': compile_backend}


def measure(config: Config, counts, train_ids, boundary_id: int, steps: int,
            repeats: int, torch_compile: str = '') -> dict:
  """Everything the CLI reports, as a dict: importable, and runnable on any ids;
  `torch_compile`: also the PyTorch model under torch.compile with that backend."""
  lm = build_language_model(config, counts)
  feed = StreamFeed(config, lm, {'train': np.asarray(train_ids)}, boundary_id)
  batches = segment_batches(feed, steps)
  runners = {'nplm': nplm_runner(feed, config.seed)}
  torch_run, torch_about = torch_runner(config, len(counts), feed)
  if torch_run:
    runners['torch'] = torch_run
  compiled_about = 'not asked (--torch_compile)'
  if torch_compile:
    compiled_run, compiled_about = compiled_first_step(
        *torch_runner(config, len(counts), feed, torch_compile), batches)
    if compiled_run:
      runners['torch_compiled'] = compiled_run
  rates = interleaved_rates(runners, batches, repeats)
  usable = (len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity')
            else os.cpu_count())  # macOS has no affinity
  report = {'machine': {**machine_info(), 'usable_cores': usable},
            'shape': {name: getattr(config, name) for name in SHAPE_FIELDS},
            'vocab_size': len(counts),
            'settings': {'steps': steps, 'repeats': repeats, 'torch_compile': torch_compile},
            'nplm': rates['nplm'], 'torch': None, 'nplm_over_torch': None,
            'torch_skipped': None if torch_run else torch_about,
            'torch_compiled': None, 'nplm_over_torch_compiled': None,
            'torch_compiled_skipped': None if 'torch_compiled' in rates else compiled_about}
  if torch_run:
    report['torch'] = {**rates['torch'], **torch_about}
    report['nplm_over_torch'] = rates['nplm']['median'] / rates['torch']['median']
  if 'torch_compiled' in rates:
    report['torch_compiled'] = {**rates['torch_compiled'], **compiled_about}
    report['nplm_over_torch_compiled'] = (rates['nplm']['median']
                                          / rates['torch_compiled']['median'])
  return report


def _rate_row(name: str, rate: dict) -> list[str]:
  return [name, f'{rate["median"]:,.0f} [{rate["min"]:,.0f}–{rate["max"]:,.0f}]',
          f'{1e3 * rate["seconds_per_step"]:.1f}', f'{rate["last_loss"]:.3f}']


def format_report(report: dict, markdown: bool = False) -> str:
  m, s, shape = report['machine'], report['settings'], report['shape']
  lines = [f'Machine: {m["cpu"]}, {m["usable_cores"]} of {m["cores"]} cores usable; '
           f'jax {m["jax"]} on {m["backend"]} ({m["device"]}); Python {m["python"]}',
           f'{shape["model"].upper()}: {shape["num_layers"]} layer(s), E = '
           f'{shape["feature_size"]}, H = {shape["hidden_size"]}, tied = '
           f'{shape["tie_embeddings"]}, dropout {shape["dropout"]}, B = {shape["batch_size"]} '
           f'streams × T = {shape["bptt_length"]}, |V| = {report["vocab_size"]}, clip '
           f'{shape["clip_norm"]}, {shape["optimizer"]} lr {shape["learning_rate"]}. '
           f'Median [min–max] of {s["repeats"]} runs of {s["steps"]} segments.', '']
  rows = [['', 'tokens/s median [min–max]', 'ms/step', 'last loss'],
          _rate_row('nplm (JAX)', report['nplm'])]
  torch = report['torch']
  if torch:
    rows.append(_rate_row(f'PyTorch {torch["version"]}', torch))
  compiled = report.get('torch_compiled')
  if compiled:
    rows.append(_rate_row(f'PyTorch {compiled["version"]}, torch.compile '
                          f'({compiled["compile_backend"]})', compiled))
  if markdown:
    rows.insert(1, ['---'] * len(rows[0]))
    lines += ['| ' + ' | '.join(row) + ' |' for row in rows]
  else:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines += ['  '.join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
  lines.append('')
  if torch:
    lines += [f'nplm / PyTorch: {report["nplm_over_torch"]:.2f}× (medians).',
              f'PyTorch: torch.set_num_threads({torch["threads"]}); nn.LSTM, the recipe\'s '
              'optimizer (its default, for-loop, implementation).']
  else:
    lines.append(f'PyTorch comparison skipped: {report["torch_skipped"]}.')
  if compiled:
    lines.append(f'nplm / torch.compile: {report["nplm_over_torch_compiled"]:.2f}× (medians).')
  elif report['settings'].get('torch_compile'):
    lines.append(f'torch.compile comparison skipped: {report["torch_compiled_skipped"]}.')
  return '\n'.join(lines) + '\n'


def write_report(report: dict, out: str) -> None:
  """OUT/rnn_benchmark.json and OUT/rnn_benchmark.md, each whole or not at all."""
  directory = Path(out)
  directory.mkdir(parents=True, exist_ok=True)
  write_json_atomically(directory / 'rnn_benchmark.json', report)
  write_text_atomically(directory / 'rnn_benchmark.md', format_report(report, markdown=True))


def define_flags() -> None:
  """Only when run as a program: absl refuses a flag defined twice in one process."""
  flags.DEFINE_string('data_dir', '', 'TFDS data dir of the prepared corpus (empty: TFDS default).')
  flags.DEFINE_string('flagfile_name', 'lstm', 'Benchmarks this recipe (nplm/recipes/NAME.flags) '
                      'or flagfile.')
  flags.DEFINE_integer('steps', 20, 'Consecutive segments (updates) in one timed run.')
  flags.DEFINE_integer('repeats', 5, 'Timed runs of each implementation; the median is reported.')
  flags.DEFINE_string('out', '', 'If set, a directory that receives rnn_benchmark.{md,json}.')
  flags.DEFINE_string('torch_compile', '', 'Also time the PyTorch model under '
                      'torch.compile(model, backend=THIS): inductor (torch.compile\'s default, '
                      'the real figure) or eager / aot_eager (a cheap check of the code path, '
                      'not a speed); empty: not.')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
  FLAGS = flags.FLAGS
  absl_logging.set_verbosity(absl_logging.WARNING)  # TFDS's INFO lines would bury the table.
  try:
    config = flagfile_config(FLAGS.flagfile_name)
    train_ids, counts, boundary_id = load_training_ids(FLAGS.data_dir)
    report = measure(config, counts, train_ids, boundary_id, FLAGS.steps, FLAGS.repeats,
                     FLAGS.torch_compile)
  except (CorpusNotPrepared, ConfigError) as error:
    print(f'error: {error}', file=sys.stderr)
    sys.exit(2)
  print(format_report(report))
  if FLAGS.out:
    write_report(report, FLAGS.out)


if __name__ == '__main__':
  define_flags()
  run_experiment(main)
