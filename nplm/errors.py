"""Errors that name a user's mistake; the command-line tools print them as one line. And a
command stopped before its end: its status, and Ctrl-C while it imports its program (this
module imports only the standard library: the `nplm` command's entry point, nplm.console,
uses it before those imports)."""

import contextlib
import os
import signal
import sys

# EX_TEMPFAIL: the run stopped before its end and resumes where it stopped when rerun, so a
# scheduler tells it from a finished run (0) and from a mistake (2).
INTERRUPTED_EXIT_STATUS = 75
STARTING_INTERRUPTED = 'Interrupted while starting; nothing was done.'


@contextlib.contextmanager
def interrupt_ends_the_start():
  """Ctrl-C while a command imports JAX, Flax and Orbax (seconds, before its program handles
  stop requests) ends the process at once, with one line and INTERRUPTED_EXIT_STATUS.

  Not a KeyboardInterrupt: raised inside an extension's initialization (jaxlib's), it left
  the interpreter to crash as it exited (SIGSEGV, and no line). Nothing has been written
  yet, so os._exit loses nothing."""
  def end(signum, frame):
    print(STARTING_INTERRUPTED, file=sys.stderr, flush=True)
    os._exit(INTERRUPTED_EXIT_STATUS)
  previous = signal.signal(signal.SIGINT, end)
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, previous)


class ConfigError(ValueError):
  """A configuration value that cannot work; the message says which and why."""
