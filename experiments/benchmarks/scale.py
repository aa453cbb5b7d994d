r"""The whole path at scale on this machine: a 100M-token, 300k-type corpus generated,
prepared and trained on by each head as a user would, each step in a fresh process.

  python -m experiments.benchmarks.scale --out=/tmp/scale              # 100M tokens, 300k types
  python -m experiments.benchmarks.scale --out=/tmp/scale --tokens=1000000 --types=20000

1. The corpus (experiments/benchmarks/prepare.py's Zipf text:DIR corpus, kept in OUT between
   runs) is prepared (the prepared dataset deleted first) and loaded, each by prepare.py's
   own timed child process: wall seconds, peak resident memory, the split sizes.
2. Each of --heads trains as `nplm train --dataset=text:CORPUS --head=HEAD --max_steps=S
   --eval_splits=valid,test` (--eval_splits) in OUT/runs/HEAD (deleted first: a finished run
   would be reused). From its summary.json: the seconds of each phase (load, build, compile, train,
   validation, evaluation per split), examples/s, the evaluated tokens. Its peak resident
   memory is what the kernel reports to the parent for that child at its exit (wait4's
   ru_maxrss: the child's VmHWM), so the command is the user's, unwrapped.
3. The same heads, model and steps on a --baseline_tokens corpus of --baseline_types types
   (OUT/baseline): examples/s at |V| = 10k, and the slowdown at scale.
The evaluation's output layer computes s(w,h) = b_w + o_w·h for every word on the heads with
one output row per word (a head's output_rows: 2·D·|V| FLOPs per token, read as
matmul FLOP/s against a float32 square matmul of --matmul_size measured here, as
experiments/benchmarks/exact_eval.py reads it);
the tree (a path of depth·D) and adaptive (a shortlist and narrow tails) heads need no full
softmax. The peak memory is split into the ids of each split (int32), the model's state
(nplm.training.memory's exact state_bytes), the epoch's batch order (one int32 per training
position), the step's activations (nplm.training.memory's estimate, within 2x) and the rest
(interpreter, JAX, XLA). --max_steps stays inside the first epoch at these sizes, so no
epoch-end validation is timed (its seconds are printed: 0 when there was none); --epochs=1
--max_steps=0 trains each head one whole epoch instead (its validation then timed).
Writes OUT/scale.json and .md (or --report's), with every command line it ran.
"""

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from absl import flags
from absl import logging as absl_logging

from experiments.benchmarks import harness, prepare
from nplm.cli import fail, refuse_arguments, run_experiment
from nplm.config import Config
from nplm.data.vocab import Vocabulary
from nplm.heads import HEADS, head_class, with_output_rows
from nplm.lm import build_language_model
from nplm.training import memory

FLAGS = flags.FLAGS
MIB = 1 << 20
# What a training process's peak memory is spent on (head_figures), as the report lists it.
MEMORY_PARTS = ('train ids', 'valid ids', 'test ids', 'model state', 'batch order',
                'activations (estimate)', 'rest')
# The goals of issue 32.
PEAK_BEYOND_IDS_GOAL = 2e9  # bytes: peak RSS of a training process less its splits' ids
SLOWDOWN_GOAL = 2.0  # examples/s at |V| = 10k over examples/s at scale
MATMUL_SHARE_GOAL = 0.5  # exact evaluation's output-layer FLOP/s over the matmul rate


def model_flags() -> list[str]:
  return [f'--model={FLAGS.model}', f'--order={FLAGS.order}',
          f'--feature_size={FLAGS.feature_size}', f'--hidden_size={FLAGS.hidden_size}',
          '--direct=false', f'--optimizer={FLAGS.optimizer}',
          f'--learning_rate={FLAGS.learning_rate}', f'--batch_size={FLAGS.batch_size}',
          f'--eval_batch_size={FLAGS.eval_batch_size}']


def steps_of(head: str) -> int:
  """--max_steps of the head's runs: --steps_per_head's figure for it, else --max_steps."""
  for item in FLAGS.steps_per_head:
    name, _, steps = item.partition(':')
    if name == head:
      return int(steps)
  return FLAGS.max_steps


