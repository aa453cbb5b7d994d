r"""The GPU check: every row of shared/GPU.md's table ("The figures README's Performance table
should carry") on this machine, in one command, into one report.

  python -m experiments.benchmarks.gpu --prepare_only --data_dir=.tfds --out=/tmp/gpu  # beforehand
  python -m experiments.benchmarks.gpu --data_dir=.tfds --out=/tmp/gpu                 # on the GPU
  python -m experiments.benchmarks.gpu --dry_run --out=/tmp/gpu_dry      # anywhere: toy sizes

On a lent device machine, experiments/benchmarks/gpu_session.sh runs it as one call: the
carried wheels installed, its report and the rows' text files copied into the call's $OUT.

Each run is a child process of one of the existing programs, as a person types it: the main
job (experiments.brown), the benchmarks nnlm, lstm, vocab_scaling, vmapped, word2vec,
word2vec_loop, scale and dispatch, and experiments.table1 (experiments/benchmarks/gpu_runs.py
runs them). Each has its own time limit: one that runs past it is stopped (its process group
sent SIGTERM, then SIGKILL) and reported as 'timeout' with the last lines it
printed, and the next run starts. --budget_s bounds the whole check: a run gets at most what
is left of it, and once it is spent the remaining runs are skipped, so the check ends in time.
Every figure is read from the JSON report (or summary.json) that its program wrote
(experiments/benchmarks/gpu_report.py); each command line is printed as it starts. Writes
OUT/gpu.json and OUT/gpu.md; each run's files and its stdout/stderr are in OUT/rows/<run>/.

The settings GPU took, on one H200 (experiments/results/h200/): rows 1 to 6 420 s, row 7
102 s, row 8 164 s (one epoch each); row 6 has since trained the recipes' 5 epochs, not 1
(untimed there). --budget_s=540 ends the check in 9 minutes whatever the
machine, so a 15-minute lease takes two calls: --rows=1,2,6,3,4,5 then --rows=8,7 (--rows
runs its rows in the order given: an issue's own first) with --budget_s=290. Where a
row's full size would not fit, it is smaller:
- row 4 leaves out the tree head: building its tree over 4M words (nplm.heads.binary_tree) takes
  ~70 s of Python per optimizer (measured on a 2.5 GHz Xeon core, Huffman or balanced alike);
- row 7 generates and prepares its corpus within the run (a GPU machine without network has
  only what is carried to it, and 100M tokens are 337 MiB of text), each at about 1 s per
  million tokens on a CPU core (measured: 2M tokens generated in 2 s, prepared in 3.4 s), so it
  times one epoch of 10M tokens, not 100M;
- row 8 trains each network for --row8_epochs=1 epoch (seconds per epoch, and the ratio to KN5
  after it); --rows=8 --row8_epochs=0 --budget_s=1300 trains them to early stopping (the goal:
  each under 10 minutes). Table 1's runner trains its recipes' CPU sizes only, so row 8 trains
  the recipes zaremba_medium (two layers of 650, SGD; to early stopping with --patience=2, its
  39 epochs being over 10 minutes) and transformer_gpu with experiments.brown, and its ratio is
  test perplexity over KN5's from `table1 --rows=KN5` (Table 1's test / KN5 column) on the
  same corpus. Not the recipe lstm widened to 650: AdamW moves the tied rows of words not yet
  seen together, and its evaluation scores them all high (experiments/results/h200/).
The PyTorch comparisons run under torch.compile(model) (inductor) beside eager on the GPU.
Row 6 runs twice, gensim on every core each time: nplm on the device JAX picks (a GPU: XLA's
update loop, --chunk_positions=0: the largest chunk that trains stably, a few dozen chunks a
step where the recipes' 32 positions make 1,024), then with JAX_PLATFORMS=cpu (the C++
update's threads on every core, the recipes' chunks); 5 epochs each, the recipes'. Then
word2vec_loop times XLA's loop alone on the GPU at 32, 128 and 512 positions a chunk, to the
last filled chunk and over every chunk (a count XLA knows), to say where its time goes.
Row 7 trains 8 updates a call (--updates_per_call=8: one call where the loop made eight;
the H200's 820,677 tokens/s were one a call) and is followed by 7b
(experiments.benchmarks.dispatch): row 7's update alone, one a call against 8 and 32
scanned in one call, with the host's time in a call: whether the 2M tokens/s the row asks
of a 1.2 ms update is the host's to give.

--dry_run runs every row at toy sizes (DRY) on the CPU (JAX_PLATFORMS=cpu, no CUDA device for
PyTorch, XLA's LLVM optimizations off as in the tests: compiling is most of a toy run): the
same programs, the same report, in about 3 minutes on 2 cores, nearly all of it 17 fresh
Pythons importing JAX and compiling. It downloads nothing: the programs that read Brown run
through tests/readme_substitutions.py, which puts the tiny fixture tests/fixtures/brown_tiny in
Brown's place (prepared in OUT/tfds), as the README tests do. torch.compile uses the aot_eager
backend there: its graph capture without inductor's C++ compile (~45 s for the NNLM on a CPU).
"""

