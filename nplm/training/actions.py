"""What the loop (nplm.training.loop) runs between updates, after levanter's hooks and
big_vision's `itstime`: actions due every N updates, what they see of the update, and the
clock of the updates since the losses were last read."""

import dataclasses
import time
from collections.abc import Callable

import numpy as np

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
  """An action every `every` updates, but not at the steps `skip` names."""
  every: int
  action: Callable[[StepInfo], None]
  skip: Callable[[int], bool] = lambda step: False

  def due(self, step: int) -> bool:
    return step % self.every == 0 and not self.skip(step)
