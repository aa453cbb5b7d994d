"""Where a run's numbers go: metrics.jsonl (one JSON object a line) and TensorBoard events
(the same scalars; at the end, the final perplexities, the hyperparameters and the config)."""

import contextlib
import json
import dataclasses
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from nplm.config import HEAD, MODEL, OPTIMIZER, PER_MODEL, config_class


if TYPE_CHECKING:
  from tensorboardX import SummaryWriter


def _summary_writer(directory: Path) -> 'SummaryWriter':
  # Imported here, not at the top: every nplm command imports this module, `--help`
  # included. And tensorboardX's writer tries `import torch` as it loads, to accept PyTorch's
  # tensors (1 s on the 2-core EPYC where PyTorch is installed, at every run's start); a run
  # writes floats only, so that import is refused while it loads (a None in sys.modules
  # raises ImportError, which tensorboardX expects), unless PyTorch is loaded already.
  refused = 'torch' not in sys.modules
  if refused:
    sys.modules['torch'] = None
  try:
    from tensorboardX import SummaryWriter
  finally:
    if refused:
      del sys.modules['torch']
  return SummaryWriter(str(directory))


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
      self._directory = workdir / 'tensorboard'
      self._tensorboard, self._hparams = _summary_writer(self._directory), None

  def write(self, kind: str, step: int, **values: float) -> None:
    if not self._enabled:
      return
    self._jsonl.write(json.dumps({'kind': kind, 'step': step, **values}) + '\n')
    self._jsonl.flush()
    for name, value in values.items():
      self._tensorboard.add_scalar(f'{kind}/{name}', value, step)

  def validation(self, step: int, epoch: int, ppl: float, tokens: int, of: int) -> None:
    """An epoch's validation perplexity on the first `tokens` of the valid split's `of`:
    metrics.jsonl's 'valid' record says so; TensorBoard's tag is valid/ppl for the whole
    split, valid/ppl_first_<tokens>_tokens for a part (never the exact valid figure)."""
    if not self._enabled:
      return
    record = {'kind': 'valid', 'step': step, 'ppl': ppl, 'epoch': epoch, 'tokens': tokens,
              'of': of}
    self._jsonl.write(json.dumps(record) + '\n')
    self._jsonl.flush()
    tag = 'valid/ppl' if tokens == of else f'valid/ppl_first_{tokens}_tokens'
    self._tensorboard.add_scalar(tag, ppl, step)
    self._tensorboard.add_scalar('valid/epoch', epoch, step)

  def final(self, summary: dict) -> None:
    """The finished run in TensorBoard: final/<split>_ppl scalars, its config as text, and
    its model, head and optimizer knobs beside its final perplexities in the HParams tab
    (which compares runs)."""
    if not self._enabled:
      return
    step = summary['steps']
    finals = {f'final/{key}': summary[key] for key in summary if key.endswith('_ppl')
              and math.isfinite(summary[key])}
    for name, value in finals.items():
      self._tensorboard.add_scalar(name, value, step)
    config = summary['config']
    self._tensorboard.add_text('config', '\n'.join(
        f'    --{name}={value}' for name, value in config.items()), step)
    groups = {field.name: field.metadata['group'] for field in
              dataclasses.fields(config_class(*(config.get(name, '') for name in ('model', 'head',
                                                                        'dataset'))))}
    hyperparameters = {name: value for name, value in config.items()
                       if groups.get(name) in (MODEL, HEAD, OPTIMIZER, PER_MODEL)}
    self._add_hparams(hyperparameters, finals, step)

  def _add_hparams(self, hyperparameters: dict, finals: dict, step: int) -> None:
    """SummaryWriter.add_hparams(..., name='hparams') as tensorboardX writes it (a writer of
    its own in tensorboard/hparams), the writer kept to be closed with the others: one that
    tensorboardX closes itself, on a full disk, prints tracebacks at exit (_give_up)."""
    from tensorboardX.summary import hparams
    writer = _summary_writer(self._directory / 'hparams')
    self._hparams = writer
    for summary in hparams(hyperparameters, finals):
      writer.file_writer.add_summary(summary)
    for name, value in finals.items():
      writer.add_scalar(name, value, step)

  def close(self) -> None:
    if not self._enabled:
      return
    writers = [w for w in (self._tensorboard, self._hparams) if w is not None]
    try:
      self._jsonl.close()
    finally:
      try:
        for writer in writers:
          writer.close()
      except OSError:
        for writer in writers:
          _give_up(writer)
        raise


def _give_up(writer: 'SummaryWriter') -> None:
  """After a close that failed (a full disk): tensorboardX would try it again at exit (its
  atexit callback) and its worker thread would fail on a closed queue, each printing a
  traceback after the run's one-line error. Its event writers are marked closed (its own
  flag, which its close and that callback read) and their workers stopped: the events that
  did not fit are lost; metrics.jsonl and summary.json are the run's record."""
  for file_writer in (writer.all_writers or {}).values():
    events = file_writer.event_writer
    worker, events._closed = events._worker, True
    if worker is not None:
      with contextlib.suppress(Exception):
        worker.stop()
