"""nplm.stop_requests in child programs, as a user's process meets it: a stop request that
lands inside a write to stderr is kept, and the deadline a program asks for
(end_process_within) ends a stopped process in time without losing what it printed (stdout
a pipe, as under a supervisor, a test harness or `| tee`; an end slowed as a busy machine
slows an interpreter's exit: CI lost `nplm train`'s report that way)."""

import os
import signal
import subprocess
import sys
import time

from nplm import stop_requests
from tests.test_train import ROOT

# A program whose loop is stopped by its own SIGTERM while it saves, returns argv[2] seconds
# later (paused for argv[3] seconds as it leaves, as a busy machine may pause it), then
# prints `argv[1]` characters of report to stdout and takes 30 s to end (the deadline ends
# it first).
_PROGRAM = """
import os, signal, sys, time
from nplm import stop_requests
stop_requests.end_process_within(lambda what: f'cut short ({what})', 60.0, status=75)
report, returns_after, paused = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
with stop_requests.stop_requests() as stop:
  stop.phase = stop_requests.SAVING
  os.kill(os.getpid(), signal.SIGTERM)
  while not stop.is_set():
    time.sleep(0.01)
  time.sleep(returns_after)
  restore = signal.set_wakeup_fd
  def paused_restore(*args, **kwargs):
    time.sleep(paused)
    return restore(*args, **kwargs)
  signal.set_wakeup_fd = paused_restore
print('the report ' + 'x' * report)
print('the end of the report')
time.sleep(30)
"""
# Python's own buffering, as a user's shell has it (this workplace sets PYTHONUNBUFFERED).
BUFFERED = {k: v for k, v in os.environ.items() if k != 'PYTHONUNBUFFERED'}
SLACK = 10.0  # Seconds beyond the deadline's for the child's start (it imports JAX).


