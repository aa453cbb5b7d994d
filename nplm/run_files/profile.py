"""A run's profile (--profile_steps): JAX's profiler over a few updates, its trace in
<workdir>/profile (TensorBoard's profile tab and Perfetto read it), and profile.txt beside
it: each device's events (a GPU's kernels; XLA's operations and the host's calls on a CPU)
summed by name, the longest first, a table a terminal reads. The profiler's own files are
binary, megabytes each."""

import collections
import gzip
import json
import logging
from pathlib import Path

import jax

from nplm.files import write_text_atomically

log = logging.getLogger(__name__)

TOP_EVENTS = 25  # Per device (and the host): the longest, by their summed time.
TABLE = 'profile.txt'


def start(directory: Path) -> bool:
  """The profiler started, tracing into `directory`; False (and a warning) where it cannot
  (a GPU without CUPTI): a profile is never worth a run."""
  try:
    jax.profiler.start_trace(str(directory), create_perfetto_trace=True)
  except Exception as error:  # The profiler's failures share no base class.
    log.warning('--profile_steps: the profiler did not start (%s: %s); training goes on',
                type(error).__name__, error)
    return False
  return True


def stop(directory: Path, start: int, traced: int | None) -> None:
  """The trace of the `traced` updates after update `start` ended and summed into
  directory/profile.txt (`event_table`), said in a line; a run that ended at or before
  `start` (traced 0, or None: never started) is told that it profiled nothing."""
  if not traced:
    if traced == 0:
      jax.profiler.stop_trace()
    log.warning('--profile_steps: nothing profiled, the run ended at or before update %d '
                '(its first progress line, where the profile starts): a lower --log_every '
                'starts it sooner', start)
    return
  try:
    jax.profiler.stop_trace()
    write_text_atomically(directory / TABLE, '\n'.join(newest_table(directory, traced)) + '\n')
  except Exception as error:  # As in start: the run goes on.
    log.warning('--profile_steps: no profile written (%s: %s)', type(error).__name__, error)
    return
  log.info('profiled %d update%s: %s (each device\'s events summed by name), the trace in %s',
           traced, 's' * (traced != 1), directory / TABLE, directory)


def newest_table(directory: Path, steps: int) -> list[str]:
  """`event_table` of the newest trace the profiler wrote under `directory`."""
  trace = max(directory.rglob('*.trace.json.gz'), key=lambda path: path.stat().st_mtime)
  return event_table(json.loads(gzip.decompress(trace.read_bytes()))['traceEvents'], steps)


def event_table(events: list, steps: int) -> list[str]:
  """Per process of the trace (a device, the host), its complete events summed by name:
  total µs, µs a step, share of the process's summed time, calls; the TOP_EVENTS longest.
  A host's events nest (a call within a call), so its shares overlap; a device's do not."""
  processes = {event['pid']: event['args']['name'] for event in events
               if event.get('ph') == 'M' and event.get('name') == 'process_name'}
  summed = collections.defaultdict(lambda: collections.defaultdict(lambda: [0.0, 0]))
  for event in events:
    if event.get('ph') == 'X':
      entry = summed[processes.get(event['pid'], str(event['pid']))][event['name']]
      entry[0] += float(event.get('dur', 0.0))
      entry[1] += 1
  lines = [f'{steps} steps; per process, its events summed by name (µs), the longest first']
  for process in sorted(summed, key=lambda name: (not name.startswith('/device'), name)):
    by_name = summed[process]
    total = sum(duration for duration, _ in by_name.values()) or 1.0
    lines += ['', f'{process}: {total:,.0f} µs summed',
              f'{"µs":>12} {"µs/step":>10} {"share":>6} {"calls":>7}  event']
    longest = sorted(by_name.items(), key=lambda item: -item[1][0])[:TOP_EVENTS]
    lines += [f'{duration:12,.0f} {duration / max(steps, 1):10,.1f} {duration / total:6.1%} '
              f'{calls:7,d}  {name[:160]}' for name, (duration, calls) in longest]
  return lines
