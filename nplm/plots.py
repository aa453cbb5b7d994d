"""Pictures of a run and of a sweep: the learning curve, and perplexity across the points.

matplotlib's object API (Figure, no pyplot): no global figure state, nothing shown, and a
PNG written whole or not at all (nplm.files.save_figure_atomically).
"""

import json
import logging
import math
from pathlib import Path

from nplm.files import save_figure_atomically

log = logging.getLogger(__name__)


def read_metrics(workdir: str | Path) -> dict[str, list[dict]]:
  """metrics.jsonl by kind ('train', 'valid'), in step order. A resumed run may have written
  a step twice (nplm.metrics): its last record counts. A line cut short (a kill or a full
  disk mid-write, the next record appended to it) is skipped: the picture misses a point,
  and the numbers that matter are in summary.json."""
  records, skipped = {}, 0
  for line in (Path(workdir) / 'metrics.jsonl').read_text(errors='replace').splitlines():
    try:
      record = json.loads(line)
      records[record['kind'], record['step']] = record
    except (ValueError, KeyError, TypeError):
      skipped += 1
  if skipped:
    log.warning('%s/metrics.jsonl: skipped %d damaged line(s).', workdir, skipped)
  by_kind = {}
  for (kind, _), record in sorted(records.items()):
    by_kind.setdefault(kind, []).append(record)
  return by_kind


def learning_curve(workdir: str | Path) -> Path:
  """<workdir>/learning_curve.png: training loss and exact validation perplexity by update."""
  from matplotlib.figure import Figure  # Only drawing pays for importing matplotlib.
  metrics = read_metrics(workdir)
  figure = Figure(figsize=(11, 4))
  loss, perplexity = figure.subplots(1, 2)
  train = metrics.get('train', [])
  loss.plot([r['step'] for r in train], [r['loss'] for r in train])
  loss.set(xlabel='update', ylabel='training loss (nats)', title='Training loss')
  valid = metrics.get('valid', [])
  perplexity.plot([r['step'] for r in valid], [r['ppl'] for r in valid], marker='o')
  for r in valid:
    perplexity.annotate(f'epoch {r["epoch"]}', (r['step'], r['ppl']), fontsize=8,
                        textcoords='offset points', xytext=(4, 4))
  perplexity.set(xlabel='update', ylabel='perplexity', title='Validation perplexity (exact)')
  path = Path(workdir) / 'learning_curve.png'
  save_figure_atomically(figure, path)
  return path


def sweep_results(rows: list[dict], path: str | Path) -> Path:
  """Valid and test perplexity of every point of a sweep (nplm.sweep rows), one bar pair
  a point, named as its workdir is."""
  from matplotlib.figure import Figure
  figure = Figure(figsize=(max(6, 1.2 * len(rows)), 4))
  axes = figure.add_subplot()
  positions = range(len(rows))
  for offset, split in ((-0.2, 'valid'), (0.2, 'test')):
    heights = [math.nan if r[f'{split}_ppl'] is None else r[f'{split}_ppl'] for r in rows]
    axes.bar([p + offset for p in positions], heights, width=0.4, label=split)  # A diverged
    # point (no perplexity) keeps its place, with no bar.
  axes.set_xticks(list(positions), [r['point'] for r in rows], rotation=30, ha='right',
                  fontsize=8)
  axes.set(ylabel='perplexity (exact)', title='Sweep: perplexity per point')
  axes.legend()
  save_figure_atomically(figure, path)
  return Path(path)
