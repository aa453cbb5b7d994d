"""Stop requests: the first SIGTERM or Ctrl-C asks the loop (nplm.train) to save and stop
at its next step; a second Ctrl-C, or any during the final evaluation, stops at once."""

import contextlib
import logging
import signal
import threading

log = logging.getLogger('nplm.train')


class RunInterrupted(Exception):
  """A stop request during the final evaluation: the checkpoints are all saved."""


class StopRequests:
  """Set by the first SIGTERM or Ctrl-C (the loop then saves and stops); a second Ctrl-C,
  or any during the final evaluation (`at_once`: nothing is lost by abandoning it), stops
  at once."""

  def __init__(self):
    self.requested = threading.Event()
    self.at_once = False

  def is_set(self) -> bool:
    return self.requested.is_set()

  def handler(self, signum, frame):
    if self.at_once:
      raise RunInterrupted(f'signal {signum} during the final evaluation')
    if self.requested.is_set():
      raise KeyboardInterrupt
    log.warning('Signal %d: saving a checkpoint and stopping.', signum)
    self.requested.set()


@contextlib.contextmanager
def stop_requests():
  """StopRequests, installed for SIGINT and SIGTERM while the context lasts."""
  stop = StopRequests()
  if threading.current_thread() is not threading.main_thread():
    yield stop  # Signals reach only the main thread; nothing to install.
    return
  previous = {s: signal.signal(s, stop.handler) for s in (signal.SIGINT, signal.SIGTERM)}
  try:
    yield stop
  finally:
    for s, h in previous.items():
      signal.signal(s, h)