def stopped_program(report_chars: int, read: bool = True, returns_after: float = 0.0,
                    paused: float = 0.0):
  """(status, stdout, seconds) of _PROGRAM, its stdout read only once it ended unless `read`."""
  started = time.monotonic()
  child = subprocess.Popen([sys.executable, '-c', _PROGRAM, str(report_chars),
                            str(returns_after), str(paused)], cwd=ROOT, env=BUFFERED,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  try:
    if not read:
      child.wait(timeout=60)
    out, _ = child.communicate(timeout=60)
    return child.returncode, out, time.monotonic() - started
  finally:
    child.kill()


def test_an_end_cut_short_after_the_loop_returned_keeps_what_the_program_printed():
  status, out, seconds = stopped_program(100)
  assert status == 75
  assert 'the end of the report' in out
  assert seconds < stop_requests.QUICK_SECONDS + stop_requests.FLUSH_SECONDS + SLACK


def test_the_program_gets_its_seconds_from_the_return_however_long_ago_the_request_came():
  """A save that outlasted QUICK_SECONDS, and the program paused as the loop returns: it
  still has QUICK_SECONDS from the return to print why it stopped (the deadline once
  counted them from the request, and ended it silently before its report)."""
  returns_after = stop_requests.QUICK_SECONDS + 0.5
  status, out, seconds = stopped_program(100, returns_after=returns_after, paused=0.5)
  assert status == 75
  assert 'the end of the report' in out
  assert seconds > returns_after + stop_requests.QUICK_SECONDS


def test_a_report_blocked_on_a_full_pipe_does_not_hold_the_end():
  """Nobody reads the child's stdout (a paused pager): its print blocks with the buffer held,
  and the deadline still ends the process."""
  status, out, seconds = stopped_program(4_000_000, read=False)
  assert status == 75
  assert seconds < stop_requests.QUICK_SECONDS + stop_requests.FLUSH_SECONDS + SLACK
  assert 'the end of the report' not in out


# The loop's stop requests installed, a log line longer than the pipe holds written to stderr
# (blocked until the parent reads), and SIGTERM sent while it blocks: the handler runs inside
# that write. The request is said before the context's end.
_LOGGING = """
import logging, os, signal, sys
from nplm import stop_requests
logging.basicConfig(level=logging.INFO, format='%(message)s')
with stop_requests.stop_requests() as stop:
  stop.phase = stop_requests.TRAINING
  print('writing', flush=True)
  logging.getLogger('nplm.trainer').info('a long line ' + 'x' * 1_000_000)
print('requested' if stop.is_set() else 'lost', flush=True)
"""


def test_a_stop_request_landing_inside_a_log_line_is_kept_and_said():
  child = subprocess.Popen([sys.executable, '-c', _LOGGING], cwd=ROOT, env=BUFFERED,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  try:
    assert child.stdout.readline() == 'writing\n'
    time.sleep(1.0)  # Blocked in the write: nobody reads stderr yet.
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=60)
  finally:
    child.kill()
  assert child.returncode == 0, err[-2000:]
  assert out == 'requested\n'
  assert 'Logging error' not in err and 'reentrant' not in err, err[-2000:]
  lines = err.splitlines()
  assert lines[-1] == 'SIGTERM while training: saving a checkpoint and stopping.', lines[-1][:200]
  assert lines[0] == 'a long line ' + 'x' * 1_000_000


# A loop that ends its runs whole although a Ctrl-C came in its last moments (its summaries
# being written), heeding it or not as argv[1] says; then the caller's code.
_UNHEEDED = """
import os, signal, sys, time
from nplm import stop_requests
try:
  with stop_requests.stop_requests() as stop:
    os.kill(os.getpid(), signal.SIGINT)
    while not stop.is_set():
      time.sleep(0.01)
    stop.heeded = sys.argv[1] == 'heeded'
  print('the caller goes on')
except KeyboardInterrupt:
  print('the caller got the Ctrl-C')
"""


def test_a_ctrl_c_the_loop_did_not_heed_is_handed_to_the_caller():
  """A program that trains runs in turn (a benchmark) stops at the Ctrl-C that came after a
  run's last update, and a run stopped by it does not stop its caller a second time."""
  said = {}
  for heeded in ('heeded', 'not heeded'):
    done = subprocess.run([sys.executable, '-c', _UNHEEDED, heeded], cwd=ROOT, env=BUFFERED,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    said[heeded] = done.stdout.strip()
  assert said == {'heeded': 'the caller goes on', 'not heeded': 'the caller got the Ctrl-C'}


# A SIGINT sent from inside a garbage collector's callback (a C call after it, for the handler
# to land there, as a Ctrl-C lands in JAX's callback during its C call), in an `interrupting`
# context; then the pieces of an evaluation pass, each paced. Prints at which piece the
# Interrupted came (Python dropped the handler's), or 'after' (at the context's end).
_DROPPED_IN_A_PASS = """
import gc, os, signal, time
import jax.numpy as jnp
from nplm import stop_requests

armed = [True]
def callback(phase, info):
  if armed[0]:
    armed[0] = False
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)
gc.callbacks.append(callback)
came = 'after'
try:
  with stop_requests.interrupting('evaluating'):
    gc.collect()
    dispatched = []
    for piece in range(50):
      came = piece
      dispatched.append(jnp.ones(4) * piece)
      stop_requests.pace(dispatched)
    came = 'after'
except stop_requests.Interrupted:
  pass
print(came)
"""


def test_a_stop_that_python_dropped_ends_an_evaluation_pass_at_its_next_piece():
  """A reader's Ctrl-C (nplm evaluate, score, ...) that lands in JAX's garbage collector
  callback, where Python drops the handler's exception, stops the pass at its next piece
  (pace, a safe point), not at the end of the whole split; the dropped exception prints no
  traceback (the user sees the one line of the Interrupted that comes back)."""
  done = subprocess.run([sys.executable, '-c', _DROPPED_IN_A_PASS], cwd=ROOT, env=BUFFERED,
                        capture_output=True, text=True, timeout=120, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  # Python dropped it, as the test means: the pass began after gc.collect(), and piece 0 is
  # where the Interrupted came back.
  assert done.stdout.strip() == '0', (done.stdout, done.stderr[-2000:])
  assert 'Exception ignored' not in done.stderr and 'Traceback' not in done.stderr, (
      done.stderr[-2000:])
