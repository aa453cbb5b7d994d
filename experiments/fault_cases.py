"""The failure cases of experiments.fault_injection --mode=cases: damaged checkpoints, readers
against a trainer, two trainers, divergence, one-line errors and exit statuses, each run
against a checkout (the current one, or an older commit for the before/after table)."""

import collections
import json
import os
import shutil
import signal
import time
from pathlib import Path

import numpy as np
from absl import flags

from experiments.fault_harness import (STEP_LINE, Child, compare, differing_leaves,
                                       flip_bytes, label, markdown, newest, nplm, run, save,
                                       summary_of, tail, traceback, truncate)

FLAGS = flags.FLAGS


def write_corpus(directory: Path, lines: dict, seed: int, types: int = 300) -> None:
  """<split>.txt of `lines[split]` lines of 3-15 Zipf-distributed words 'w0', 'w1', ..."""
  rng = np.random.default_rng(seed)
  p = 1.0 / np.arange(1, types + 1)
  directory.mkdir(parents=True, exist_ok=True)
  for split, count in lines.items():
    words, lengths = rng.choice(types, (count, 15), p=p / p.sum()), rng.integers(3, 16, count)
    (directory / f'{split}.txt').write_text(''.join(
        ' '.join(f'w{w}' for w in row[:n]) + '\n' for row, n in zip(words, lengths)))


CASE_FLAGS = {'model': 'nnlm', 'order': 3, 'feature_size': 8, 'hidden_size': 16,
              'batch_size': 64, 'epochs': 3, 'patience': 3, 'checkpoint_every': 50,
              'log_every': 25}  # 376 updates an epoch: about 8 s a run.


class Cases:
  """The failure cases against one checkout, on a corpus of their own in OUT."""

  def __init__(self, out: Path):
    self.out, self.checkout, self.rows = out, FLAGS.checkout, []
    self.corpus, self.data = out / 'corpus', out / 'data'
    write_corpus(self.corpus, {'train': 2400, 'valid': 300, 'test': 300}, FLAGS.seed)
    self.common = {'dataset': f'text:{self.corpus}', 'data_dir': self.data, **CASE_FLAGS}

  def train_argv(self, name: str, **flag_values) -> list[str]:
    values = {**self.common, 'workdir': self.out / name, **flag_values}
    return nplm('train', *(f'--{k}={v}' for k, v in values.items()))

  def train(self, name: str, **flag_values) -> dict:
    return run(self.train_argv(name, **flag_values), self.checkout)

  def row(self, case: str, argv, result: dict, outcome: str) -> None:
    """A row of the table (argv shown without the common flags), its output in logs/."""
    common = {f'--{k}={v}' for k, v in self.common.items()}
    command = argv if isinstance(argv, str) else ' '.join(
        ['nplm'] + [a for a in argv[3:] if a not in common]).replace(str(self.out), 'OUT')
    (self.out / 'logs').mkdir(exist_ok=True)
    (self.out / 'logs' / f'{len(self.rows):02d}.txt').write_text('\n'.join(
        [case, command, f'rc {result["rc"]}', '--- stdout', result['stdout'], '--- stderr',
         *result['stderr']]) + '\n')
    self.rows.append({'case': case, 'command': command, 'rc': result['rc'],
                      'stderr tail': tail(result), 'Traceback': traceback(result),
                      'outcome': outcome})
    print(json.dumps(self.rows[-1]), flush=True)

  def score(self, name: str) -> tuple[list[str], dict]:
    argv = nplm('score', f'--workdir={self.out / name}', 'w0 w1 w2 w3')
    return argv, run(argv, self.checkout)


def total_line(result: dict) -> str:
  return next((l.strip() for l in result['stdout'].splitlines() if 'total log p' in l),
              'no total printed')


DAMAGE = {'1 newest checkpoint: 1 byte in 64 flipped': flip_bytes,
          '3a newest checkpoint: data file truncated': truncate,
          '3b newest checkpoint: state/_METADATA deleted':
              lambda d: (d / 'state' / '_METADATA').unlink(),
          '3c newest checkpoint: state/ deleted': lambda d: shutil.rmtree(d / 'state')}


