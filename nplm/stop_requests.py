"""Stop requests (SIGTERM, Ctrl-C): every phase of a run ends within seconds.

- Training (nplm.training.loop, `stop_requests`): the first request asks the loop to save at
  its next update and stop; a second Ctrl-C stops at once (KeyboardInterrupt).
- The loop's other phases stop at their next safe point: building the model, the validation
  passes and the final evaluation call `check` between their pieces, which raises
  RunInterrupted; a validation's updates not yet saved (`unsaved`: an epoch's end is saved
  once, after its validation) are saved on the way out. Preparing a dataset and the
  readers (`interrupting`) raise Interrupted from the handler.
- Work is dispatched in short pieces, and `pace` keeps at most IN_FLIGHT of them queued: a
  process cannot end before the computations it has queued, so a stop never waits for a
  long queue.
- One computation or compilation cannot be cut short, and a Python handler runs only after
  it returns. A program (nplm train) asks for `end_process_within(message, seconds)`: while
  the loop runs, a watchdog thread learns of a request at once (the C-level handler writes
  the signal's wakeup fd whatever the main thread is doing) and ends the process with
  status 75, printing message(what), if it is still alive when the request's time is up:
  `seconds` (--stop_seconds) while the loop is training or saving, or holds updates not yet
  saved, so that the checkpoint it asked for is written whole on a busy machine;
  QUICK_SECONDS in the phases with nothing to save (building, compiling, the final
  evaluation, a validation of saved updates). That is a kill -9 as far as the run is concerned, which it survives: a
  save cut short stays an Orbax temporary directory, never restored and removed by the next
  trainer, and a rerun resumes from the last finished checkpoint. A second request ends the
  process at once, whatever the phase (a person pressing Ctrl-C again).
- A multi-process run's processes stop together, at an update they agree on
  (nplm.parallel.agreed_stop): the other phases run to their end, and no deadline applies.
"""

import contextlib
import functools
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable

import jax

log = logging.getLogger('nplm.trainer')

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# A program ends this long after a stop request at the latest in a phase with nothing to save.
QUICK_SECONDS = 3.0
# What a program printed is flushed for this long at most when the deadline ends it.
FLUSH_SECONDS = 1.0
IN_FLIGHT = 1  # Computations queued behind the running one, at most, in the paced loops.
TRAINING = 'training'  # The phases that save before they stop.
SAVING = 'saving a checkpoint'
SAVING_PHASES = (TRAINING, SAVING)


class RunInterrupted(Exception):
  """A stop request in one of the loop's phases other than training (building the model,
  validating, the final evaluation): what it has not saved yet, it saves on the way out.
  Its text says which signal came in which phase."""


class Interrupted(BaseException):
  """A stop request in a phase that has nothing to save (preparing a dataset): the message
  says what stopped and how to start it again; a command prints it and exits 75
  (nplm.cli.INTERRUPTED_EXIT_STATUS). A BaseException, as KeyboardInterrupt is, so that no
  `except Exception` mistakes it for a failure of what it interrupted."""


class _Interrupting:
  """One `interrupting` context: what it does, and the signal that came, if one did."""

  def __init__(self, what: str):
    self.what, self.signum = what, None

  def handler(self, signum, frame):
    first = self.signum is None
    self.signum = signum
    if first:  # Later ones would cut short the unwinding of the first.
      raise self.interrupted()

  def interrupted(self) -> Interrupted:
    unfinished = (' (an unfinished preparation is never used)'
                  if self.what.startswith('preparing') else '')
    return Interrupted(f'Interrupted ({signal.Signals(self.signum).name}) while {self.what}; '
                       f'rerun the same command to start it again{unfinished}.')


_interrupting: list[_Interrupting] = []  # The active `interrupting` contexts, innermost last.


