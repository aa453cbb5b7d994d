"""A disk that fills during the final evaluation: one line and status 2, no traceback from
the TensorBoard writer at exit, and the rerun after space is freed ends as an undisturbed
run."""

import json
import subprocess
import sys

import pytest

from tests import cli
from tests.test_stops import corpus, train_argv  # noqa: F401 (a fixture)
from tests.test_train import ROOT

pytestmark = pytest.mark.slow

# `nplm train` whose TensorBoard event files cannot be flushed once the final evaluation has
# begun (ENOSPC, as from a full disk): the writer's close then fails as it did on a tmpfs
# filled during the final evaluation.
_CHILD = """
import errno, sys
from tensorboardX import record_writer
from nplm.training import loop
full = []
final_nll = loop.Loop.final_nll
def filling(self, *args):
  full.append(True)
  return final_nll(self, *args)
flush = record_writer.RecordWriter.flush
def failing_flush(self):
  if full:
    raise OSError(errno.ENOSPC, 'No space left on device')
  return flush(self)
loop.Loop.final_nll, record_writer.RecordWriter.flush = filling, failing_flush
from nplm.cli.train import run_program
run_program(['nplm train', *sys.argv[1:]])
"""


def test_a_disk_full_in_the_final_evaluation_is_one_line_and_the_rerun_finishes(
    corpus, tmp_path):
  workdir = tmp_path / 'run'
  argv = train_argv(corpus, workdir, '--epochs=1')
  child = subprocess.run([sys.executable, '-c', _CHILD, *argv], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
  lines = child.stderr.strip().splitlines()
  assert child.returncode == 2, child.stderr
  assert lines[-1].startswith('error: no space left on the disk of --workdir='), child.stderr
  assert 'Traceback' not in child.stderr and 'Exception' not in child.stderr, child.stderr
  rerun = cli.run('train', *argv)
  assert rerun.returncode == 0, rerun.stderr
  whole = tmp_path / 'whole'
  undisturbed_run = cli.run('train', *train_argv(corpus, whole, '--epochs=1'))
  assert undisturbed_run.returncode == 0, undisturbed_run.stderr
  resumed, undisturbed = (json.loads((w / 'summary.json').read_text()) for w in (workdir, whole))
  for key in ('steps', 'valid_ppl', 'test_ppl', 'best_epoch'):
    assert resumed[key] == undisturbed[key], key
