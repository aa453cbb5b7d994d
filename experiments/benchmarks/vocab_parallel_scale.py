r"""Vocabulary-parallel training at |V| = 1M: the same numbers as one device, 1/N of the
output layer per device (Bengio et al. 2003, section 3.2: the output units split over
processors).

  python -m experiments.benchmarks.vocab_parallel_scale --out=/tmp/vocab_parallel
  python -m experiments.benchmarks.vocab_parallel_scale --out=/tmp/vp --types=2000 \
      --train_tokens=20000 --steps=2

Writes a text:DIR corpus whose training split holds exactly --types distinct words (every
type once, the rest Zipf-drawn), so that the vocabulary (--unk_max_count=0) is --types plus
<unk> and <eos>; prepares it once in a child process; then trains the same NNLM with the
full softmax twice, each run in a fresh child process (`train` below: nplm.trainer.run, then
the run's latest checkpoint restored onto the mesh it trained on):
  1. on one CPU device;
  2. on --devices simulated CPU devices with --mesh=model:N (JAX_NUM_CPU_DEVICES=N), the
     output rows split over the vocabulary (nplm.heads.vocab_parallel).
Prints every logged train loss and the final exact valid and test perplexities side by side
with their largest relative difference against --rtol, the bytes each device holds of the
output layer and of the whole train state (each array's addressable shards), the seconds per
update and each child's peak resident memory; names every command it ran. Simulated devices
share the host's cores: the step times show that the layout runs, not how it scales.
"""

import collections
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
from absl import flags
from absl import logging as absl_logging

from experiments.benchmarks import harness
from experiments.benchmarks.prepare import word_strings
from nplm import display, parallel, trainer
from nplm.cli import fail, refuse_arguments, run_experiment
from nplm.config import Config
from nplm.data import datasets
from nplm.data.vocab import Vocabulary
from nplm.flagfiles import config_from_flags
from nplm.lm import build_language_model
from nplm.run_files.checkpoint import Checkpoints
from nplm.training.families import feed_of

ROOT = Path(__file__).resolve().parents[2]
MODULE = 'experiments.benchmarks.vocab_parallel_scale'
# The run compared: Table 1's NNLM shape, narrower (the output layer is what |V| = 1M makes
# large), the paper's SGD, the full softmax of section 3.2. One --eval_batch_size batch of
# scores is [batch, |V|] floats: 1 GiB at 256 examples and |V| = 1M.
MODEL_FLAGS = ('--model=nnlm', '--order=5', '--feature_size=32', '--hidden_size=64',
               '--head=softmax', '--optimizer=sgd', '--learning_rate=0.3', '--batch_size=256',
               '--eval_batch_size=256', '--seed=0', '--log_every=1')
# The train split of a few million tokens is not scored: its exact evaluation at |V| = 1M
# would take hours on a CPU.
EVAL_FLAGS = ('--eval_splits=valid,test',)
LINE_WORDS = (1, 50)  # Words per line: uniform in [1, 50), as prepare.py's corpus.


# --- the corpus ---------------------------------------------------------------------------

def zipf_ids(rng: np.random.Generator, types: int, count: int) -> np.ndarray:
  """`count` type indices drawn from p(rank) ∝ 1 / (rank + 2.7), prepare.py's Zipf law."""
  cdf = np.cumsum(1.0 / (np.arange(types) + 2.7))
  return np.searchsorted(cdf / cdf[-1], rng.random(count)).astype(np.int64)


def write_lines(path: Path, words: np.ndarray, ids: np.ndarray,
                rng: np.random.Generator) -> None:
  """The words of `ids`, in order, as lines of 1 to 49 words, written in 1M-word pieces."""
  with open(path, 'w', encoding='utf-8') as f:
    for start in range(0, len(ids), 1 << 20):
      piece = words[ids[start:start + (1 << 20)]]
      cuts = np.cumsum(rng.integers(*LINE_WORDS, size=len(piece)))  # Lines enough for any draw.
      f.write(''.join(' '.join(line) + '\n' for line in np.split(piece, cuts[cuts < len(piece)])))


def write_corpus(directory: Path, types: int, train_tokens: int, heldout_tokens: int,
                 seed: int = 0) -> None:
  """train.txt: every one of `types` words once and Zipf draws up to `train_tokens`, shuffled;
  valid.txt and test.txt: `heldout_tokens` Zipf draws each (every word known: no <unk>)."""
  rng = np.random.default_rng(seed)
  words = np.array(word_strings(types), dtype=object)
  train = np.concatenate([np.arange(types), zipf_ids(rng, types, train_tokens - types)])
  directory.mkdir(parents=True, exist_ok=True)
  write_lines(directory / 'train.txt', words, rng.permutation(train), rng)
  for split in ('valid', 'test'):
    write_lines(directory / f'{split}.txt', words, zipf_ids(rng, types, heldout_tokens), rng)


