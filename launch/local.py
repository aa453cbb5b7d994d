r"""One multi-process run on this machine's CPU: N processes of `experiments.train`, each
with its own CPU devices, joined through a coordinator on localhost.

  python -m launch.local --num_processes=2 --devices_per_process=4 -- \
      --flagfile=fast --workdir=/tmp/two

Everything after `--` goes to every process; the launcher adds --coordinator_address,
--num_processes and --process_id. Process 0's output is this terminal's; the others' lines
come prefixed with `[process i]` (they are mostly quiet: only process 0 logs). If one
process fails, the rest are stopped and its exit code is this one's. Ctrl-C (or SIGTERM)
sends every process SIGTERM, so the run saves a checkpoint and stops; a second one kills.

It rehearses on one machine what a multi-host run does, with the same code path
(jax.distributed over gloo CPU collectives); it is not faster than one process.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import NoReturn

# Flags the launcher sets for each process; forwarding them too would contradict it.
_LAUNCHER_FLAGS = ('coordinator_address', 'num_processes', 'process_id', 'distributed')
# After one process fails, the others get this long to stop before they are killed: they
# cannot finish a step or a checkpoint without it, and may block in a collective.
GRACE_SECONDS = 10.0
TIMEOUT_EXIT_CODE = 124  # As timeout(1): the run outlived --timeout_seconds.
_TIMED_OUT = object()


class LaunchError(ValueError):
  """A launch that cannot work as asked; the command line shows it as one line."""


def check(num_processes: int, devices_per_process: int, brown_args: Sequence[str]) -> None:
  """Raises LaunchError for the first setting that cannot work."""
  if num_processes < 1:
    raise LaunchError(f'--num_processes must be at least 1, got {num_processes}')
  if devices_per_process < 1:
    raise LaunchError(f'--devices_per_process must be at least 1, got {devices_per_process}')
  for arg in brown_args:
    name = arg.lstrip('-').split('=', 1)[0]
    if arg.startswith('-') and name in _LAUNCHER_FLAGS + ('nodistributed',):
      raise LaunchError(f'{arg} is set by launch.local for each process; leave it out')


def free_port() -> int:
  """A port nothing listens on now (the OS picks it); another program could take it before
  the coordinator binds it, which would fail the run at once, not corrupt it."""
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
    probe.bind(('localhost', 0))
    return probe.getsockname()[1]


def command_lines(num_processes: int, brown_args: Sequence[str], coordinator_address: str,
                  python: str = sys.executable,
                  module: str = 'experiments.train') -> list[list[str]]:
  """The argv of each process, process i at index i."""
  return [[python, '-m', module, *brown_args,
           f'--coordinator_address={coordinator_address}', f'--num_processes={num_processes}',
           f'--process_id={i}'] for i in range(num_processes)]


def process_environment(devices_per_process: int, base: dict[str, str]) -> dict[str, str]:
  """`base` with the CPU as the only platform, split into devices_per_process devices."""
  return {**base, 'JAX_PLATFORMS': 'cpu', 'JAX_NUM_CPU_DEVICES': str(devices_per_process)}


def _relay(process: subprocess.Popen, prefix: str) -> threading.Thread:
  """Copies a process's output lines to stderr behind `prefix`, until it closes."""
  def copy():
    for line in process.stdout:
      sys.stderr.write(prefix + line)
      sys.stderr.flush()
  thread = threading.Thread(target=copy, daemon=True)
  thread.start()
  return thread


