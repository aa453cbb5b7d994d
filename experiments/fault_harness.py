"""What the fault-injection experiment (experiments.fault_injection) shares between its
modes: children whose output is timed line by line, what their runs leave, damage done to a
checkpoint, and the reports."""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from absl import flags

FLAGS = flags.FLAGS  # Defined by experiments.fault_injection: --timeout, --mode, --results.

KEYS = ('train_ppl', 'valid_ppl', 'test_ppl', 'steps', 'epochs', 'best_epoch',
        'valid_ppl_history', 'nll')
STEP_LINE = re.compile(r"step (\d+)\s+epoch (\d+)\b.*loss")
VALID_LINE = re.compile(r'epoch (\d+)\)?\s+valid perplexity')  # '(epoch 3)' since --eval_every
EXCEPTION_LINE = re.compile(r'^[\w.]*(Error|Exception|Interrupt)\b')



def nplm(*args) -> list[str]:
  return [sys.executable, '-m', 'nplm.cli', *map(str, args)]


class Child:
  """A running command whose output threads collect, each stderr line with its time since
  the start, so that a signal can be timed by what the child says."""

  def __init__(self, argv: list[str], checkout: str, cwd: Path | None = None,
               env: dict | None = None):
    env = dict(os.environ, **(env or {}), PYTHONPATH=checkout, PYTHONUNBUFFERED='1')
    self.start, self.err, self.out = time.monotonic(), [], []
    self.proc = subprocess.Popen(argv, cwd=cwd or checkout, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 errors='replace')
    self.readers = [threading.Thread(target=self._read, args=(s, k), daemon=True)
                    for s, k in ((self.proc.stderr, self.err), (self.proc.stdout, self.out))]
    for reader in self.readers:
      reader.start()

  def _read(self, stream, lines: list) -> None:
    for line in stream:
      lines.append((self.elapsed(), line.rstrip('\n')))

  def elapsed(self) -> float:
    return time.monotonic() - self.start

  def running(self) -> bool:
    return self.proc.poll() is None

  def wait_until(self, condition) -> bool:
    """Polls `condition()` every 5 ms; False if the child ends (or times out) first."""
    while self.running() and self.elapsed() < FLAGS.timeout:
      if condition():
        return True
      time.sleep(0.005)
    return False

  def sleep(self, seconds: float) -> bool:
    """Whether the child still runs `seconds` from now."""
    until = self.elapsed() + seconds
    return self.wait_until(lambda: self.elapsed() >= until)

  def line(self, pattern: str):
    """Index of the first stderr line matching `pattern`, or None."""
    return next((i for i, (_, l) in enumerate(self.err) if re.search(pattern, l)), None)

  def send(self, sig) -> None:
    if self.running():
      self.proc.send_signal(sig)

  def finish(self) -> dict:
    """Waits for the end (killing the child past --timeout): rc, stdout, stderr lines."""
    try:
      rc = self.proc.wait(timeout=max(1.0, FLAGS.timeout - self.elapsed()))
    except subprocess.TimeoutExpired:
      self.proc.kill()
      self.proc.wait()
      rc = 'timeout'
    for reader in self.readers:
      reader.join(timeout=10)
    return {'rc': rc, 'seconds': round(self.elapsed(), 1),
            'stdout': '\n'.join(l for _, l in self.out), 'stderr': [l for _, l in self.err]}


def run(argv: list[str], checkout: str, cwd: Path | None = None, env: dict | None = None
        ) -> dict:
  return Child(argv, checkout, cwd, env).finish()


def tail(result: dict) -> str:
  """The last exception line of a traceback; else the last stderr line, after the one
  before if it is short (a signal's message after the progress line that says when)."""
  lines, raised, ignored = [l.strip()[:160] for l in result['stderr'] if l.strip()], [], False
  for line in lines:  # Skipping 'Exception ignored in' blocks: noise of a shutdown.
    if line.startswith('Exception ignored'):
      ignored = True
    elif EXCEPTION_LINE.match(line):
      raised, ignored = raised + [line] * (not ignored), False
  if raised:
    return raised[-1]
  return ' ⏎ '.join(lines[-2:] if lines and len(lines[-1]) < 80 else lines[-1:])