def shown(argv: list[str]) -> str:
  """A command line to paste in a shell; a `python -c` program stands as "$PROGRAM" (its
  text is in the JSON report's argv)."""
  return ' '.join('"$PROGRAM"' if i > 0 and argv[i - 1] == '-c' else shlex.quote(arg)
                  for i, arg in enumerate(argv))


def measured_child(argv: list[str], log_path: Path) -> dict:
  """Runs argv, its output into log_path: its wall seconds and peak resident memory (the
  kernel's ru_maxrss of the child, kB, at its exit: its VmHWM)."""
  with open(log_path, 'w', encoding='utf-8') as log:
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
  process.returncode = os.waitstatus_to_exitcode(status)  # Reaped: Popen must not wait.
  if process.returncode != 0:
    last = (log_path.read_text(encoding='utf-8').strip().splitlines() or [''])[-1]
    fail(f'{shown(argv)} ended with status {process.returncode}: {last} (its output: '
         f'{log_path})')
  return {'seconds': seconds, 'peak': usage.ru_maxrss * 1024}


def train_run(corpus_dir: Path, data_dir: Path, out: Path, head: str, label: str,
              commands: list) -> dict:
  """One head's `nplm train` in a fresh process: what its summary says, its peak memory."""
  workdir = out / 'runs' / head
  shutil.rmtree(workdir, ignore_errors=True)  # A finished run there would be reused.
  argv = [sys.executable, '-m', 'nplm.cli', 'train', f'--dataset=text:{corpus_dir}',
          f'--data_dir={data_dir}', f'--workdir={workdir}', *model_flags(), f'--head={head}',
          f'--max_steps={steps_of(head)}', f'--eval_splits={",".join(FLAGS.eval_splits)}',
          *([f'--epochs={FLAGS.epochs}'] if FLAGS.epochs else []), *FLAGS.train_flags]
  commands.append({'step': f'train {head} ({label})', 'argv': argv})
  measured = measured_child(argv, out / 'runs' / f'{head}.log')
  summary = json.loads((workdir / 'summary.json').read_text())
  kept = ('phase_seconds', 'steps', 'train_examples_per_second', 'tokens', 'valid_ppl',
          'test_ppl', 'vocab_size', 'parameters')
  return {**measured, **{key: summary.get(key) for key in kept},
          'memory': state_and_activations(summary['config'], workdir)}


def state_and_activations(saved_config: dict, workdir: Path) -> dict:
  """The run's model state (exact) and step activations (estimated) by
  nplm.training.memory, for the config and vocabulary the run recorded."""
  config = Config.from_saved(saved_config)
  counts = Vocabulary.load(workdir / 'vocab.txt').counts
  lm = build_language_model(config, counts)
  state, params = memory.state_bytes(config, lm)
  found = memory.estimate(config, lm, state=(state, params))
  return {'output_width': lm.model.output_width, 'state': state,
          'activations': max(found.gradients + found.train, found.evaluation)}


def measure_corpus(label: str, out: Path, tokens: int, types: int, commands: list) -> dict:
  """A generated corpus (kept between runs), its preparation and loading, and each head's
  training run on it; the commands labelled `label`."""
  corpus_dir, data_dir = out / 'corpus', out / 'tfds'
  generated = prepare.generated_corpus(corpus_dir, out / 'corpus.json', tokens, types)
  shutil.rmtree(data_dir, ignore_errors=True)  # Timed from scratch.
  steps = {}
  for step in ('prepare', 'load'):
    commands.append({'step': f'{step} ({label})',
                     'argv': prepare.child_command(step, corpus_dir, data_dir)})
    steps[step] = prepare.child(step, corpus_dir, data_dir)
  (out / 'runs').mkdir(parents=True, exist_ok=True)
  runs = {head: train_run(corpus_dir, data_dir, out, head, label, commands)
          for head in FLAGS.heads}
  return {'tokens': tokens, 'types': types, 'text_bytes': sum(generated['files'].values()),
          'generate_seconds': generated['seconds'], **steps, 'runs': runs}


