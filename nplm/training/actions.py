"""What the loop (nplm.training.loop) runs between updates, after levanter's hooks and
big_vision's `itstime`: actions due every N updates or every so many seconds, what they see
of the update, and the clock of the updates since the losses were last read."""

import dataclasses
import time
from collections.abc import Callable

import jax
import numpy as np

from nplm import parallel
from nplm.run_files.summary import RunStatus


class Interval:
  """The updates, examples and seconds since the losses were last read."""

  def __init__(self):
    self.restart()

  def restart(self) -> None:
    self.clock, self.steps, self.examples = time.perf_counter(), 0, 0

  def count(self, examples: int) -> None:
    self.steps, self.examples = self.steps + 1, self.examples + examples

  def take(self) -> tuple[float, int, int]:
    taken = time.perf_counter() - self.clock, self.steps, self.examples
    self.restart()
    return taken


@dataclasses.dataclass(frozen=True)
class StepInfo:
  """What the actions after an update see (levanter's StepInfo)."""
  epoch: int
  losses: np.ndarray  # Per model, read from the device.
  examples_per_second: float  # Per model.
  steps_per_second: float
  end: RunStatus | None  # How the run ends after this update, if it does.


@dataclasses.dataclass(frozen=True)
class Periodic:
  """An action every `every` updates (0: never), but not at the steps `skip` names."""
  every: int
  action: Callable[[StepInfo], None]
  skip: Callable[[int], bool] = lambda step: False

  def due(self, step: int) -> bool:
    return bool(self.every) and step % self.every == 0 and not self.skip(step)

  def next_due(self, step: int) -> int | None:
    """The next step after `step` where it may be due (None: never): a call of several
    updates ends there, so that the action sees that update's state."""
    return (step // self.every + 1) * self.every if self.every else None


@dataclasses.dataclass
class Clocked:
  """An action once `seconds` of wall clock (0: never) have passed since `reset`, but not at
  the steps `skip` names. The processes of a multi-process run act at the same update, so
  they read their clocks together, at every `sync_every`-th step only: due there where any
  process's clock says so."""
  seconds: float
  action: Callable[[StepInfo], None]
  skip: Callable[[int], bool]
  sync_every: int
  started: float = dataclasses.field(init=False)

  def __post_init__(self):
    self.reset()

  def reset(self) -> None:
    self.started = time.perf_counter()

  def due(self, step: int) -> bool:
    if not self.seconds or self.skip(step):
      return False
    late = time.perf_counter() - self.started >= self.seconds
    if jax.process_count() == 1:
      return late
    return step % self.sync_every == 0 and parallel.any_process(late)

  def next_due(self, step: int) -> int | None:
    """None: due by the clock, read after each call (a call of several updates is not
    split for it: its time is a fraction of the minutes between checkpoints)."""
    del step
    return None


@dataclasses.dataclass
class Traced:
  """The profiler over `steps` updates (0: never): started once update `start`'s losses are
  read, stopped at update `start + steps` or at the run's end (`finish`), whichever comes
  first. `begin()` says whether it started; `end(traced)` is told the updates traced, or
  None where the run ended before the profile started."""
  start: int
  steps: int
  begin: Callable[[], bool]
  end: Callable[[int | None], None]
  tracing: bool = False
  done: bool = False

  def due(self, step: int) -> bool:
    return bool(self.steps) and not self.done and step in (self.start, self.start + self.steps)

  def next_due(self, step: int) -> int | None:
    later = [s for s in (self.start, self.start + self.steps) if s > step]
    return min(later) if self.steps and not self.done and later else None

  def action(self, info: StepInfo) -> None:
    del info
    if self.tracing:
      self.finish(self.start + self.steps)
    else:
      self.tracing = self.begin()
      self.done = not self.tracing

  def finish(self, step: int) -> None:
    if self.tracing:
      self.end(step - self.start)
    elif self.steps and not self.done:
      self.end(None)
    self.tracing, self.done = False, True


# --updates_per_call=0 (nplm.training.loop.choose_updates_per_call): K updates a call chosen
# from the first progress line's time per update. On a 2-core Xeon a call cost MLP9's step
# about 2.3 ms of 19 (8 a call 1.16x one a call), row 7's NNLM about 0.3 ms of 1.1 (1.41x),
# the LSTM recipe's 150 ms updates nothing (0.96x): experiments/results/cpu/updates_per_call/.
CALL_SECONDS = 0.25  # A call's updates at most this long: a stop request waits for a call.
MOST_A_CALL = 32  # Row 7's NNLM gained 1.05x more from 8 to 32 a call.
FEWEST_A_CALL = 4  # Fewer: the gain buys too little for a second program's compilation.
WORTH_SECONDS = 60  # A run with less left ends before a second compilation pays back.


def chosen_updates_per_call(update_seconds: float, seconds_left: float, log_every: int) -> int:
  """K updates a call for updates of `update_seconds` (measured one a call): the most, a
  power of two dividing --log_every, whose call takes at most CALL_SECONDS; 1 where that
  is fewer than FEWEST_A_CALL or the run has less than WORTH_SECONDS left."""
  if seconds_left < WORTH_SECONDS:
    return 1
  k = MOST_A_CALL
  while k >= FEWEST_A_CALL and (k * update_seconds > CALL_SECONDS or log_every % k):
    k //= 2
  return k if k >= FEWEST_A_CALL else 1


def updates_in_one_call(wanted: int, step: int, actions: list, bounds: list) -> int:
  """`wanted` updates after `step` where they end before any of `actions` may fall due and
  before each of `bounds` (steps; None: none), else 1: an action sees the state of the
  update it is due at, so a call of several ends there. Two programs at most: one update a
  call, and `wanted`."""
  if wanted == 1:
    return 1
  ends = [action.next_due(step) for action in actions] + list(bounds)
  nearest = min((end for end in ends if end is not None), default=None)
  return wanted if nearest is None or nearest - step >= wanted else 1