@contextlib.contextmanager
def interrupting(what: str):
  """While the context lasts, the first SIGINT or SIGTERM raises Interrupted('Interrupted
  (SIGTERM) while <what>; ...') from the handler, wherever the main thread is (a blocking
  wait included): the code it interrupts unwinds (TFDS removes its incomplete directory);
  later signals are ignored until the context ends, so that the cleanup runs to its end. An
  exception raised inside a __del__ or a garbage collector's callback (JAX has one) is
  dropped by Python (not printed: _unraisable_hook): long tasks call `check_interrupted` at
  safe points, which raises it again, as the context's end does. Outside the main thread
  (signals reach only it) this does nothing."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  context = _Interrupting(what)
  previous = {s: signal.signal(s, context.handler) for s in SIGNALS}
  previous_hook = sys.unraisablehook
  sys.unraisablehook = ours = _unraisable_hook(previous_hook)
  _interrupting.append(context)
  try:
    yield
  finally:
    _interrupting.remove(context)
    for s, h in previous.items():
      signal.signal(s, h)
    if sys.unraisablehook is ours:  # One installed inside stays (it holds ours).
      sys.unraisablehook = previous_hook
  if context.signum is not None:  # Its exception was dropped after the last safe point.
    raise context.interrupted()


def _unraisable_hook(previous: Callable) -> Callable:
  """sys.unraisablehook that drops an Interrupted silently (its context raises it again at
  the next safe point: a traceback of a garbage collector's callback would say nothing to
  the user) and hands anything else to `previous`."""
  def hook(unraisable):
    if not isinstance(unraisable.exc_value, Interrupted):
      previous(unraisable)
  return hook


def check_interrupted() -> None:
  """Interrupted if a signal came during the active `interrupting` context (its exception
  may have been dropped); for long tasks' safe points. Nothing outside such a context."""
  for context in _interrupting:
    if context.signum is not None:
      raise context.interrupted()


class StopRequests:
  """Set by the first SIGTERM or Ctrl-C: the loop then saves and stops in the training phase,
  and stops at the next `check` in the others; a second Ctrl-C raises KeyboardInterrupt at
  once. `phase` says what the loop is doing (the loop sets it), for the messages."""

  def __init__(self):
    self.requested = threading.Event()
    self.signal_name = self.requested_in = ''  # The first request's signal and phase.
    self.phase = 'starting'
    self.unsaved = False  # Whether the loop holds updates that no checkpoint has yet.
    self.watched = False  # Whether a program's watchdog ends the process on a second request.
    # Whether the loop stopped for the request (its runs interrupted); None: not said.
    self.heeded: bool | None = None
    self.said = ''  # What the first request's announcement says.
    self.wake = threading.Event()  # A request came, or the context ended.

  def is_set(self) -> bool:
    return self.requested.is_set()

  def handler(self, signum, frame):
    if self.requested.is_set():
      if self.watched:
        return  # The watchdog ends the process at once, with its message.
      raise KeyboardInterrupt
    self.signal_name, self.requested_in = signal.Signals(signum).name, self.phase
    then = ('stopping once it is saved' if self.phase == SAVING else
            'saving a checkpoint and stopping' if self.phase == TRAINING or self.unsaved
            else 'stopping')
    self.said = f'{self.signal_name} while {self.phase}: {then}.'
    self.requested.set()
    self.wake.set()

  def announce(self) -> None:
    """Logs the first request, once it comes (a thread's target until the context ends).
    Not from the handler: it may have interrupted the main thread inside a write to stderr
    (a log line), where another write is a reentrant call that raises, which once lost the
    request itself; this thread waits for that line's end. Nor from a thread the handler
    starts: starting one takes a lock the interrupted code may hold."""
    self.wake.wait()
    if self.requested.is_set():
      log.warning('%s', self.said)

  def check(self) -> None:
    """RunInterrupted if a stop was requested. Not in a multi-process run: its processes
    stop together, at an update they agree on (nplm.parallel.agreed_stop)."""
    if self.requested.is_set() and jax.process_count() == 1:
      raise RunInterrupted(f'{self.signal_name} while {self.requested_in}')


