"""The tracebacks of a failed checkpoint read's abandoned reads, dropped (nplm.run_files.checkpoint
reports the failure in one line)."""

import logging
import re
import sys
from collections.abc import Callable


def drop() -> None:
  """Orbax reads a checkpoint's arrays in concurrent coroutines, on TensorStore's threads;
  when one fails, the others are dropped unfinished. Python would print a traceback for each
  as it collects it, and for each of their threads that then finds the event loop closed:
  at once (even before the read's error is caught), later, or as the process ends (hundreds
  of lines beside the command's one-line error). A thread's is printed by TensorStore's
  PyErr_Print, which calls sys.excepthook, a coroutine's through sys.unraisablehook, and a
  task's or a TensorStore future's failure that no one awaited by asyncio's logger. The
  failure has its one line
  already: from the first read on these are dropped, anything else still printed."""
  if not getattr(sys.unraisablehook, 'drops_abandoned_reads', False):
    sys.unraisablehook = _without_abandoned_reads(sys.unraisablehook)
  if not getattr(sys.excepthook, 'drops_abandoned_reads', False):
    sys.excepthook = _without_closed_loop_callbacks(sys.excepthook)
  asyncio_log = logging.getLogger('asyncio')
  if _unawaited_orbax_reads not in asyncio_log.filters:
    asyncio_log.addFilter(_unawaited_orbax_reads)


# A read's error as its future's repr shows it: TensorStore's ('FAILED_PRECONDITION: Error
# reading "params..." in OCDBT database at ...'), or Orbax's of the gathered reads
# ('Encountered error while reading array index: ...').
_ARRAY_READ = re.compile(r"exception=ValueError\('[A-Z_]+: Error reading "
                         r"|exception=Exception\(.Encountered error while reading array index")
_NEVER_RETRIEVED = re.compile(r'(Task|Future|_GatheringFuture) exception was never retrieved')


def _unawaited_orbax_reads(record: logging.LogRecord) -> bool:
  """False for asyncio's report of an Orbax read's task, or of a read's future (TensorStore's,
  or Orbax's gathering of them), whose failure no one awaited."""
  message = str(record.msg)
  return not (_NEVER_RETRIEVED.match(message)
              and ('/orbax/' in message or _ARRAY_READ.search(message)))


def _is_closed_loop(error: BaseException | None) -> bool:
  return isinstance(error, RuntimeError) and str(error) == 'Event loop is closed'


def _without_abandoned_reads(previous: Callable) -> Callable:
  def hook(unraisable):
    code = getattr(unraisable.object, 'cr_code', None)  # A coroutine's.
    if not ('orbax' in getattr(code, 'co_filename', '') or _is_closed_loop(unraisable.exc_value)):
      previous(unraisable)
  hook.drops_abandoned_reads = True
  return hook


def _without_closed_loop_callbacks(previous: Callable) -> Callable:
  """Drops a closed loop's error where native code called the loop (no Python frame
  before call_soon_threadsafe): only a TensorStore thread's, never the program's own."""
  def hook(kind, error, traceback):
    native_call = traceback is not None and traceback.tb_frame.f_code.co_name == (
        'call_soon_threadsafe')
    if not (native_call and _is_closed_loop(error)):
      previous(kind, error, traceback)
  hook.drops_abandoned_reads = True
  return hook
