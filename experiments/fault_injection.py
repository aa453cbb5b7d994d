r"""Fault injection: training killed at chosen moments, and damaged or misused workdirs.

  python -m experiments.fault_injection --mode=kills --out=/tmp/fi/kills        # 12 kill -9s
  python -m experiments.fault_injection --mode=kills --kills=4 --out=/tmp/fi/k4
  python -m experiments.fault_injection --mode=cases --out=/tmp/fi/cases
  git worktree add /tmp/old 36bc2e4     # the same cases against an older commit:
  python -m experiments.fault_injection --mode=cases --checkout=/tmp/old --out=/tmp/fi/old

Every program runs as `python -m nplm.cli ...` in --checkout (its cwd and PYTHONPATH), with
this interpreter, so the script measures whichever commit is checked out there.

--mode=kills: one uninterrupted reference run (OUT/reference), then the same command in
OUT/killed, started again and again, each start killed with SIGKILL at a moment of the next
kind in turn: `random` (0.1-0.5 of the reference's wall time after the start), `checkpoint`
(as soon as an Orbax temporary directory appears in checkpoints/ or best/, polled every
5 ms), `validation` (after the last progress line of an epoch, 0.3-0.95 of the time the
reference took from that line to the epoch's validation result: an estimate, as validation
logs no line when it starts) and `final_evaluation` (0-2 s after 'final evaluation:').
After --kills kills the command runs to completion; its summary.json (KEYS) and best
parameters are compared with the reference's. A moment that never comes (the run finished
first) makes that start a completion, compared likewise; if kills remain, the workdir is
moved aside (OUT/killed.N) and the kills go on in a fresh one. Exit status 1 if any
completion differs. Writes OUT/report.md and OUT/report.json.

--mode=cases: the failure cases of CASES on a generated text:DIR corpus and a tiny model,
each a row of OUT/cases.md and OUT/cases.json: the command, exit status, the end of stderr
(a traceback's exception line), whether it holds a Traceback, and what came of it; the whole
output of each row is in OUT/logs/. Every child has a --timeout; a case that breaks the
harness is a row saying so. Both modes copy their reports to --results.
"""

import json
import os
import random
import shlex
import shutil
import signal
import sys
import time
from pathlib import Path

from absl import flags, logging

from experiments.fault_cases import cases_mode
from experiments.fault_harness import (KEYS, STEP_LINE, VALID_LINE, Child, compare,
                                       differing_leaves, label, markdown, newest, nplm, save,
                                       summary_of, tail)
from nplm.cli import run_experiment

FLAGS = flags.FLAGS
ROOT = Path(__file__).resolve().parents[1]
flags.DEFINE_enum('mode', 'kills', ['kills', 'cases'], 'kills: kill -9 at chosen moments; '
                  'cases: damaged and misused workdirs.')
flags.DEFINE_string('checkout', str(ROOT), 'The nplm checkout whose programs are run.')
flags.DEFINE_string('out', 'runs/fault_injection', 'Workdirs, corpora and reports.')
flags.DEFINE_string('results', str(ROOT / 'experiments/results/fault_injection'),
                    'Where the reports are copied ("" = nowhere).')
flags.DEFINE_string('dataset', 'brown', 'kills: the --dataset of the runs.')
flags.DEFINE_string('data_dir', '', 'kills: the TFDS data dir (empty: the default).')
flags.DEFINE_string('train_flags', '--model=nnlm --order=5 --feature_size=16 '
                    '--hidden_size=32 --batch_size=256 --epochs=3 --patience=3 '
                    '--checkpoint_every=500 --log_every=250 --train_tokens=200000 '
                    '--valid_tokens=50000', 'kills: the model (25-60 s a run on 2 cores).')
flags.DEFINE_integer('kills', 12, 'kills: SIGKILLs to make before the final completion.')
flags.DEFINE_integer('seed', 0, 'Seeds the moments of the kills and the generated corpora.')
flags.DEFINE_string('cases', '', 'cases: the case functions to run, comma-separated '
                    '(e.g. case_stops,case_paths; empty: every case).')
flags.DEFINE_integer('timeout', 300, 'Seconds any one child may run before it is killed.')


# --- mode kills ---------------------------------------------------------------------------

def epoch_ends(reference: Child) -> dict[int, float]:
  """{step of an epoch's last progress line: seconds from it to the epoch's validation
  result} in the reference run: where the others can be caught validating."""
  ends, last = {}, None
  for t, l in reference.err:
    if (m := STEP_LINE.search(l)):
      last = (int(m.group(1)), t)
    elif VALID_LINE.search(l) and last:
      ends[last[0]] = t - last[1]
  return ends


def kill_at_random(child, rng, context) -> bool:
  return child.sleep(rng.uniform(0.1, 0.5) * context['wall'])


def kill_in_checkpoint(child, rng, context) -> bool:
  # Orbax writes a step into a temporary directory and renames it when complete.
  def writing():
    for name in ('checkpoints', 'best'):
      try:
        if any('.orbax-checkpoint-tmp' in n for n in os.listdir(context['workdir'] / name)):
          return True
      except FileNotFoundError:
        pass
    return False
  return child.wait_until(writing)


def kill_in_validation(child, rng, context) -> bool:
  ends = context['epoch_ends']
  def epoch_end():
    return next((int(m.group(1)) for _, l in child.err
                 if (m := STEP_LINE.search(l)) and int(m.group(1)) in ends), None)
  return (child.wait_until(lambda: epoch_end() is not None)
          and child.sleep(rng.uniform(0.3, 0.95) * ends[epoch_end()]))


