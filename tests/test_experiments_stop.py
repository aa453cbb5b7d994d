"""The programs under experiments/ (benchmarks, checks) stopped by Ctrl-C as a user stops
one: one line and status 75 (nplm.cli.run_experiment), not a traceback from wherever the
timing loop was; and every such program runs through it."""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nplm.errors import INTERRUPTED_EXIT_STATUS
from tests.test_train import ROOT

# A program that works until stopped; argv[1], if given, is what its own Ctrl-C handling
# says (a benchmark that removed a run it cannot time).
_PROGRAM = """
import sys, time
from nplm.cli import run_experiment
def main(argv):
  try:  # Before 'working': a Ctrl-C on a busy machine may land right after it.
    print('working', flush=True)
    time.sleep(120)
  except KeyboardInterrupt:
    if len(sys.argv) > 1:
      raise KeyboardInterrupt(sys.argv[1])
    raise
run_experiment(main)
"""
BUFFERED = {k: v for k, v in os.environ.items() if k != 'PYTHONUNBUFFERED'}


def interrupted(*argv: str) -> tuple[int, str]:
  """(status, stderr) of _PROGRAM sent SIGINT once it works."""
  child = subprocess.Popen([sys.executable, '-c', _PROGRAM, *argv], cwd=ROOT, env=BUFFERED,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  try:
    assert child.stdout.readline() == 'working\n'
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    return child.returncode, err
  finally:
    child.kill()


@pytest.mark.parametrize('says, line', [
    ((), 'Interrupted; -c stopped before its end: its report, if any, was not written; '
         'rerun it'),
    (('its run OUT/r is removed',),
     'Interrupted; -c stopped before its end: its run OUT/r is removed')])
def test_a_ctrl_c_ends_a_program_with_one_line(says, line):
  status, err = interrupted(*says)
  assert (status, err) == (INTERRUPTED_EXIT_STATUS, line + '\n')


def test_every_program_under_experiments_runs_through_run_experiment():
  """absl's app.run alone ends a Ctrl-C with a traceback."""
  programs = [path for path in (Path(ROOT) / 'experiments').rglob('*.py')
              if "if __name__ == '__main__':" in path.read_text()]
  assert len(programs) >= 20
  for path in programs:
    text = path.read_text()
    assert not re.search(r'\bapp\.run\(', text), path
    if 'absl' in text:
      assert 'run_experiment(' in text, path