def case_damaged_latest(c: Cases) -> None:
  """1, 3: an interrupted run's newest checkpoint damaged, then the run resumed."""
  result = c.train('interrupted', max_steps=500)
  c.row('1, 3 setup: a run stopped by --max_steps', c.train_argv('interrupted', max_steps=500),
        result, f'newest checkpoint: {newest(c.out / "interrupted").name}')
  for index, (case, damage) in enumerate(DAMAGE.items()):
    workdir = c.out / f'damaged_latest{index}'
    shutil.copytree(c.out / 'interrupted', workdir)
    # The stopped run's summary: only the rerun's may be compared.
    (workdir / 'summary.json').unlink(missing_ok=True)
    damage(newest(workdir))
    hit = differing_leaves(newest(c.out / 'interrupted'), newest(workdir))
    result = run(c.train_argv(workdir.name), c.checkout)
    aside = sorted(p.name for p in (workdir / 'damaged').glob('*'))
    best = differing_leaves(newest(c.out / 'reference', 'best'), newest(workdir, 'best'),
                            'params') if summary_of(workdir) else '-'
    c.row(case + ', rerun to the end', c.train_argv(workdir.name), result,
          f'numbers {compare(summary_of(workdir), c.reference)}; best params differing: '
          f'{best}; damage reads as: {hit}; moved aside: {aside or "none"}')


def case_damaged_best(c: Cases) -> None:
  """2: a finished run's best checkpoint damaged: score it, rerun it, score again."""
  workdir = c.out / 'damaged_best'
  shutil.copytree(c.out / 'reference', workdir)
  flip_bytes(newest(workdir, 'best'))
  hit = differing_leaves(newest(c.out / 'reference', 'best'), newest(workdir, 'best'))
  before = (workdir / 'summary.json').read_bytes()
  argv, result = c.score(workdir.name)
  c.row('2 best/ damaged: score', argv, result, f'{_scored(c, result)}; damage reads as: {hit}')
  result = c.train(workdir.name)
  c.row('2 best/ damaged: rerun the finished run', c.train_argv(workdir.name), result,
        'summary.json byte-identical' if (workdir / 'summary.json').read_bytes() == before
        else f'summary.json rewritten, numbers {compare(summary_of(workdir), c.reference)}')
  argv, result = c.score(workdir.name)
  c.row('2 best/ damaged: score after the rerun', argv, result, _scored(c, result))


def _scored(c: Cases, result: dict) -> str:
  line = total_line(result)
  same = 'as undamaged' if line == c.reference_score else f'undamaged: {c.reference_score}'
  return f'{line} ({"nan!" if "nan" in line.lower() else same})'


def case_readers(c: Cases) -> None:
  """4: score and generate in a loop while a trainer checkpoints every update."""
  argv = c.train_argv('readers', checkpoint_every=1, max_steps=150, epochs=2)
  trainer, checkpoints = Child(argv, c.checkout), c.out / 'readers' / 'checkpoints'
  trainer.wait_until(lambda: checkpoints.is_dir() and any(n.isdigit()
                                                          for n in os.listdir(checkpoints)))
  codes, failures, tracebacks, reads = collections.Counter(), set(), 0, 0
  while trainer.running() and trainer.elapsed() < FLAGS.timeout:
    program = ('score', 'w0 w1 w2') if reads % 2 == 0 else ('generate', '--length=5')
    result = run(nplm(program[0], f'--workdir={c.out / "readers"}', program[1]), c.checkout)
    reads, codes[result['rc']] = reads + 1, codes[result['rc']] + 1
    tracebacks += traceback(result)
    failures |= {tail(result)[-100:]} if result['rc'] != 0 else set()
  result = trainer.finish()
  status = (summary_of(c.out / 'readers') or {}).get('status', 'no summary.json')
  c.row('4 a trainer, readers looping', argv, result, f'trainer finished: {status}')
  c.row('4 the readers', 'score, generate, alternating',
        {'rc': dict(codes), 'stdout': '', 'stderr': sorted(failures)},
        f'{reads} reads, {tracebacks} with a Traceback')


def case_two_trainers(c: Cases) -> None:
  """5: two trainers started on one workdir at once."""
  argv = c.train_argv('two_trainers')
  first, second = Child(argv, c.checkout), Child(argv, c.checkout)
  results = [first.finish(), second.finish()]
  numbers = compare(summary_of(c.out / 'two_trainers'), c.reference)
  for which, result in zip(('first', 'second'), results):
    c.row(f'5 two trainers, one workdir: {which}', argv, result, f'numbers {numbers}')