def head_figures(report: dict, head: str) -> dict:
  """What the issue asks of one head at scale, from the measured figures."""
  scale, baseline = report['scale'], report['baseline']
  run, split_tokens = scale['runs'][head], scale['load']['tokens']
  evaluation = run['phase_seconds']['evaluation']
  tokens_per_second = {s: run['tokens'][s] / evaluation[s] for s in evaluation}
  figures = {'examples_per_second': run['train_examples_per_second'],
             'baseline_examples_per_second':
                 baseline['runs'][head]['train_examples_per_second'],
             'evaluation_tokens_per_second': tokens_per_second,
             'full_softmax': head_class(head).output_rows}
  figures['slowdown'] = figures['baseline_examples_per_second'] / figures['examples_per_second']
  if figures['full_softmax'] and evaluation:
    flops_per_token = 2 * run['memory']['output_width'] * run['vocab_size']
    figures['output_flops_per_second'] = {s: flops_per_token * tokens_per_second[s]
                                          for s in evaluation}
    figures['matmul_share'] = {s: figures['output_flops_per_second'][s]
                               / report['matmul']['flops_per_second'] for s in evaluation}
  ids = {s: 4 * n for s, n in split_tokens.items()}  # int32
  parts = {**{f'{s} ids': b for s, b in ids.items()}, 'model state': run['memory']['state'],
           'batch order': 4 * split_tokens['train'],
           'activations (estimate)': run['memory']['activations']}
  parts['rest'] = run['peak'] - sum(parts.values())
  figures.update(peak=run['peak'], beyond_ids=run['peak'] - sum(ids.values()), memory=parts)
  return figures


def goals(figures: dict) -> list[dict]:
  """Each goal of issue 32 per head: measured against it, met or not."""
  found = []
  for head, f in figures.items():
    found.append({'head': head, 'goal': 'peak RSS beyond the ids < 2 GB',
                  'measured': f'{f["beyond_ids"] / 1e9:.2f} GB',
                  'met': f['beyond_ids'] < PEAK_BEYOND_IDS_GOAL})
    found.append({'head': head, 'goal': 'examples/s at scale within 2× of a 10k vocabulary',
                  'measured': f'{f["slowdown"]:.2f}×', 'met': f['slowdown'] <= SLOWDOWN_GOAL})
    if f.get('matmul_share'):
      share = min(f['matmul_share'].values())
      found.append({'head': head, 'goal': 'exact evaluation ≥ 50% of the matmul rate',
                    'measured': f'{100 * share:.0f}% (lowest split)',
                    'met': share >= MATMUL_SHARE_GOAL})
  return found


def _mib(bytes_: float) -> str:
  return f'{bytes_ / MIB:,.0f}'


def _first_run(corpus: dict) -> dict:
  return next(iter(corpus['runs'].values()))


def _preparation_lines(report: dict, markdown: bool) -> list[str]:
  scale, baseline = report['scale'], report['baseline']
  lines = [f'|V| = {_first_run(scale)["vocab_size"]:,} from {scale["tokens"]:,} tokens of '
           f'{scale["types"]:,} types ({scale["text_bytes"] / MIB:,.0f} MiB of text); baseline '
           f'|V| = {_first_run(baseline)["vocab_size"]:,} from {baseline["tokens"]:,} tokens; '
           f'model flags {" ".join(report["model_flags"])}; steps per run: '
           + ', '.join(f'{head} {steps}' for head, steps in report['steps'].items())
           + (f'; epochs per run: {report["epochs"]}' if report.get('epochs') else '')
           + (f'; more flags: {" ".join(report["train_flags"])}'
              if report.get('train_flags') else ''),
           '']
  rows = [['corpus', 'step', 'wall s', 'peak MiB']]
  for name, corpus in (('scale', scale), ('baseline', baseline)):
    rows += [[name, step, f'{corpus[step]["seconds"]:.1f}', _mib(corpus[step]['peak'])]
             for step in ('prepare', 'load')]
  return lines + harness.table_lines(rows, markdown)


def _training_lines(report: dict, markdown: bool) -> list[str]:
  rows = [['head', 'wall s', 'load s', 'build s', 'compile s', 'train s', 'checkpoints s',
           'validation s', 'examples/s', 'at 10k', 'slowdown', 'valid ppl', 'test ppl']]
  for head in report['heads']:
    run, f = report['scale']['runs'][head], report['figures'][head]
    phases = run['phase_seconds']
    rows.append([head, f'{run["seconds"]:.1f}',
                 *(f'{phases[p]:.1f}' for p in ('load', 'build', 'compile', 'train',
                                                'checkpoints', 'validation')),
                 f'{f["examples_per_second"]:,.0f}', f'{f["baseline_examples_per_second"]:,.0f}',
                 f'{f["slowdown"]:.2f}×',
                 *('-' if run[ppl] is None else f'{run[ppl]:,.1f}'
                   for ppl in ('valid_ppl', 'test_ppl'))])
  return ['Training at scale (one process per head):', *harness.table_lines(rows, markdown)]