def launch(num_processes: int, devices_per_process: int, brown_args: Sequence[str],
           grace_seconds: float = GRACE_SECONDS, python: str = sys.executable,
           module: str = 'experiments.train', timeout_seconds: float | None = None) -> int:
  """Runs the processes to the end; returns 0, or the exit code of the first that failed
  (124 if they outlived `timeout_seconds`: a process stuck in a collective ignores SIGTERM,
  and only the kill after the grace period ends it). `module` is what each runs with
  `python -m` (a test runs a variant on a tiny corpus)."""
  check(num_processes, devices_per_process, brown_args)
  env = process_environment(devices_per_process, dict(os.environ))
  argvs = command_lines(num_processes, brown_args, f'localhost:{free_port()}', python, module)
  processes, relays, signals = [], [], []

  def on_signal(signum, frame):
    signals.append(signum)
    _send(processes, signal.SIGTERM if len(signals) == 1 else signal.SIGKILL)

  previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
  try:
    # Own sessions: a terminal's Ctrl-C reaches only the launcher, which sends SIGTERM once.
    for i, argv in enumerate(argvs):
      relayed = i > 0
      process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, text=True,
                                 stdout=subprocess.PIPE if relayed else None,
                                 stderr=subprocess.STDOUT if relayed else None,
                                 start_new_session=True)
      processes.append(process)
      if relayed:
        relays.append(_relay(process, f'[process {i}] '))
    failed = _wait_for_first_failure(processes, timeout_seconds)
    if failed is _TIMED_OUT:
      print(f'error: the processes ran past --timeout_seconds={timeout_seconds:g}; stopping '
            'them', file=sys.stderr)
    elif failed is not None:
      print(f'error: process {processes.index(failed)} exited with code '
            f'{exit_code(failed.returncode)}; stopping the others', file=sys.stderr)
    if failed is not None:
      _send(processes, signal.SIGTERM)
      deadline = time.monotonic() + grace_seconds
      while _running(processes) and time.monotonic() < deadline:
        time.sleep(0.1)
      _send(processes, signal.SIGKILL)
    for process in processes:
      process.wait()
    for relay in relays:
      relay.join()
  finally:
    _send(processes, signal.SIGKILL)  # Only where the launcher itself failed midway.
    for s, handler in previous.items():
      signal.signal(s, handler)
  if failed is _TIMED_OUT:
    return TIMEOUT_EXIT_CODE
  return 0 if failed is None else exit_code(failed.returncode)


def exit_code(returncode: int) -> int:
  """A Popen returncode as a shell reports it: killed by signal N (-N) is 128 + N."""
  return 128 - returncode if returncode < 0 else returncode


def _running(processes) -> list[subprocess.Popen]:
  return [p for p in processes if p.poll() is None]


def _send(processes, signum: int) -> None:
  for process in _running(processes):
    process.send_signal(signum)


def _wait_for_first_failure(processes, timeout_seconds: float | None):
  """Polls until all processes exit (None), one exits with a non-zero code (it), or the
  timeout passes (_TIMED_OUT)."""
  deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
  while True:
    for process in processes:
      if process.poll() not in (None, 0):
        return process
    if not _running(processes):
      return None
    if deadline is not None and time.monotonic() > deadline:
      return _TIMED_OUT
    time.sleep(0.1)


class _Parser(argparse.ArgumentParser):
  def error(self, message: str) -> NoReturn:
    """One line, as experiments.train's errors, instead of argparse's usage block."""
    self.exit(2, f'error: {message}\n')


def main(argv: Sequence[str]) -> int:
  split = argv.index('--') if '--' in argv else len(argv)
  own, brown_args = argv[:split], argv[split + 1:]
  parser = _Parser(prog='python -m launch.local', description=__doc__,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--num_processes', type=int, default=2,
                      help='Processes to start (default 2).')
  parser.add_argument('--devices_per_process', type=int, default=4,
                      help='CPU devices each process sees (default 4).')
  parser.add_argument('--grace_seconds', type=float, default=GRACE_SECONDS,
                      help='After a failure, how long the others get to stop before a kill.')
  parser.add_argument('--timeout_seconds', type=float, default=0,
                      help='Stop the run (exit code 124) if it lasts longer (default 0: no '
                      'limit).')
  flags = parser.parse_args(own)
  try:
    return launch(flags.num_processes, flags.devices_per_process, brown_args,
                  flags.grace_seconds, timeout_seconds=flags.timeout_seconds or None)
  except LaunchError as error:
    parser.error(str(error))


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