# --- the children ---------------------------------------------------------------------------

def peak_rss() -> int:
  """This process's peak resident memory so far (VmHWM), in bytes."""
  for line in Path('/proc/self/status').read_text().splitlines():
    if line.startswith('VmHWM:'):
      return int(line.split()[1]) * 1024
  return 0


def bytes_by_device(tree) -> dict[int, int]:
  """{device id: bytes of `tree` that device holds}: every shard of every array counted on
  its device, so a replicated array counts once per device that holds a copy."""
  held = collections.Counter()
  for leaf in jax.tree.leaves(tree):
    for shard in leaf.addressable_shards:
      held[shard.device.id] += shard.data.nbytes
  return dict(sorted(held.items()))


def trained_state(config, workdir: Path):
  """The run's latest checkpoint restored onto the mesh it trained on, each leaf laid out as
  the trainer lays it out (nplm.parallel.state_shardings of the feed's abstract state)."""
  mesh = parallel.make_mesh(config.mesh)
  lm = build_language_model(config, Vocabulary.load(workdir / 'vocab.txt').counts, mesh)
  feed = feed_of(lm.model)
  abstract = feed.abstract_state(config, lm)
  shardings = parallel.state_shardings(abstract, mesh, lm.vocab_parallel, feed.batch_axes)
  target = jax.tree.map(lambda leaf, where: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype,
                                                                 sharding=where),
                        abstract, shardings)
  state, _ = Checkpoints(workdir).restore_latest(target)
  return state


def train_child(typed: list[str]) -> dict:
  """`nplm train`'s run of the typed flags, then what each device holds of its state."""
  display.show_progress_lines()
  config = config_from_flags(typed)
  summary = trainer.run(config)
  peak = peak_rss()  # The training run's, before the restore below adds a state.
  state = trained_state(Config.from_saved(summary['config']), Path(config.workdir).absolute())
  output = state.params['head']['output']
  vocab_size = summary['vocab_size']
  return {'peak_rss': peak, 'output_bytes': bytes_by_device(output),
          'state_bytes': bytes_by_device(state),
          # The layer as one device holds it: |V| rows, the padding rows left out.
          'output_bytes_unpadded': sum(leaf.nbytes // leaf.shape[0] * vocab_size
                                       for leaf in jax.tree.leaves(output)),
          'output_rows': int(output['bias'].shape[0])}


def prepare_child(typed: list[str]) -> dict:
  """The corpus prepared into the data dir (nplm.data.prepared), as a training run would."""
  display.show_progress_lines()  # Also turns TFDS's progress bars off.
  started = time.perf_counter()
  datasets.load_prepared(config_from_flags(typed).resolved())
  return {'seconds': time.perf_counter() - started, 'peak_rss': peak_rss()}


CHILDREN = {'prepare': prepare_child, 'train': train_child}


def run_child(kind: str, typed: list[str], devices: int, commands: list[str]) -> dict:
  """`python -m MODULE KIND FLAGS` from the checkout's root on `devices` simulated CPU
  devices: its report (the last line of its stdout), its wall time, its command line."""
  env = {'JAX_PLATFORMS': 'cpu', 'JAX_NUM_CPU_DEVICES': str(devices)}
  argv = ['-m', MODULE, kind, *typed]
  commands.append(' '.join([*(f'{k}={v}' for k, v in env.items()),
                            shlex.join(['python', *argv])]))
  started = time.perf_counter()
  child = subprocess.run([sys.executable, *argv], cwd=ROOT, env={**os.environ, **env},
                         stdout=subprocess.PIPE, text=True, check=False)
  if child.returncode != 0:  # Its messages went to stderr, which is ours.
    sys.exit(f'error: the {kind} child failed (status {child.returncode}): {commands[-1]}')
  return {**json.loads(child.stdout.strip().splitlines()[-1]),
          'wall_seconds': time.perf_counter() - started}


# --- the benchmark ------------------------------------------------------------------------

def train_losses(workdir: Path) -> dict[int, float]:
  """{step: train loss} from metrics.jsonl, the last record of each step (a rerun appends)."""
  records = (json.loads(line) for line in (workdir / 'metrics.jsonl').read_text().splitlines())
  return {r['step']: r['loss'] for r in records if r['kind'] == 'train'}