def traceback(result: dict) -> bool:
  return any('Traceback' in l for l in result['stderr'])


def summary_of(workdir: Path) -> dict | None:
  try:
    return json.loads((workdir / 'summary.json').read_text())
  except (OSError, ValueError):
    return None


def compare(summary: dict | None, reference: dict) -> str:
  """'identical' if every KEY equals the reference's, else what differs."""
  if summary is None:
    return 'no summary.json'
  different = [f'{k} {summary.get(k)} vs {reference[k]}' for k in KEYS
               if summary.get(k) != reference[k]]
  return 'identical' if not different else 'DIFFERENT: ' + '; '.join(different)[:200]


def newest(workdir: Path, name: str = 'checkpoints') -> Path:
  return workdir / name / str(max(int(p.name) for p in (workdir / name).iterdir()
                                  if p.name.isdigit()))


def differing_leaves(a: Path, b: Path, prefix: str = '') -> str:
  """Leaves (under `prefix`) of two checkpoint steps that differ, with the largest |Δ|:
  the reported numbers can hide a difference, or a damage read without notice."""
  try:
    x, y = _leaves(a), _leaves(b)
  except Exception as error:  # A damaged or missing checkpoint: say which, go on.
    return f'unreadable ({type(error).__name__})'
  found = [f'{k} {np.max(np.abs(x[k].astype(float) - y[k])):.1e}' for k in x if
           k.startswith(prefix) and x[k].dtype.kind in 'fiu' and not np.array_equal(x[k], y[k])]
  return ', '.join(found) or 'none'


def _leaves(step_dir: Path) -> dict:
  import jax  # Imported here: only reading checkpoints needs them.
  import orbax.checkpoint as ocp
  state = ocp.StandardCheckpointer().restore((step_dir / 'state').absolute())
  return {'.'.join(re.findall(r'\w+', jax.tree_util.keystr(path))): np.asarray(leaf)
          for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]}


def markdown(rows: list[dict], columns: list[str]) -> str:
  cell = lambda v: str(v).replace('|', '\\|').replace('\n', ' ')
  return '\n'.join(['| ' + ' | '.join(columns) + ' |', '|' + '---|' * len(columns),
                    *('| ' + ' | '.join(cell(r.get(c, '')) for c in columns) + ' |'
                      for r in rows)])


def label(checkout: str) -> str:
  """The checkout's commit, '-dirty' if its tracked files changed (git describe)."""
  found = subprocess.run(['git', '-C', checkout, 'describe', '--always', '--dirty'],
                         capture_output=True, text=True)
  return found.stdout.strip() or 'unknown'


def save(out: Path, name: str, text: str, data) -> None:
  """OUT/<name>.md and .json, copied to --results as <mode>-<commit>.*, so that the reports
  of an old and a new checkout sit side by side."""
  copy = f'{FLAGS.mode}-{label(FLAGS.checkout)}'
  for suffix, content in (('md', text), ('json', json.dumps(data, indent=1, default=str))):
    (out / f'{name}.{suffix}').write_text(content + '\n')
    if FLAGS.results:
      Path(FLAGS.results).mkdir(parents=True, exist_ok=True)
      shutil.copy(out / f'{name}.{suffix}', Path(FLAGS.results) / f'{copy}.{suffix}')


# --- damage ---------------------------------------------------------------------------------

FLIP_STRIDE = 64  # Smaller than any array's bytes in a data file, the tiny runs' too.


def largest_data_file(step_dir: Path) -> Path:
  return max((p for p in (step_dir / 'state').rglob('*') if p.parent.name == 'd'),
             key=lambda p: p.stat().st_size)


def flip_bytes(step_dir: Path) -> None:
  """Every FLIP_STRIDE-th byte of the largest data file flipped. Not one byte in its
  middle: Orbax's data files hold bytes that no array is read from, and two bytes flipped
  there changed nothing restored (a test's run resumed from such a checkpoint, rightly)."""
  path = largest_data_file(step_dir)
  data = bytearray(path.read_bytes())
  for at in range(FLIP_STRIDE // 2, len(data), FLIP_STRIDE):
    data[at] ^= 0xFF
  path.write_bytes(bytes(data))


def truncate(step_dir: Path) -> None:
  path = largest_data_file(step_dir)
  path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
