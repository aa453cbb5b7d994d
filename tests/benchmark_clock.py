"""A clock for the benchmarks' timing (experiments/benchmarks/harness.py and word2vec.py read
time.perf_counter only through their `time`): timed runs last exactly what a test says, so the
rates, ratios and GFLOP/s a report derives from them can be checked against counts by hand."""

import types

from experiments.benchmarks import harness


class BenchmarkClock:
  """`tick` seconds pass at every reading, plus whatever elapse() adds between readings."""

  def __init__(self, tick: float = 0.0):
    self.now, self.tick = 0.0, tick

  def perf_counter(self) -> float:
    self.now += self.tick
    return self.now

  def elapse(self, seconds: float) -> None:
    self.now += seconds

  def install(self, monkeypatch, module=harness) -> 'BenchmarkClock':
    """Becomes the perf_counter of `module`'s `time` (by default the harness's)."""
    monkeypatch.setattr(module, 'time', types.SimpleNamespace(perf_counter=self.perf_counter))
    return self