_running: list[StopRequests] = []  # The loop's, while it runs (innermost last).
_deadline: tuple | None = None  # (seconds, message, status) once a program asked for one.


def check() -> None:
  """RunInterrupted if the running loop was asked to stop; for its phases with nothing to
  save, between their pieces. Nothing outside the loop."""
  if _running:
    _running[-1].check()


def pace(dispatched: list) -> None:
  """Called after each computation dispatched into `dispatched` (their results, in order):
  waits for the one IN_FLIGHT places back, so that few are queued; on a stop request, for
  those queued too (the process could not end before them: waited for here, under the
  program's deadline), then RunInterrupted. A safe point of the readers' evaluation passes
  too (check_interrupted): a stop request whose exception Python dropped (it landed in JAX's
  garbage collector callback) ends the pass here, not after the whole split."""
  check_interrupted()
  if len(dispatched) > IN_FLIGHT:
    jax.block_until_ready(dispatched[-1 - IN_FLIGHT])
  if _running and _running[-1].is_set() and jax.process_count() == 1:
    jax.block_until_ready(dispatched[-1 - IN_FLIGHT:])
    check()


def end_process_within(message: Callable[[str], str], seconds: float,
                       status: int = 75) -> None:
  """For programs: from now on, a stop request while the loop runs ends the process (with
  `status`) even when the loop is inside one long computation: `seconds` after it while the
  loop trains or saves, QUICK_SECONDS after it in a phase with nothing to save, at once on
  a second request; message(what) is printed first, `what` saying which signal came in
  which phase (e.g. 'SIGTERM while compiling the train step'). The loop, stopped in time,
  prints its own message. Not for multi-process runs, whose processes stop together at an
  update they agree on."""
  global _deadline
  _deadline = (seconds, message, status)


class _Watchdog:
  """Learns of SIGINT and SIGTERM through the wakeup fd, at once, and ends the process if it
  is still alive when the first request's time is up (end_process_within), or at a second
  request: silently once the loop has returned (the program is then saying why it stops),
  else with `message`."""

  def __init__(self, stop: StopRequests, seconds: float, message, status: int):
    self.stop, self.seconds, self.message, self.status = stop, seconds, message, status
    self.returned, self.returned_at = threading.Event(), 0.0
    self.reader, self.writer = socket.socketpair()
    self.writer.setblocking(False)
    self.previous_fd = signal.set_wakeup_fd(self.writer.fileno(), warn_on_full_buffer=False)
    stop.watched = True
    threading.Thread(target=self.watch, name='nplm-stop-deadline', daemon=True).start()

  def signals(self, timeout: float | None) -> list[int] | None:
    """The stop signals that came within `timeout` seconds (None: wait for one); None once
    the loop has returned and closed the writer."""
    if not select.select([self.reader], [], [], timeout)[0]:
      return []
    try:
      received = self.reader.recv(64)
    except OSError:
      return None
    return [signum for signum in received if signum in SIGNALS] if received else None

  def watch(self) -> None:
    first = []
    while not first:  # The reader stays open: the handler writes a byte for every signal.
      first = self.signals(None)
      if first is None:
        self.reader.close()
        return  # The loop returned without a stop request.
    requested, second = time.monotonic(), len(first) > 1
    while (not second and not self.returned.is_set()
           and time.monotonic() < requested + self.time_allowed()):
      second = bool(self.signals(0.05))  # None: the loop returned (closed the writer).
    ending = self.returned.is_set() and not second
    if ending:  # The program is saying why it stops.
      time.sleep(max(0.0, self.returned_at + QUICK_SECONDS - time.monotonic()))
    # Said however the process ends here: an ending slower than QUICK_SECONDS (a busy
    # machine's report) has perhaps not said yet what is kept.
    name = self.stop.signal_name or signal.Signals(first[0]).name
    what = (f'{name} while the program ended' if ending else
            f'{"a second " if second else ""}{name} while {self.stop.phase}')
    try:
      said = self.message(what)
    except Exception:  # It reads the workdir; the end must come whatever it finds there.
      said = f'Interrupted ({what}) at once.'
    _exit_with_outputs_flushed(self.status, said)

  def time_allowed(self) -> float:
    """Seconds from the first request to the end while the loop runs: --stop_seconds while a
    checkpoint is to be saved or is being saved, QUICK_SECONDS where there is nothing to
    save. Once it has returned, the program has QUICK_SECONDS from then to end."""
    saving = self.stop.phase in SAVING_PHASES or self.stop.unsaved
    return self.seconds if saving else min(self.seconds, QUICK_SECONDS)

  def leave(self) -> None:
    """The loop returned: the wakeup fd as it was; the watchdog ends, unless a stop request
    came, whose deadline still holds until the process ends."""
    self.returned_at = time.monotonic()  # Before `returned`, which the watchdog reads first.
    self.returned.set()
    signal.set_wakeup_fd(self.previous_fd)
    self.writer.close()  # The reader then sees the end of its stream (or its last bytes).