import datetime
import json
import os
import shlex
import sys
import time
from pathlib import Path

from absl import app, flags

from experiments.benchmarks import gpu_report
from experiments.benchmarks.gpu_runs import ROOT, Run, last_lines, run_all, run_child
from nplm.cli import run_experiment, stop_interrupted
from nplm.files import write_json_atomically, write_text_atomically


# The settings of each mode: the GPU's, and the dry run's toy sizes of the same runs.
# Rows 1 and 7 profile 50 updates of their run (nplm train --profile_steps: profile.txt).
GPU = {'brown': ['--profile_steps=50'], 'nnlm_batches': (256, 8192),
       'nnlm': ['--steps=20', '--repeats=5'],
       'torch_compile': 'inductor', 'lstm_recipes': ('lstm', 'zaremba_medium'),
       'lstm': ['--steps=20', '--repeats=5'],
       'vocab': ['--vocab_sizes=10000,1000000,4000000', '--heads=softmax,class,is,nce,adaptive',
                 '--optimizers=sgd,lazy_adam', '--steps=10', '--repeats=3'],
       'vmapped_batches': (256, 32), 'vmapped': ['--models=1,16', '--steps=20', '--repeats=5'],
       # The recipes' 5 epochs (one is half a second of updates); on the GPU the largest
       # stable chunk, the recipes' (a CPU cache's) on the CPU.
       'word2vec': ['--seeds=0'],
       'word2vec_platforms': (('', ['--chunk_positions=0']), ('cpu', [])),
       'word2vec_loop': ['--configs=cbow_ns,skipgram_hs', '--chunks=32,128,512'],
       'scale': ['--tokens=10000000', '--types=300000', '--baseline_tokens=1000000',
                 '--baseline_types=10000', '--heads=nce', '--batch_size=1024',
                 # 8 updates a call (the loop's --updates_per_call; 7b: against one a call).
                 '--train_flags=--profile_steps=50,--updates_per_call=8'],
       'dispatch': [],
       'transformer': [], 'lstm650': [],
       # About 1.5 times each run's wall on an H200 (experiments/results/h200/), at least 45 s;
       # row 1's more for its profile (row 2's four profiles fit in its margin).
       'limits': {'1': 75, '2a': 75, '2b': 85, '3a': 45, '3b': 45, '4': 160, '5a': 70,
                  '5b': 70, '6a': 90, '6b': 90, '6c': 60, '7': 155, '7b': 60, '8a': 45, '8b': 90,
                  '8c': 175}}