def _evaluation_lines(report: dict, markdown: bool) -> list[str]:
  """The final evaluation's rates, or one line where no run scored a split."""
  matmul = report['matmul']
  if not any(run['phase_seconds']['evaluation'] for run in report['scale']['runs'].values()):
    return ['Exact evaluation: none (--eval_splits=none).']
  rows = [['head', 'split', 'tokens', 'seconds', 'tokens/s', 'output GFLOP/s', 'of matmul']]
  for head in report['heads']:
    run, f = report['scale']['runs'][head], report['figures'][head]
    for s in run['phase_seconds']['evaluation']:
      rows.append([head, s, f'{run["tokens"][s]:,}',
                   f'{run["phase_seconds"]["evaluation"][s]:.1f}',
                   f'{f["evaluation_tokens_per_second"][s]:,.0f}',
                   *((f'{f["output_flops_per_second"][s] / 1e9:,.1f}',
                      f'{100 * f["matmul_share"][s]:.0f}%') if f['full_softmax']
                     else ('no full softmax', '-'))])
  return [f'Exact evaluation: output GFLOP/s = 2·D·|V| per token × tokens/s on the heads with '
          f'one output row per word ({", ".join(with_output_rows())}); the tree (a path) and '
          f'adaptive (a shortlist, narrow tails) need no full softmax. The matmul rate: '
          f'{matmul["flops_per_second"] / 1e9:,.1f} GFLOP/s at float32 {matmul["shape"]} '
          '(rows, inner, cols).', *harness.table_lines(rows, markdown)]


def _memory_lines(report: dict, markdown: bool) -> list[str]:
  rows = [['head', 'peak MiB', 'beyond ids MiB', *(f'{p} MiB' for p in MEMORY_PARTS)]]
  for head in report['heads']:
    f = report['figures'][head]
    rows.append([head, _mib(f['peak']), _mib(f['beyond_ids']),
                 *(_mib(f['memory'][p]) for p in MEMORY_PARTS)])
  return ['Peak resident memory of each training process, and what it is spent on:',
          *harness.table_lines(rows, markdown)]


def format_report(report: dict, markdown: bool = False) -> str:
  rows = [['goal', 'head', 'measured', 'met']]
  rows += [[g['goal'], g['head'], g['measured'], 'met' if g['met'] else 'not met']
           for g in report['goals']]
  lines = [harness.machine_line(report['machine'])
           + f', {report["machine"]["memory_gib"]:.0f} GiB', '',
           *_preparation_lines(report, markdown), '', *_training_lines(report, markdown), '',
           *_evaluation_lines(report, markdown), '', *_memory_lines(report, markdown), '',
           'Goals (issue 32):', *harness.table_lines(rows, markdown), '',
           f'Ran: {report["command"]}', 'Each step ("$PROGRAM": the `python -c` program of '
           'experiments/benchmarks/prepare.py, whole in the JSON report):']
  lines += [f'  {c["step"]}: {shown(c["argv"])}' for c in report['commands']]
  return '\n'.join(lines) + '\n'