@contextlib.contextmanager
def stop_requests():
  """StopRequests, installed for SIGINT and SIGTERM while the context lasts (with the
  program's deadline, if it asked for one)."""
  stop = StopRequests()
  if threading.current_thread() is not threading.main_thread():
    yield stop  # Signals reach only the main thread; nothing to install.
    return
  announcer = threading.Thread(target=stop.announce, name='nplm-stop-said', daemon=True)
  announcer.start()
  previous = {s: signal.signal(s, stop.handler) for s in SIGNALS}
  watchdog = (_Watchdog(stop, *_deadline) if _deadline is not None
              and jax.process_count() == 1 else None)
  _running.append(stop)
  try:
    yield stop
  finally:
    _running.remove(stop)
    stop.wake.set()
    announcer.join(FLUSH_SECONDS)  # A request said before what the program says of it.
    if watchdog is not None:
      watchdog.leave()
    # A program stopped by a request is ending: a second one ends it at once, not with a
    # KeyboardInterrupt traceback from wherever its exit has got to.
    ending = watchdog is not None and stop.is_set()
    for s, h in previous.items():
      signal.signal(s, functools.partial(_end_at_once, watchdog.status) if ending else h)
  if stop.is_set() and stop.heeded is False and watchdog is None:
    # A request after the loop's last look (its summaries being written): the runs ended
    # whole, and the caller's own handler gets the request (Python's: KeyboardInterrupt),
    # so that a program training several runs in turn stops (a benchmark) rather than
    # start the next with the user's Ctrl-C lost.
    signal.raise_signal(signal.Signals[stop.signal_name])


def _end_at_once(status: int, signum, frame) -> None:
  _flush_outputs()  # Here, not in a thread: a write this handler interrupted holds the
  os._exit(status)  # buffer, and flushing it raises (suppressed) rather than waits.


def _flush_outputs() -> None:
  for stream in (sys.stdout, sys.stderr):
    with contextlib.suppress(Exception):
      stream.flush()


def _exit_with_outputs_flushed(status: int, message: str | None = None) -> None:
  """os._exit(status), `message` written to stderr last, after what the program printed:
  os._exit drops Python's buffers, and stdout into a pipe holds whole lines (the program's
  report among them). The flush waits FLUSH_SECONDS at most, in a thread of its own: a
  write blocked on a full pipe (a reader paused) holds the buffer, and must not hold the end
  of the process."""
  flushing = threading.Thread(target=_flush_outputs, name='nplm-stop-flush', daemon=True)
  flushing.start()
  flushing.join(FLUSH_SECONDS)
  if message is not None:
    with contextlib.suppress(OSError):
      os.write(2, (message + '\n').encode())
  os._exit(status)