# A dry run times each program once: its second batch (rows 2 and 5) would run the same
# command with another number, and two of word2vec's four recipes cover both models and both
# outputs; process start-up and compiling, not the toy sizes, are most of its time.
# Row 1 at batch 32: the tiny fixture's 420 training tokens are 14 updates (2 at 256), its
# profile's 2 among them.
DRY = {'brown': ['--epochs=1', '--batch_size=32', '--log_every=2', '--profile_steps=2'],
       'nnlm_batches': (8,),
       'nnlm': ['--steps=2', '--repeats=1', '--matmul_size=64'], 'torch_compile': 'aot_eager',
       'lstm_recipes': ('lstm_toy', 'zaremba_medium_toy'), 'lstm': ['--steps=1', '--repeats=1'],
       # Two heads, one optimizer: each point compiles each head's step twice.
       'vocab': ['--vocab_sizes=100,300', '--heads=softmax,nce', '--optimizers=lazy_adam',
                 '--steps=2', '--repeats=1', '--tokens=2000', '--batch_size=16',
                 '--num_samples=8'],
       'vmapped_batches': (8,), 'vmapped': ['--models=1,2', '--steps=2', '--repeats=1'],
       'word2vec_platforms': (('', ['--chunk_positions=0']),),
       'word2vec': ['--seeds=0', '--epochs=1', '--configs=cbow_hs_toy,skipgram_ns_toy'],
       'word2vec_loop': ['--configs=cbow_ns', '--chunks=8', '--batch_size=64', '--steps=1',
                         '--repeats=1'],
       'scale': ['--tokens=20000', '--types=300', '--baseline_tokens=5000',
                 '--baseline_types=100', '--heads=nce', '--batch_size=64',
                 '--matmul_size=128', '--train_flags=--profile_steps=2,--updates_per_call=4'],
       'dispatch': ['--vocab_size=300', '--batch_size=64', '--steps=8', '--repeats=1',
                    '--tokens=2000', '--steps_per_call=4,8'],
       'transformer': ['--order=9', '--feature_size=16', '--hidden_size=32', '--num_layers=1',
                       '--num_heads=2', '--batch_size=4', '--eval_batch_size=64'],
       'lstm650': ['--feature_size=16', '--hidden_size=16'],
       'limits': dict.fromkeys(['1', '2a', '2b', '3a', '3b', '4', '5a', '5b', '6a', '6b', '6c',
                                '7', '7b', '8a', '8b', '8c'], 120)}
# The dry run's recipes (written into OUT/recipes): each a recipe with toy sizes.
TOY_RECIPES = {f'{name}_toy': (name, ['--feature_size=16', '--hidden_size=16'])
               for name in ('lstm', 'zaremba_medium')}
TOY_RECIPES.update({f'{name}_toy': (name, ['--feature_size=16', '--batch_size=64'])
                    # A batch of 64: several steps, some of them timed.
                    for name in ('cbow_hs', 'cbow_ns', 'skipgram_hs', 'skipgram_ns')})
DRY_ENVIRONMENT = {'JAX_PLATFORMS': 'cpu', 'CUDA_VISIBLE_DEVICES': '',
                   'XLA_FLAGS': '--xla_backend_optimization_level=0'}

# Run in a child before the rows: what the machine has, and Brown prepared (or prepared now).
PROBE = r'''
import json, sys
import jax, jaxlib
devices = jax.devices()
found = {'device_kind': devices[0].device_kind, 'platform': devices[0].platform,
         'device_count': len(devices), 'jax': jax.__version__, 'jaxlib': jaxlib.__version__}
for name in ('torch', 'gensim'):
  try:
    found[name] = __import__(name).__version__
  except (ImportError, OSError) as error:  # OSError: a torch whose CUDA libraries fail to load.
    found[name], found[name + '_error'] = None, str(error)
if found['torch']:
  import torch
  found['torch_cuda'] = torch.cuda.is_available()
from nplm.data import load_corpus
from nplm.data.brown import Brown
data_dir = sys.argv[1] or None
if sys.argv[2] == 'prepare' and not Brown(data_dir=data_dir).is_prepared():
  load_corpus(data_dir=data_dir)
found['brown_prepared'] = Brown(data_dir=data_dir).is_prepared()
print(json.dumps(found))
'''


