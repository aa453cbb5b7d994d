"""Where a run's numbers go: metrics.jsonl (one JSON object a line) and TensorBoard events."""

import json
from pathlib import Path

from tensorboardX import SummaryWriter


class MetricsWriter:
  """Appends each record to metrics.jsonl and its numbers as TensorBoard scalars.

  A resumed run appends too, so steps between the last checkpoint and an interruption can
  appear twice; readers keep the last record of each (kind, step).
  """

  def __init__(self, workdir: Path | None):
    """workdir None: a writer that writes nothing (the processes of a run other than 0)."""
    self._enabled = workdir is not None
    if self._enabled:
      self._jsonl = open(workdir / 'metrics.jsonl', 'a', encoding='utf-8')
      self._tensorboard = SummaryWriter(str(workdir / 'tensorboard'))

  def write(self, kind: str, step: int, **values: float) -> None:
    if not self._enabled:
      return
    self._jsonl.write(json.dumps({'kind': kind, 'step': step, **values}) + '\n')
    self._jsonl.flush()
    for name, value in values.items():
      self._tensorboard.add_scalar(f'{kind}/{name}', value, step)

  def close(self) -> None:
    if not self._enabled:
      return
    self._jsonl.close()
    self._tensorboard.close()