def train_run(name: str, typed: list[str], devices: int, workdir: Path,
              commands: list[str]) -> dict:
  """One training child in a fresh workdir: its numbers (summary.json, metrics.jsonl) and
  what its devices held."""
  shutil.rmtree(workdir, ignore_errors=True)  # A run there would be resumed, not timed.
  held = run_child('train', [*typed, f'--workdir={workdir}'], devices, commands)
  for kind in ('output_bytes', 'state_bytes'):  # JSON made the device ids strings.
    held[kind] = {int(device): count for device, count in held[kind].items()}
  summary = json.loads((workdir / 'summary.json').read_text())
  return {'name': name, 'devices': devices, 'mesh': summary['devices']['mesh'],
          'vocab_size': summary['vocab_size'], 'tokens': summary['tokens'],
          'losses': train_losses(workdir), 'valid_ppl': summary['valid_ppl'],
          'test_ppl': summary['test_ppl'], 'steps': summary['steps'],
          # train_seconds leaves out the first update, which waits for the compilation.
          'step_seconds': summary['train_seconds'] / max(summary['steps'] - 1, 1), **held}


def comparison(one: dict, many: dict, rtol: float) -> dict:
  """Every logged train loss and the final perplexities of both runs, their relative
  differences, and whether the largest is within `rtol`."""
  if one['losses'].keys() != many['losses'].keys():
    raise ValueError(f'the runs logged different steps: {sorted(one["losses"])} and '
                     f'{sorted(many["losses"])}')
  rows = [[f'train loss, step {step}', one['losses'][step], many['losses'][step]]
          for step in sorted(one['losses'])]
  rows += [[f'{split} perplexity', one[f'{split}_ppl'], many[f'{split}_ppl']]
           for split in ('valid', 'test')]
  for row in rows:
    row.append(abs(row[2] - row[1]) / abs(row[1]))
  worst = max(row[3] for row in rows)
  return {'rows': rows, 'max_relative_difference': worst, 'rtol': rtol, 'same': worst <= rtol}


def run_benchmark(out: Path, types: int, train_tokens: int, heldout_tokens: int, steps: int,
                  devices: int, rtol: float) -> dict:
  """Generates and prepares the corpus, trains both runs, compares them: the report."""
  out, commands, started = out.absolute(), [], time.perf_counter()
  corpus_dir, marker = out / 'corpus', out / 'corpus.json'
  wanted = {'types': types, 'train_tokens': train_tokens, 'heldout_tokens': heldout_tokens}
  if not marker.exists() or json.loads(marker.read_text()) != wanted:
    write_corpus(corpus_dir, types, train_tokens, heldout_tokens)
    marker.write_text(json.dumps(wanted))
  data = [f'--dataset=text:{corpus_dir}', f'--data_dir={out / "tfds"}', '--unk_max_count=0']
  prepared = run_child('prepare', data, 1, commands)
  run_flags = [*MODEL_FLAGS, *EVAL_FLAGS, f'--max_steps={steps}']
  one = train_run('1 device', [*data, *run_flags], 1, out / 'runs' / 'one_device', commands)
  many = train_run(f'model:{devices}', [*data, *run_flags, f'--mesh=model:{devices}'], devices,
                   out / 'runs' / f'model{devices}', commands)
  corpus = {**wanted, 'vocab_size': one['vocab_size'], 'tokens': one['tokens']}
  return {'machine': harness.machine_info(), 'corpus': corpus,
          'run_flags': run_flags, 'prepare': prepared, 'runs': [one, many],
          'comparison': comparison(one, many, rtol), 'commands': commands,
          'seconds': time.perf_counter() - started}


# --- the report -----------------------------------------------------------------------------

def mib(count: int) -> str:
  return f'{count / (1 << 20):,.2f}'


def comparison_lines(report: dict, markdown: bool) -> list[str]:
  one, many = report['runs']
  verdict = report['comparison']
  rows = [['', one['name'], many['name'], 'relative difference']]
  rows += [[what, f'{a:.7g}', f'{b:.7g}', f'{d:.1e}'] for what, a, b, d in verdict['rows']]
  return [*harness.table_lines(rows, markdown), '',
          f'largest relative difference {verdict["max_relative_difference"]:.1e}: '
          + ('the same numbers' if verdict['same'] else 'DIFFERENT numbers')
          + f' within {verdict["rtol"]:.0e} (float32 sums taken in another order)']