def plan(settings: dict, out: Path, data_dir: str, dry_run: bool, row8_epochs: int) -> list:
  """Every run of the check, in GPU.md's order, with the settings of its mode."""
  python = [sys.executable]
  # In a dry run, Brown is the tiny fixture (tests/readme_substitutions.py).
  brown = python + ['-m', 'tests.readme_substitutions'] if dry_run else python
  rows = out / 'rows'
  data = f'--data_dir={data_dir}'
  limit = settings['limits']
  compile_flag = f'--torch_compile={settings["torch_compile"]}'
  runs = [Run('1', 1, 'the main job', brown + ['-m', 'experiments.brown', data,
                                               f'--workdir={rows / "1" / "run"}',
                                               *settings['brown']],
              limit['1'], gpu_report.main_job, ('brown',))]
  for run_id, batch in zip(('2a', '2b'), settings['nnlm_batches']):
    runs.append(Run(run_id, 2, f'NNLM step, batch {batch}',
                    brown + ['-m', 'experiments.benchmarks.nnlm', data, f'--batch_size={batch}',
                             compile_flag, *settings['nnlm'], f'--out={rows / run_id / "nnlm"}',
                             f'--programs_dir={rows / run_id / "programs"}'],
                    limit[run_id], gpu_report.nnlm, ('brown',)))
  for run_id, recipe in zip(('3a', '3b'), settings['lstm_recipes']):
    recipe = out / 'recipes' / recipe if recipe in TOY_RECIPES else recipe
    runs.append(Run(run_id, 3, f'LSTM step, recipe {Path(recipe).name}',
                    brown + ['-m', 'experiments.benchmarks.lstm', data,
                             f'--flagfile_name={recipe}', compile_flag, *settings['lstm'],
                             f'--out={rows / run_id}'],
                    limit[run_id], gpu_report.lstm, ('brown',)))
  runs.append(Run('4', 4, 'step time against the vocabulary size',
                  python + ['-m', 'experiments.benchmarks.vocab_scaling', *settings['vocab'],
                            f'--out={rows / "4" / "vocab_scaling"}'],
                  limit['4'], gpu_report.vocab_scaling))
  for run_id, batch in zip(('5a', '5b'), settings['vmapped_batches']):
    runs.append(Run(run_id, 5, f'vmapped MLP9s, batch {batch}',
                    brown + ['-m', 'experiments.benchmarks.vmapped', data, f'--batch_size={batch}',
                             *settings['vmapped'], f'--out={rows / run_id / "vmapped"}'],
                    limit[run_id], gpu_report.vmapped, ('brown',)))
  # nplm on the device JAX chooses (XLA's update loop on a GPU), then on every CPU core (the
  # C++ update's threads), against gensim's workers on the same cores.
  for run_id, (platform, chunks) in zip(('6a', '6b'), settings['word2vec_platforms']):
    runs.append(Run(run_id, 6, 'word2vec against gensim'
                    + (f', nplm with JAX_PLATFORMS={platform}' if platform else ''),
                    brown + ['-m', 'experiments.benchmarks.word2vec', data,
                             *settings['word2vec'], *chunks, f'--out={rows / run_id}'],
                    limit[run_id], gpu_report.word2vec, ('brown', 'gensim'),
                    # word2vec.py names a run's workdir by its recipe: toys by name, from here.
                    out / 'recipes' if dry_run else ROOT,
                    {'JAX_PLATFORMS': platform} if platform else {}))
  runs.append(Run('6c', 6, "word2vec's update as XLA's loop, by chunk and loop form",
                  python + ['-m', 'experiments.benchmarks.word2vec_loop',
                            *settings['word2vec_loop'], f'--out={rows / "6c" / "word2vec_loop"}'],
                  limit['6c'], gpu_report.word2vec_loop))
  runs.append(Run('7', 7, 'an epoch of a generated corpus, sampled head',
                  python + ['-m', 'experiments.benchmarks.scale', *settings['scale'],
                            '--epochs=1', '--max_steps=0', f'--out={rows / "7"}'],
                  limit['7'], gpu_report.scale))
  runs.append(Run('7b', 7, "row 7's update: one a call against K scanned in one call",
                  python + ['-m', 'experiments.benchmarks.dispatch', *settings['dispatch'],
                            f'--out={rows / "7b" / "dispatch"}'],
                  limit['7b'], gpu_report.dispatch))
  runs.append(Run('8a', 8, 'KN5, the ratios\' reference',
                  brown + ['-m', 'experiments.table1', '--rows=KN5', data,
                           f'--workdir={rows / "8a"}'], limit['8a'], gpu_report.kn5,
                  ('brown',)))
  # Zaremba et al.'s medium LSTM, 2 x 650. The shorter run first: a check cut short by its
  # budget keeps it.
  lstm650 = ['--flagfile=zaremba_medium', *settings['lstm650'],
             f'--epochs={row8_epochs}' if row8_epochs else '--patience=2']
  toy = ' (toy sizes)' if dry_run else ''
  networks = [('8b', f'LSTM, recipe zaremba_medium (2 layers of 650){toy}', lstm650),
              ('8c', f'Transformer, recipe transformer_gpu{toy}',
               ['--flagfile=transformer_gpu', *settings['transformer'],
                *([f'--epochs={row8_epochs}'] if row8_epochs else [])])]
  for run_id, name, recipe in networks:
    # The networks to early stopping take up to the goal's 10 minutes each.
    runs.append(Run(run_id, 8, name,
                    brown + ['-m', 'experiments.brown', *recipe, data, '--eval_splits=test',
                             f'--workdir={rows / run_id / "run"}'],
                    limit[run_id] if row8_epochs else 660,
                    gpu_report.network, ('brown',)))
  return runs