def kill_in_final_evaluation(child, rng, context) -> bool:
  return (child.wait_until(lambda: child.line('final evaluation') is not None)
          and child.sleep(rng.uniform(0.0, 2.0)))


MOMENTS = {'random': kill_at_random, 'checkpoint': kill_in_checkpoint,
           'validation': kill_in_validation, 'final_evaluation': kill_in_final_evaluation}


def kills_mode(out: Path) -> int:
  extra = shlex.split(FLAGS.train_flags) + [f'--dataset={FLAGS.dataset}'] + (
      [f'--data_dir={FLAGS.data_dir}'] if FLAGS.data_dir else [])
  argv = lambda workdir: nplm('train', *extra, f'--workdir={workdir}')
  for path in [*out.glob('killed*'), out / 'reference']:
    shutil.rmtree(path, ignore_errors=True)
  reference_child = Child(argv(out / 'reference'), FLAGS.checkout)
  result = reference_child.finish()
  reference = summary_of(out / 'reference')
  if result['rc'] != 0 or reference is None:
    sys.exit(f'the reference run failed ({result["rc"]}): {result["stderr"][-5:]}')
  print(f'reference: {result["seconds"]} s, valid ppl {reference["valid_ppl"]}', flush=True)
  context = {'wall': result['seconds'], 'epoch_ends': epoch_ends(reference_child),
             'workdir': out / 'killed', 'reference': reference, 'out': out}
  rng, attempts, completions = random.Random(FLAGS.seed), [], []
  while True:
    kills = sum(a['killed'] for a in attempts)
    # Bounded: a moment that never comes must not start fresh workdirs forever.
    done = kills >= FLAGS.kills or len(attempts) >= 3 * FLAGS.kills + 4
    attempts.append(attempt(argv(context['workdir']), list(MOMENTS)[kills % len(MOMENTS)],
                            done, rng, context))
    if attempts[-1]['killed']:
      continue
    completions.append(completion(context, attempts))
    if done:
      return report_kills(out, reference, result, attempts, completions)
    completions[-1]['workdir'] = f'killed.{len(completions)}'  # Kills go on, fresh.
    context['workdir'].rename(out / completions[-1]['workdir'])


def attempt(argv, kind: str, final: bool, rng, context) -> dict:
  """One start in the killed workdir: killed at a moment of `kind` unless `final` or the
  moment never comes."""
  child = Child(argv, FLAGS.checkout)
  killed = not final and MOMENTS[kind](child, rng, context) and child.running()
  seconds, doing = child.elapsed(), child.err[-1][1] if child.err else ''
  if killed:
    child.proc.send_signal(signal.SIGKILL)
  result = child.finish()
  row = {'kind': 'completion' if final else kind, 'killed': killed,
         'seconds': round(seconds if killed else result['seconds'], 2), 'doing': doing[:120],
         'rc': result['rc']}
  if not killed:
    row['doing'] = 'ran to the end' + ('' if final else f' (no {kind} moment came)')
    row['tail'] = tail(result)
  print(json.dumps(row), flush=True)
  return row


def completion(context, attempts) -> dict:
  workdir, reference_dir = context['workdir'], context['out'] / 'reference'
  summary = summary_of(workdir)
  found = {'workdir': workdir.name, 'starts': len(attempts), 'rc': attempts[-1]['rc'],
           'kills before': sum(a['killed'] for a in attempts),
           'summary': compare(summary, context['reference']),
           'best params differing': differing_leaves(newest(reference_dir, 'best'),
                                                     newest(workdir, 'best'), 'params')
           if summary else '', 'values': {k: (summary or {}).get(k) for k in KEYS}}
  print(json.dumps({k: found[k] for k in ('workdir', 'rc', 'summary')}), flush=True)
  return found


def report_kills(out, reference, result, attempts, completions) -> int:
  rows, kills = [], 0
  for index, a in enumerate(attempts):
    kills += a['killed']
    rows.append({'kill': kills if a['killed'] else '-', 'kind': a['kind'],
                 'seconds after start': a['seconds'], 'trainer was doing': a['doing'],
                 'rc': a['rc'], 'rc of the next start': attempts[index + 1]['rc']
                 if a['killed'] and index + 1 < len(attempts) else ''})
  same = all(c['summary'] == 'identical' and c['rc'] == 0 and
             c['best params differing'] == 'none' for c in completions)
  values = '\n'.join(f'- {k}: reference {reference[k]!r}; killed runs '
                     f'{[c["values"][k] for c in completions]!r}' for k in KEYS)
  text = '\n\n'.join([
      f'# kill -9 at chosen moments ({label(FLAGS.checkout)})',
      f'`nplm train {FLAGS.train_flags} --dataset={FLAGS.dataset}`: reference run '
      f'{result["seconds"]} s; {kills} kills in {len(attempts)} starts.',
      markdown(rows, list(rows[0])), '## completions against the reference',
      markdown(completions, [c for c in completions[0] if c != 'values']), values,
      f'**{"identical" if same else "DIFFERENT"}**'])
  print(text)
  save(out, 'report', text, {'reference': {k: reference[k] for k in KEYS},
                             'attempts': attempts, 'completions': completions,
                             'identical': same})
  return 0 if same else 1


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # Orbax, when it reads checkpoints, logs at INFO.
  out = Path(FLAGS.out).absolute()
  out.mkdir(parents=True, exist_ok=True)
  FLAGS.checkout = str(Path(FLAGS.checkout).absolute())
  started = time.monotonic()
  status = kills_mode(out) if FLAGS.mode == 'kills' else cases_mode(out)
  print(f'wall time: {time.monotonic() - started:.0f} s')
  sys.exit(status)


if __name__ == '__main__':
  run_experiment(main)
