"""What a timing alone cannot say: a compiled step's program and where its time went.

For a benchmark that hands its files back from a machine it cannot revisit (a lent GPU, 15
minutes): `write_program` saves the step as XLA compiled it (optimized HLO: on a GPU, which
products are cuBLAS's or Triton's, the fusions, any padding copies), and `write_profile`
runs the steps once under JAX's profiler and writes the events of each device (a GPU's
kernels) and of the host, summed by name, longest first: a text table, where the profiler's
own trace is a binary file of megabytes.
"""

import collections
import gzip
import json
import tempfile
from pathlib import Path

import jax

TOP_EVENTS = 25  # Per device (and the host): the longest, by their summed time.


def write_program(path: Path, compiled) -> None:
  """`compiled` (a jax.stages.Compiled) as its optimized HLO text."""
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(compiled.as_text())


def write_profile(path: Path, run_steps, batches) -> None:
  """One run of `run_steps(batches)` under the profiler, as `event_table` lines. A machine
  whose profiler cannot trace (no CUPTI for a GPU's kernels) gets the error in the file,
  not a failed benchmark."""
  path.parent.mkdir(parents=True, exist_ok=True)
  try:
    with tempfile.TemporaryDirectory() as directory:
      with jax.profiler.trace(directory, create_perfetto_trace=True):
        run_steps(batches)
      trace = next(Path(directory).rglob('*.trace.json.gz'))
      events = json.loads(gzip.decompress(trace.read_bytes()))['traceEvents']
    lines = event_table(events, len(batches))
  except Exception as error:  # The profiler's failures share no base class.
    lines = [f'no profile: {type(error).__name__}: {error}']
  path.write_text('\n'.join(lines) + '\n')


def event_table(events: list, steps: int) -> list[str]:
  """Per process of the trace (a device, the host), its complete events summed by name:
  total µs, µs a step, share of the process's summed time, calls; the TOP_EVENTS longest."""
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
    lines += [f'{duration:12,.0f} {duration / steps:10,.1f} {duration / total:6.1%} '
              f'{calls:7,d}  {name[:160]}' for name, (duration, calls) in longest]
  return lines
