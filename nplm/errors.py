"""Errors that name a user's mistake; the command-line tools print them as one line. And a
command stopped before its end: its status, Ctrl-C while it imports its program, and a reader
of its output that stops reading (this module imports only the standard library: the `nplm`
command's entry point, nplm.console, uses it before those imports)."""

import contextlib
import os
import signal
import sys
import threading

# EX_TEMPFAIL: the run stopped before its end and resumes where it stopped when rerun, so a
# scheduler tells it from a finished run (0) and from a mistake (2).
INTERRUPTED_EXIT_STATUS = 75
STARTING_INTERRUPTED = 'Interrupted while starting; nothing was done.'
# What a shell reports for a program killed by SIGPIPE (128 + 13).
CLOSED_PIPE_EXIT_STATUS = 141


@contextlib.contextmanager
def interrupt_ends_the_start():
  """Ctrl-C while a command imports JAX, Flax and Orbax (seconds, before its program handles
  stop requests) ends the process at once, with one line and INTERRUPTED_EXIT_STATUS.

  Not a KeyboardInterrupt: raised inside an extension's initialization (jaxlib's), it left
  the interpreter to crash as it exited (SIGSEGV, and no line). Nothing has been written
  yet, so os._exit loses nothing."""
  def end(signum, frame):
    os.write(2, f'{STARTING_INTERRUPTED}\n'.encode())  # Not print: the handler may have
    os._exit(INTERRUPTED_EXIT_STATUS)  # interrupted a write to stderr (a reentrant call).
  previous = signal.signal(signal.SIGINT, end)
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, previous)


def quiet_when_stdout_closes(run) -> None:
  """run(), and if whoever reads stdout stops reading (`nplm export --help | head -1`),
  exit quietly with CLOSED_PIPE_EXIT_STATUS as a Unix tool does, not with a traceback. Once
  run() is over, a Ctrl-C lets the process end as it was (_teardown_unbroken)."""
  status = 1  # An exception's, which Python prints as it exits.
  try:
    try:
      run()
      status = 0
    except SystemExit as done:
      status = 0 if done.code is None else done.code if isinstance(done.code, int) else 1
      raise
    finally:
      _teardown_unbroken(status)
      sys.stdout.flush()  # Inside the try: a closed pipe fails here, not at exit.
  except BrokenPipeError:
    _teardown_unbroken(CLOSED_PIPE_EXIT_STATUS)
    # Python flushes stdout again at exit: point it at /dev/null so that cannot fail too.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(CLOSED_PIPE_EXIT_STATUS)


def _teardown_unbroken(status: int) -> None:
  """From here the command's work is done: its output flushed next, then the interpreter's
  teardown (JAX's clean-up of its backends, about 0.35 s; atexit's callbacks). A Ctrl-C
  there printed a KeyboardInterrupt traceback from wherever it landed and cut that callback
  short; now the first is let pass, and the process ends as it would have, with `status`. A
  second ends it at once (a teardown that hangs)."""
  if threading.current_thread() is not threading.main_thread():
    return  # Only the main thread handles signals.
  pressed = []

  def press(signum, frame):
    pressed.append(signum)
    if len(pressed) > 1:
      os._exit(status)
  signal.signal(signal.SIGINT, press)


class ConfigError(ValueError):
  """A configuration value that cannot work; the message says which and why."""
