"""The GPU check's runner (experiments/benchmarks/gpu.py): each run a child process in a
session of its own, within its time limit and what is left of the check's budget; one past
it is stopped with whatever it started (SIGTERM, then SIGKILL) and reported as 'timeout'
with the last lines it printed; a Ctrl-C stops the run in progress the same way and skips
the rest, so that the report keeps what ran before it. Each result holds the figures read
from what its run wrote (a gpu_report reader)."""

import dataclasses
import os
import resource
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]  # The checkout: the children's directory.
MIN_START_S = 5  # A run with less than this left of the budget is not started.


@dataclasses.dataclass
class Run:
  """One child process of a row: `figures` (a gpu_report reader) reads what it wrote."""
  id: str
  row: int
  name: str
  argv: list
  limit: float
  figures: Callable = lambda rows, run_id, seconds: []
  needs: tuple = ()  # 'brown', 'gensim': what the probe must have found.
  cwd: Path = ROOT
  env: dict = dataclasses.field(default_factory=dict)  # Set over the check's environment.


def last_lines(path: Path, count: int) -> list[str]:
  lines = [line for line in path.read_text(errors='replace').splitlines() if line.strip()]
  return lines[-count:]


def stop_group(process: subprocess.Popen) -> None:
  """Stops the child and whatever it started (its own process group): SIGTERM, then SIGKILL
  after 5 s (nplm train saves at its next update on SIGTERM; the check does not wait for it),
  the SIGKILL sent whatever interrupts the wait (a second Ctrl-C)."""
  try:
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=5)
  except (subprocess.TimeoutExpired, ProcessLookupError):  # Lookup: the group is gone.
    pass
  finally:
    try:
      os.killpg(process.pid, signal.SIGKILL)  # What is left of it, and what it started.
    except ProcessLookupError:
      pass
    process.wait()


def run_child(argv: list, limit: float, directory: Path, env: dict, cwd: Path = ROOT) -> dict:
  """Runs argv in `cwd` with a time limit, its output into directory/stdout.txt and
  stderr.txt: {'status', 'seconds', 'cpu_seconds', 'reason', 'printed'}."""
  directory.mkdir(parents=True, exist_ok=True)
  stdout, stderr = directory / 'stdout.txt', directory / 'stderr.txt'
  with open(stdout, 'w') as out, open(stderr, 'w') as err:
    started, cpu = time.monotonic(), children_cpu_seconds()
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=err, start_new_session=True)
    try:
      code = process.wait(timeout=limit)
    except subprocess.TimeoutExpired:
      stop_group(process)
      code = None
    except KeyboardInterrupt:  # In a session of its own, the child did not get the Ctrl-C.
      stop_group(process)
      raise
    took = {'seconds': time.monotonic() - started,
            'cpu_seconds': children_cpu_seconds() - cpu}  # Beside the wall: a busy machine.
  if code == 0:
    return {'status': 'ok', **took, 'reason': '', 'printed': []}
  printed = last_lines(stdout, 5) + last_lines(stderr, 5)
  if code is None:
    return {'status': 'timeout', **took, 'printed': printed,
            'reason': f'ran past its limit of {limit:.0f} s and was stopped'}
  last = (last_lines(stderr, 1) or last_lines(stdout, 1) or [''])[0]
  return {'status': 'failed', **took, 'printed': printed,
          'reason': f'exit status {code}: {last}'}


def children_cpu_seconds() -> float:
  """User and system CPU seconds of this process's children that have ended."""
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def missing(run: Run, machine: dict, data_dir: str) -> str:
  """Why `run` cannot start on this machine, or ''."""
  if 'gensim' in run.needs and not machine.get('gensim'):
    return f'gensim is not importable ({machine.get("gensim_error")}); GPU.md: bring its wheel'
  if 'brown' in run.needs and not machine.get('brown_prepared'):
    return (f'Brown is not prepared in --data_dir={data_dir}; run --prepare_only with the '
            'same --data_dir beforehand, on a machine with network')
  return ''


def run_all(runs: list, out: Path, env: dict, machine: dict, data_dir: str,
            deadline: float) -> list[dict]:
  """Each run in turn, within its limit and what is left until `deadline` (time.monotonic):
  its result and the figures read from what it wrote (what a failed or stopped run left, if
  readable). A Ctrl-C stops the run in progress (status 'interrupted') and skips the rest:
  the report keeps what the check measured before it."""
  results, interrupted = [], False
  for number, run in enumerate(runs, 1):
    command = shlex.join(run.argv)
    result = {'id': run.id, 'row': run.row, 'name': run.name, 'command': command,
              'cwd': str(run.cwd),
              'limit_s': run.limit, 'seconds': 0.0, 'cpu_seconds': 0.0, 'printed': [],
              'figures': []}
    results.append(result)
    why_not = 'the check was interrupted (Ctrl-C)' if interrupted else missing(run, machine,
                                                                              data_dir)
    left = deadline - time.monotonic()
    if not why_not and left < MIN_START_S:
      why_not = 'the check\'s budget (--budget_s) is spent'
    if why_not:
      result.update(status='skipped', reason=why_not)
      print(f'[{number}/{len(runs)}] row {run.row}, {run.name}: skipped: {why_not}', flush=True)
      continue
    limit = min(run.limit, left)
    print(f'[{number}/{len(runs)}] row {run.row}, {run.name} (limit {limit:.0f} s), in '
          f'{run.cwd}:\n  {command}', flush=True)
    directory = out / 'rows' / run.id
    shutil.rmtree(directory, ignore_errors=True)  # A run left there would be resumed.
    started = time.monotonic()
    try:
      result.update(run_child(run.argv, limit, directory, {**env, **run.env}, run.cwd),
                    limit_s=limit)
      result.update(read_figures(run, out, result))
    except KeyboardInterrupt:
      interrupted = True
      result.update(status='interrupted', reason='stopped by Ctrl-C',
                    seconds=time.monotonic() - started, limit_s=limit)
    print(f'  -> {result["status"]} in {result["seconds"]:.1f} s (CPU '
          f'{result["cpu_seconds"]:.1f} s)'
          + (f': {result["reason"]}' if result['reason'] else ''), flush=True)
  return results


def read_figures(run: Run, out: Path, result: dict) -> dict:
  """{'figures': …} read from what the run wrote; where they cannot be read, the run's
  failure instead (a stopped run's report may well be missing: its status says why)."""
  try:
    return {'figures': run.figures(out / 'rows', run.id, result['seconds'])}
  except (OSError, LookupError, TypeError, ValueError, ArithmeticError) as error:
    if result['status'] != 'ok':
      return {}
    return {'status': 'failed', 'reason': f'its report could not be read: {error!r}'}