def chosen(runs: list, rows: list) -> list:
  """The runs of `rows` (GPU.md's numbers, as strings), in the order given: a short lease
  takes an issue's own rows first."""
  return sorted((run for run in runs if str(run.row) in rows),
                key=lambda run: rows.index(str(run.row)))  # Stable: 2a before 2b.


def write_toy_recipes(directory: Path) -> None:
  """TOY_RECIPES as files: lstm.py and word2vec.py take recipes as they stand."""
  directory.mkdir(parents=True, exist_ok=True)
  for name, (recipe, changes) in TOY_RECIPES.items():
    lines = [f'# {recipe} at toy sizes: experiments/benchmarks/gpu.py --dry_run',
             f'--flagfile={recipe}', *changes]
    (directory / name).write_text('\n'.join(lines) + '\n')


def probe(out: Path, data_dir: str, env: dict, dry_run: bool, prepare: bool) -> dict:
  """What the machine has (in a child: the parent must not take the GPU's memory)."""
  prefix = ['-m', 'tests.readme_substitutions'] if dry_run else []
  argv = [sys.executable, *prefix, '-c', PROBE, data_dir, 'prepare' if prepare else 'check']
  result = run_child(argv, 1800 if prepare else 120, out / 'probe', env)
  if result['status'] != 'ok':
    sys.exit(f'error: the probe of this machine {result["status"]}: {result["reason"]} '
             f'(its output: {out / "probe"})')
  return json.loads(last_lines(out / 'probe' / 'stdout.txt', 1)[0])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
  FLAGS = flags.FLAGS
  out = Path(FLAGS.out).resolve()
  dry_run = FLAGS.dry_run
  data_dir = str(out / 'tfds') if dry_run else str(Path(FLAGS.data_dir).resolve())
  # The checkout on the path: a child may run elsewhere (a dry run's word2vec).
  path = os.pathsep.join(p for p in (str(ROOT), os.environ.get('PYTHONPATH')) if p)
  env = {**os.environ, **(DRY_ENVIRONMENT if dry_run else {}), 'PYTHONPATH': path}
  unknown = sorted(set(FLAGS.rows) - {str(n) for n in range(1, 9)})
  if unknown:
    raise app.UsageError(f'--rows: no row {", ".join(unknown)} in GPU.md\'s table (1 to 8)')
  started = time.monotonic()
  # A dry run prepares its tiny Brown; a GPU run only checks (it has no network).
  machine = probe(out, data_dir, env, dry_run, prepare=dry_run or FLAGS.prepare_only)
  print(f'{machine["device_count"]} × {machine["device_kind"]} ({machine["platform"]}), '
        f'jax {machine["jax"]}, torch {machine["torch"]}, gensim {machine["gensim"]}; Brown '
        f'prepared in {data_dir}: {machine["brown_prepared"]}', flush=True)
  if FLAGS.prepare_only:
    return
  if dry_run:
    write_toy_recipes(out / 'recipes')
  runs = chosen(plan(DRY if dry_run else GPU, out, data_dir, dry_run, FLAGS.row8_epochs),
                FLAGS.rows)
  results = run_all(runs, out, env, machine, data_dir, started + FLAGS.budget_s)
  command = [sys.executable, '-m', 'experiments.benchmarks.gpu', *sys.argv[1:]]
  report = {'date': datetime.datetime.now().astimezone().isoformat(timespec='seconds'),
            'machine': machine, 'dry_run': dry_run, 'data_dir': data_dir,
            'environment': DRY_ENVIRONMENT if dry_run else {}, 'budget_s': FLAGS.budget_s,
            'seconds': time.monotonic() - started, 'command': shlex.join(command),
            'runs': results}
  write_json_atomically(out / 'gpu.json', report)
  write_text_atomically(out / 'gpu.md', gpu_report.format_report(report))
  counts = {s: sum(r['status'] == s for r in results) for s in ('ok', 'failed', 'timeout',
                                                                'interrupted', 'skipped')}
  print(f'Wrote {out / "gpu.md"} and gpu.json in {report["seconds"]:.0f} s: '
        + ', '.join(f'{n} {s}' for s, n in counts.items() if n or s != 'interrupted'))
  if counts['interrupted']:
    stop_interrupted('Interrupted (Ctrl-C): the report holds the rows run before it; rerun '
                     'the others with --rows')


if __name__ == '__main__':
  flags.DEFINE_string('out', None, 'Directory for gpu.json, gpu.md and each run\'s files.',
                      required=True)
  flags.DEFINE_string('data_dir', '.tfds', 'TFDS data dir holding the prepared Brown corpus '
                      '(--prepare_only prepares it; a dry run uses OUT/tfds instead).')
  flags.DEFINE_bool('dry_run', False, 'Every run at toy sizes on the CPU, Brown the tiny test '
                    'fixture: the same programs and report, in a few minutes.')
  flags.DEFINE_bool('prepare_only', False, 'Only prepare Brown in --data_dir (downloading it: '
                    'needs network) and print what this machine has.')
  flags.DEFINE_list('rows', [str(n) for n in range(1, 9)], 'GPU.md rows to run (1 to 8), in '
                    'this order.')
  flags.DEFINE_integer('row8_epochs', 1, 'Row 8: at most this many epochs per network (0: '
                       'their recipes\' own, to early stopping: up to 10 minutes each, so '
                       'raise --budget_s).', lower_bound=0)
  flags.DEFINE_float('budget_s', 540, 'Seconds for the whole check: a run is stopped when '
                     'they are spent, and those after it are skipped.')
  run_experiment(main)
