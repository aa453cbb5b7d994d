"""Where a run's numbers go: metrics.jsonl (one JSON object a line) and TensorBoard events
(the same scalars; at the end, the final perplexities, the hyperparameters and the config)."""

import json
import math
from pathlib import Path

from tensorboardX import SummaryWriter

from nplm.config import HEAD, MODEL, OPTIMIZER, PER_MODEL, group_of


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
    hyperparameters = {name: value for name, value in config.items()
                       if group_of(name) in (MODEL, HEAD, OPTIMIZER, PER_MODEL)}
    self._tensorboard.add_hparams(hyperparameters, finals, name='hparams', global_step=step)

  def close(self) -> None:
    if not self._enabled:
      return
    self._jsonl.close()
    self._tensorboard.close()