def main(argv):
  refuse_arguments(argv)
  absl_logging.set_verbosity(absl_logging.WARNING)  # JAX's INFO lines would bury the table.
  unknown = [head for head in FLAGS.heads if head not in HEADS]
  if unknown:
    fail(f'--heads: unknown {", ".join(unknown)}; known: {", ".join(HEADS)}')
  for item in FLAGS.steps_per_head:
    name, _, steps = item.partition(':')
    if name not in HEADS or not steps.isdigit() or int(steps) < 1:
      fail(f'--steps_per_head: {item!r} is not HEAD:STEPS (a known head, a positive count)')
  out = Path(FLAGS.out).resolve()
  commands = []
  report = {'command': shown([sys.executable, '-m', 'experiments.benchmarks.scale',
                              *sys.argv[1:]]),
            'heads': FLAGS.heads, 'eval_splits': FLAGS.eval_splits,
            'model_flags': model_flags(), 'train_flags': FLAGS.train_flags,
            'steps': {head: steps_of(head) for head in FLAGS.heads}, 'epochs': FLAGS.epochs,
            'commands': commands,
            'scale': measure_corpus('scale', out, FLAGS.tokens, FLAGS.types, commands),
            'baseline': measure_corpus('baseline', out / 'baseline', FLAGS.baseline_tokens,
                                       FLAGS.baseline_types, commands)}
  memory_gib = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / (1 << 30)
  report['machine'] = {**harness.machine_info(), 'memory_gib': memory_gib}
  shape = [FLAGS.matmul_size] * 3
  report['matmul'] = {'shape': shape,
                      'flops_per_second': harness.matmul_flops_per_second(*shape, repeats=5)}
  report['figures'] = {head: head_figures(report, head) for head in FLAGS.heads}
  report['goals'] = goals(report['figures'])
  harness.report(report, format_report, FLAGS.report or str(out / 'scale'))


if __name__ == '__main__':
  flags.DEFINE_string('out', None, 'Directory for the corpora, their preparations and the runs.')
  flags.DEFINE_integer('tokens', 100_000_000, 'Words in the generated corpus.')
  flags.DEFINE_integer('types', 300_000, 'Distinct words it draws from (Zipf).')
  flags.DEFINE_integer('baseline_tokens', 10_000_000, 'Words in the baseline corpus.')
  flags.DEFINE_integer('baseline_types', 10_000, 'Distinct words of the baseline corpus.')
  flags.DEFINE_list('heads', ['nce', 'is', 'tree', 'adaptive'], 'Heads trained on each corpus.')
  flags.DEFINE_string('model', 'nnlm', 'nplm train --model.')
  flags.DEFINE_integer('order', 5, 'nplm train --order.')
  flags.DEFINE_integer('feature_size', 64, 'nplm train --feature_size.')
  flags.DEFINE_integer('hidden_size', 128, 'nplm train --hidden_size (no direct connections: '
                       'the output layer reads D = hidden_size).')
  flags.DEFINE_string('optimizer', 'sgd', 'nplm train --optimizer (sgd: row-sparse, a sampled '
                      "head's step does not grow with |V|).")
  flags.DEFINE_integer('batch_size', 256, 'nplm train --batch_size.')
  flags.DEFINE_float('learning_rate', 0.1, 'nplm train --learning_rate (0.1 with sgd: every '
                     'head learns the corpus\'s unigram distribution within the steps).')
  flags.DEFINE_integer('max_steps', 20_000, 'nplm train --max_steps: updates per run (0: no '
                       'bound).')
  flags.DEFINE_integer('epochs', 0, 'nplm train --epochs (0: not passed); --epochs=1 '
                       '--max_steps=0 trains one whole epoch per run.')
  flags.DEFINE_list('steps_per_head', ['adaptive:300'], 'HEAD:STEPS: another --max_steps for '
                    'a head (the adaptive head computes every tail for the whole batch, so its '
                    'step grows with |V|).')
  flags.DEFINE_list('eval_splits', ['valid', 'test'], 'nplm train --eval_splits: the splits '
                    'scored exactly at the end (1% of the tokens each, every token against '
                    'every word on a full softmax: --eval_splits=test halves that time, '
                    '--eval_splits=none leaves it out).')
  flags.DEFINE_list('train_flags', [], 'More nplm train flags for every run, e.g. '
                    '--checkpoint_every=2000,--checkpoint_minutes=0 (the checkpoint cadence '
                    'before issue 45).')
  flags.DEFINE_integer('eval_batch_size', Config.eval_batch_size,
                       'nplm train --eval_batch_size.')
  flags.DEFINE_integer('matmul_size', 2048, 'The square float32 matmul whose rate the '
                       'evaluation is compared with (the machine\'s matmul rate).')
  flags.DEFINE_string('report', '', 'Writes REPORT.json and REPORT.md (default: OUT/scale).')
  flags.mark_flag_as_required('out')
  run_experiment(main)
