"""Stops on a busy machine (issue 42): SIGTERM and Ctrl-C at the moments that used to lose a
run (before the first checkpoint, inside the first save), with six CPU-bound processes
beside it; each stopped run is then rerun to its end and compared with the reference."""

import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

from experiments.fault_harness import Child, compare, summary_of

HOGS = 6  # CPU-bound processes beside the run, as on the machine where runs were lost.


@contextmanager
def busy_machine():
  hogs = [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(HOGS)]
  try:
    yield
  finally:
    for hog in hogs:
      hog.kill()
      hog.wait()


def saving(workdir):
  """The moment a save has begun writing: Orbax's temporary directory exists."""
  return lambda: any(workdir.glob('*/*.orbax-checkpoint-tmp*'))


def stopped_then_finished(c, name: str, moment, signals: list, gap: float = 0.3,
                          reference: dict | None = None, **flag_values) -> None:
  """Two rows: the run signalled at `moment` (a stderr pattern, or a condition), then the
  same command rerun to its end, compared with `reference` (default: the cases')."""
  argv = c.train_argv(name, **flag_values)
  with busy_machine():
    child = Child(argv, c.checkout)
    ready = ((lambda: child.line(moment) is not None) if isinstance(moment, str)
             else moment(c.out / name))
    child.wait_until(ready)
    sent = child.elapsed()
    for i, stop in enumerate(signals):
      if i:
        time.sleep(gap)
      child.send(stop)
    result = child.finish()
    kept = sorted(p.name for p in (c.out / name).glob('*/*') if p.parent.name in
                  ('checkpoints', 'best'))
    said = ' + '.join(signal.Signals(s).name for s in signals)
    c.row(f'14 {said} {name.replace("_", " ")}, 6 CPU hogs beside it', argv, result,
          f'ended {result["seconds"] - sent:.1f} s after the signal; kept: {kept or "nothing"}')
    result = c.train(name, **flag_values)
  resumed = next((l for l in result['stderr'] if re.search(r'\((new|resumed at step \d+)\)$',
                                                            l)), '')
  state = re.search(r'\((new|resumed at step \d+)\)$', resumed)
  c.row(f'14 … rerun to the end ({name.replace("_", " ")})', c.train_argv(name, **flag_values),
        result, f'{state.group(1) if state else "?"}; numbers '
        f'{compare(summary_of(c.out / name), reference or c.reference)}')


def case_stops(c) -> None:
  """14: a stop never loses a run, on a busy machine."""
  stopped_then_finished(c, 'before_the_first_checkpoint', r'step 25\b', [signal.SIGINT],
                        checkpoint_every=2000)
  stopped_then_finished(c, 'sigterm_before_the_first_checkpoint', r'step 25\b',
                        [signal.SIGTERM], checkpoint_every=2000)
  stopped_then_finished(c, 'during_the_first_save', saving, [signal.SIGTERM])
  stopped_then_finished(c, 'twice_during_the_first_save', saving,
                        [signal.SIGINT, signal.SIGINT])
  stopped_then_finished(c, 'while_compiling', 'compiling the train step', [signal.SIGTERM])


# A model whose checkpoint (120 MB with Adam's moments) takes seconds to write beside the
# hogs: the size at which a stop before the first checkpoint lost runs.
LARGE = dict(order=5, feature_size=500, hidden_size=5000, epochs=1, max_steps=60, log_every=5,
             checkpoint_every=2000)


def case_stops_large(c) -> None:
  """14: a stop before the first checkpoint of a large model, on a busy machine."""
  reference = c.train('large_reference', **LARGE)
  c.row('14 large model, uninterrupted (the reference of the next rows)',
        c.train_argv('large_reference', **LARGE), reference,
        f'valid ppl {(summary_of(c.out / "large_reference") or {}).get("valid_ppl")}')
  for stop in (signal.SIGTERM, signal.SIGINT):
    stopped_then_finished(c, f'large_{signal.Signals(stop).name}', r'step 10\b', [stop],
                          reference=summary_of(c.out / 'large_reference'), **LARGE)


CASES = (case_stops, case_stops_large)