def bytes_lines(report: dict, markdown: bool) -> list[str]:
  rows = [['run', 'device', 'output layer MiB', 'share of the layer', 'whole state MiB']]
  for run in report['runs']:
    rows += [[run['name'], str(device), mib(held), f'{held / run["output_bytes_unpadded"]:.3%}',
              mib(run['state_bytes'][device])] for device, held in run['output_bytes'].items()]
  one, many = report['runs']
  return [*harness.table_lines(rows, markdown), '',
          'output layer: the head\'s output embedding and bias, '
          f'{mib(one["output_bytes_unpadded"])} MiB on one device; {many["name"]} pads its '
          f'{report["corpus"]["vocab_size"]:,} rows to {many["output_rows"]:,} (zero, masked) '
          'and gives each device a slice; share: of the layer\'s |V| rows. Bytes are '
          'summed over each array\'s addressable shards, the latest checkpoint restored onto '
          'the mesh the run trained on; a replicated array counts on every device.']


def runs_lines(report: dict, markdown: bool) -> list[str]:
  rows = [['run', 'mesh', 'seconds per update', 'peak RSS MiB', 'child wall s']]
  rows += [[run['name'], ','.join(f'{axis}:{size}' for axis, size in run['mesh'].items()),
            f'{run["step_seconds"]:.3f}', mib(run['peak_rss']), f'{run["wall_seconds"]:.0f}']
           for run in report['runs']]
  prepared = report['prepare']
  return [*harness.table_lines(rows, markdown), '',
          'seconds per update: summary.json\'s train_seconds over the updates after the first '
          '(which waits for the compilation); peak RSS: VmHWM at the end of training. '
          f'Preparation: {prepared["seconds"]:.0f} s, peak RSS {mib(prepared["peak_rss"])} MiB. '
          'Simulated devices share the host cores: the layout runs, these times do not scale.']


def format_report(report: dict, markdown: bool = False) -> str:
  corpus = report['corpus']
  lines = [harness.machine_line(report['machine']), '',
           f'text:DIR corpus: {corpus["train_tokens"]:,} training words holding each of '
           f'{corpus["types"]:,} types, {corpus["heldout_tokens"]:,} words in each of valid and '
           f'test, every line ending with <eos>; |V| = {corpus["vocab_size"]:,} (the types, '
           '<unk>, <eos>); <unk> rate 0.', '',
           'both runs: ' + ' '.join(report['run_flags']), '']
  sections = [('Numbers', comparison_lines), ('Bytes held per device', bytes_lines),
              ('Time and memory', runs_lines)]
  for title, section in sections:
    lines += [f'## {title}' if markdown else f'{title}:', '', *section(report, markdown), '']
  lines += ['Commands (from the checkout\'s root; '
            f'{report["seconds"]:.0f} s in all):', '']
  lines += [f'    {command}' for command in report['commands']]
  return '\n'.join(lines) + '\n'


def define_flags() -> None:
  flags.DEFINE_string('out', None, 'Directory for the corpus, its preparation, both runs and '
                      'report.json, report.md.')
  flags.DEFINE_integer('types', 1_000_000, 'Distinct words of the training split (|V| is '
                       'this plus <unk> and <eos>).')
  flags.DEFINE_integer('train_tokens', 3_000_000, 'Words of the training split (each type '
                       'once, the rest Zipf-drawn).')
  flags.DEFINE_integer('heldout_tokens', 2_000, 'Words of each of valid and test.')
  flags.DEFINE_integer('steps', 10, 'Updates of each run (--max_steps), every one logged.')
  flags.DEFINE_integer('devices', 8, 'Simulated CPU devices of the vocabulary-parallel run '
                       '(--mesh=model:N).')
  flags.DEFINE_float('rtol', 1e-5, 'Largest relative difference called the same numbers.')
  flags.mark_flag_as_required('out')


def main(argv):
  refuse_arguments(argv)
  FLAGS = flags.FLAGS
  if FLAGS.steps < 2 or FLAGS.devices < 2 or FLAGS.types < 1:
    fail('--steps and --devices must be at least 2 and --types positive (seconds per update '
         'leave out the first, compiled one; the comparison needs a second device)')
  if FLAGS.train_tokens < FLAGS.types:
    fail(f'--train_tokens={FLAGS.train_tokens} must be at least --types={FLAGS.types}: every '
         'type occurs once in training')
  absl_logging.set_verbosity(absl_logging.WARNING)  # jax's INFO lines would bury the report.
  out = Path(FLAGS.out)
  report = run_benchmark(out, FLAGS.types, FLAGS.train_tokens, FLAGS.heldout_tokens,
                         FLAGS.steps, FLAGS.devices, FLAGS.rtol)
  harness.report(report, format_report, str(out / 'report'))


if __name__ == '__main__':
  if sys.argv[1:2] and sys.argv[1] in CHILDREN:  # A child process: its report on stdout.
    print(json.dumps(CHILDREN[sys.argv[1]](sys.argv[2:])))
  else:
    define_flags()
    run_experiment(main)