def case_divergence(c: Cases) -> None:
  """6: a loss that explodes."""
  for optimizer, rate in (('sgd', 1e9), ('adamw', 1e3)):
    argv = c.train_argv(f'{optimizer}_{rate:g}', optimizer=optimizer, learning_rate=rate)
    result, summary = run(argv, c.checkout), summary_of(c.out / f'{optimizer}_{rate:g}')
    c.row(f'6 divergence: --optimizer={optimizer} --learning_rate={rate:g}', argv, result,
          f'summary: {summary["status"]}, test ppl {summary["test_ppl"]}' if summary
          else 'no summary.json')


def case_errors(c: Cases) -> None:
  """7: mistakes that should be one line each."""
  (c.out / 'a_file').write_text('not a directory\n')
  text = (c.out / 'reference' / 'run.json').read_text()
  (c.out / 'half_run_json').mkdir()
  (c.out / 'half_run_json' / 'run.json').write_text(text[:len(text) // 2])
  shutil.copytree(c.corpus, c.out / 'corpus_bad')
  with open(c.out / 'corpus_bad' / 'train.txt', 'ab') as f:
    f.write(b'w1 \xff\xfe\x80 w2\n')
  for case, flag_values in (
      ('7 --workdir is a file', {'workdir': c.out / 'a_file'}),
      ('7 --workdir under a file', {'workdir': c.out / 'a_file' / 'run'}),
      ('7 run.json truncated to half', {'workdir': c.out / 'half_run_json'}),
      ('7 non-UTF-8 corpus file', {'dataset': f'text:{c.out / "corpus_bad"}',
                                   'workdir': c.out / 'bad_utf8'}),
      ('7 --train_tokens too large for text:FILE', {
          'dataset': f'text:{c.corpus / "train.txt"}', 'train_tokens': 10 ** 8,
          'valid_tokens': 100, 'workdir': c.out / 'too_large'})):
    argv = c.train_argv('unused', **flag_values)
    c.row(case, argv, run(argv, c.checkout), '')
  _damaged_prepared(c)
  _interrupted_final_evaluation(c)
  bare = c.out / 'no_checkpoints'
  bare.mkdir()
  for name in ('run.json', 'vocab.txt'):
    shutil.copy(c.out / 'reference' / name, bare / name)
  argv, result = c.score(bare.name)
  stray = any('Exception in thread' in l or 'Traceback' in l for l in result['stderr'])
  c.row('7 score: run.json and vocab.txt, no checkpoints', argv, result,
        'stray thread traceback' if stray else 'no stray traceback')


def _damaged_prepared(c: Cases) -> None:
  shutil.copytree(c.data, c.out / 'data_damaged')
  deleted = list((c.out / 'data_damaged' / 'nplm_tokens').rglob('dataset_info.json'))
  for path in deleted:
    path.unlink()
  argv = c.train_argv('damaged_prepared', data_dir=c.out / 'data_damaged')
  result = run(argv, c.checkout)
  c.row('7 prepared TFDS dir: dataset_info.json deleted', argv, result,
        f'{len(deleted)} deleted, {sum(p.exists() for p in deleted)} back after; numbers '
        f'{compare(summary_of(c.out / "damaged_prepared"), c.reference)}')


def _interrupted_final_evaluation(c: Cases) -> None:
  """Ctrl-C right after 'final evaluation:'; a checkout that logs no such line gets it 0.3 s
  after the last epoch's validation line (small eval batches make the evaluation last)."""
  argv = c.train_argv('sigint_final', eval_batch_size=8)
  loops = [Path(c.checkout) / name for name in ('nplm/train.py', 'nplm/trainer.py', 'nplm/training/loop.py')]
  logged = any('final evaluation' in loop.read_text() for loop in loops if loop.exists())
  child = Child(argv, c.checkout)
  if logged:
    child.wait_until(lambda: child.line('final evaluation') is not None)
    when = 'right after the final evaluation line'
  else:
    last = rf'epoch {CASE_FLAGS["epochs"]}\)?\s+valid perplexity'
    child.wait_until(lambda: child.line(last) is not None) and child.sleep(0.3)
    when = '0.3 s after the last valid perplexity line (this checkout logs no final evaluation)'
  child.send(signal.SIGINT)
  result, summary = child.finish(), summary_of(c.out / 'sigint_final')
  c.row('7 Ctrl-C in the final evaluation', argv, result,
        f'sent {when}; summary.json: {summary["status"] if summary else "none"}')


def case_exits(c: Cases) -> None:
  """8: generate at a tiny temperature, SIGTERM's exit status, a killed preparation, a bad
  flagfile line."""
  argv = nplm('generate', f'--workdir={c.out / "reference"}', '--temperature=1e-39',
              '--no_unk', '--length=50', '--seed=0')
  result = run(argv, c.checkout)
  c.row('8 generate --temperature=1e-39 --no_unk', argv, result,
        f'<unk> in output: {"<unk>" in result["stdout"]}; output: {result["stdout"][:40]!r}')
  argv = c.train_argv('sigterm')
  child = Child(argv, c.checkout)
  child.wait_until(lambda: child.line(STEP_LINE.pattern) is not None)
  child.send(signal.SIGTERM)
  c.row('8 SIGTERM mid-training', argv, child.finish(), 'sent after the first progress line')
  _killed_preparation(c)
  (c.out / 'bad.flags').write_text('--epochs=1\nepochs=2\n')
  argv = c.train_argv('bad_flagfile') + [f'--flagfile={c.out / "bad.flags"}']
  result = run(argv, c.checkout)
  c.row('8 flagfile with a line without its --: epochs=2', argv, result,
        f'{len(result["stderr"])} stderr lines')


def _killed_preparation(c: Cases) -> None:
  """A text:FILE of 2M words whose preparation is killed -9 once its train split is written
  (valid and test not yet), then prepared again by a rerun."""
  big, data = c.out / 'big', c.out / 'data_prep'
  write_corpus(big, {'train': 200_000}, FLAGS.seed + 1)
  argv = c.train_argv('prep', dataset=f'text:{big / "train.txt"}', data_dir=data,
                      max_steps=1, eval_batch_size=8192)
  child = Child(argv, c.checkout)
  midway = child.wait_until(lambda: child.line('prepared train') is not None)
  child.send(signal.SIGKILL)
  child.finish()
  incomplete = lambda: [str(p.relative_to(data)) for p in data.rglob('incomplete.*')]
  during, result = incomplete(), run(argv, c.checkout)
  c.row('8 preparation killed -9, then rerun', argv, result,
        f'killed after the train split: {midway}, incomplete.* then: {len(during)}; '
        f'left after the rerun: {incomplete() or "none"}')


CASES = (case_damaged_latest, case_damaged_best, case_readers, case_two_trainers,
         case_divergence, case_errors, case_exits)


# The modules of the later rounds' cases, each with its CASES: users' inputs, stops on a
# busy machine, run files, sweeps, frictions and bounds (issue 42).
CASE_MODULES = ('fault_inputs', 'fault_stops', 'fault_run_files', 'fault_sweeps',
                'fault_frictions', 'fault_bounds')


def chosen_cases() -> list:
  """Every case, or those --cases names (function names: case_stops,case_paths)."""
  import importlib  # Here: the modules read CASE_FLAGS and write_corpus from this one.
  cases = list(CASES) + [case for name in CASE_MODULES
                         for case in importlib.import_module(f'experiments.{name}').CASES]
  wanted = [name for name in FLAGS.cases.split(',') if name]
  unknown = set(wanted) - {case.__name__ for case in cases}
  if unknown:
    raise SystemExit(f'error: unknown --cases {", ".join(sorted(unknown))}; known: '
                     f'{", ".join(case.__name__ for case in cases)}')
  return [case for case in cases if not wanted or case.__name__ in wanted]


def cases_mode(out: Path) -> int:
  shutil.rmtree(out)  # Every case starts from nothing; main made OUT.
  out.mkdir(parents=True)
  c = Cases(out)
  result = c.train('reference')
  c.reference = summary_of(out / 'reference')
  c.row('reference (undamaged)', c.train_argv('reference'), result,
        f'{result["seconds"]} s; valid ppl {(c.reference or {}).get("valid_ppl")}')
  if c.reference is None:
    return 1
  c.reference_score = total_line(c.score('reference')[1])
  for case in chosen_cases():
    started = time.monotonic()
    try:
      case(c)
    except Exception as error:  # One broken case must not lose the others' rows.
      c.row(case.__doc__.split(':')[0], case.__name__, {'rc': '', 'stdout': '', 'stderr': []},
            f'harness error: {type(error).__name__}: {error}'[:200])
    print(f'{case.__name__}: {time.monotonic() - started:.0f} s', flush=True)
  columns = ['case', 'command', 'rc', 'stderr tail', 'Traceback', 'outcome']
  text = f'# failure cases against {label(c.checkout)}\n\n' + markdown(c.rows, columns)
  save(out, 'cases', text, c.rows)
  print(text)
  return 0
