"""Progress through a long pass (an epoch, an evaluation): a tqdm bar on a terminal, and in a
log (a batch job, a redirected run) a line every LOG_SECONDS, so that a two-minute final
evaluation is never silent."""

import logging
import time
import unicodedata
from collections.abc import Iterable, Iterator

from tqdm import tqdm

log = logging.getLogger('nplm.display')

LOG_SECONDS = 15.0


def progress(items: Iterable, total: int, desc: str, unit: str, initial: int = 0,
             lines: bool = True) -> Iterator:
  """`items`, with a bar on a terminal; elsewhere (and `lines`), a log line every
  LOG_SECONDS saying how far it is and how long is left. `desc` empty: silent."""
  if not desc:
    return iter(items)
  bar = tqdm(items, total=total, initial=initial, desc=desc, unit=unit, leave=False,
             disable=None)
  if not bar.disable or not lines:
    return iter(bar)
  return _logged(items, total, desc, initial)


def _logged(items: Iterable, total: int, desc: str, initial: int) -> Iterator:
  started = last = time.perf_counter()
  for done, item in enumerate(items, initial + 1):
    yield item
    now = time.perf_counter()
    if now - last >= LOG_SECONDS and done < total:
      rate = (done - initial) / (now - started)
      log.info('%s: %.0f%% (%s/%s), %s left', desc, 100 * done / total, f'{done:,}',
               f'{total:,}', duration((total - done) / rate))
      last = now


def duration(seconds: float) -> str:
  """45s, 2m03s, 1h05m."""
  seconds = round(seconds)
  if seconds < 60:
    return f'{seconds}s'
  if seconds < 3600:
    return f'{seconds // 60}m{seconds % 60:02d}s'
  return f'{seconds // 3600}h{seconds % 3600 // 60:02d}m'


def counted(number: int, noun: str) -> str:
  """'1 token', '2,926 tokens'."""
  return f'{number:,} {noun}{"" if number == 1 else "s"}'


def show_progress_lines() -> None:
  """nplm's own INFO lines on stderr (a program's, or nplm.train's from Python); libraries
  (Orbax, TFDS) only warn. Calling it again replaces its handler (one line per message, on
  the sys.stderr of the moment)."""
  from absl import logging as absl_logging
  import tensorflow_datasets as tfds  # Only its progress bar is switched off: imported here.
  absl_logging.set_verbosity(absl_logging.WARNING)
  tfds.disable_progress_bar()
  logger = logging.getLogger('nplm')
  logger.setLevel(logging.INFO)
  logger.propagate = False
  for handler in [h for h in logger.handlers if getattr(h, _OURS, False)]:
    logger.removeHandler(handler)
  handler = logging.StreamHandler()
  handler.setFormatter(logging.Formatter('%(asctime)s %(message)s', '%H:%M:%S'))
  setattr(handler, _OURS, True)
  logger.addHandler(handler)


_OURS = 'nplm_progress_lines'  # Marks the handler show_progress_lines added.


# Characters that change text around them rather than show: bidirectional overrides and
# isolates reorder what a terminal draws (controls, line and paragraph separators by category).
_BIDI_CONTROLS = frozenset('\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e'
                           '\u2066\u2067\u2068\u2069')


def printable(text: str) -> str:
  """Text as it may be shown on a terminal: each control character (ESC of an ANSI escape,
  a carriage return, a tab, a bidirectional override) written as a Python string escapes it
  (\\x1b, \\r, \\t, \\u202e), so that a sentence read from a file can neither restyle
  nor rewrite the screen, and shows what it holds. Other text is shown as it is."""
  return ''.join(repr(ch)[1:-1] if _is_control(ch) else ch for ch in text)


def _is_control(ch: str) -> bool:
  return unicodedata.category(ch) in ('Cc', 'Zl', 'Zp') or ch in _BIDI_CONTROLS
