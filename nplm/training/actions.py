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
