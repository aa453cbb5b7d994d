"""Pictures of a run and of a sweep: the learning curve, perplexity across the points, and
several runs' validation curves in one plot.

matplotlib's object API (Figure, no pyplot): no global figure state, nothing shown, and a
PNG written whole or not at all (nplm.files.save_figure_atomically).
"""

import json
import logging
import math
from pathlib import Path

from nplm.files import save_figure_atomically

log = logging.getLogger(__name__)

# More epoch labels than this on the validation curve pile up on one another (--eval_every).
MOST_EPOCH_LABELS = 12


def read_metrics(workdir: str | Path) -> dict[str, list[dict]]:
  """metrics.jsonl by kind ('train', 'valid'), in step order. A resumed run may have written
  a step twice (nplm.run_files.metrics): its last record counts. A line cut short (a kill or a full
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
  """<workdir>/learning_curve.png: learning_curve_figure of its metrics.jsonl."""
  path = Path(workdir) / 'learning_curve.png'
  save_figure_atomically(learning_curve_figure(read_metrics(workdir)), path)
  return path


def learning_curve_figure(metrics: dict[str, list[dict]]):
  """A Figure of training loss, exact validation perplexity and the learning rate by update
  (read_metrics' records); a panel with nothing to draw yet says so (a run stopped before
  its first validation, metrics written before the rate was recorded)."""
  from matplotlib.figure import Figure  # Only drawing pays for importing matplotlib.
  figure = Figure(figsize=(16, 4), layout='constrained')
  loss, perplexity, rate = figure.subplots(1, 3)
  train = metrics.get('train', [])
  loss.plot([r['step'] for r in train], [r['loss'] for r in train], marker=_marker(train))
  loss.set(xlabel='update', ylabel='training loss (nats)', title='Training loss')
  if not train:
    _say(loss, 'no progress record yet')
  _validation_panel(perplexity, metrics.get('valid', []))
  _learning_rate_panel(rate, train)
  return figure


def _validation_panel(axes, valid: list[dict]) -> None:
  axes.plot([r['step'] for r in valid], [r['ppl'] for r in valid], marker='o')
  if len(valid) <= MOST_EPOCH_LABELS:
    for r in valid:
      # Slanted up and away from the point: clear of a flat tail's line and of neighbours.
      axes.annotate(epoch_label(r['epoch']), (r['step'], r['ppl']), fontsize=8,
                    textcoords='offset points', xytext=(3, 6), rotation=30)
    axes.margins(x=0.1, y=0.18)  # Room for the first and last labels inside the frame.
  part = validated_part(valid)
  axes.set(xlabel='update', ylabel='perplexity',
           title=f'Validation perplexity (exact{f", on {part}" if part else ""})')
  if not valid:
    _say(axes, 'no validation record')


def _marker(records: list) -> str | None:
  """Points marked where there are few (a short run's one or two records draw no line)."""
  return 'o' if len(records) <= MOST_EPOCH_LABELS else None


def epoch_label(epoch: int | float) -> str:
  """'epoch 3' at an epoch's end (an int), 'epoch 2.50' part-way through one (--eval_every)."""
  return f'epoch {epoch}' if isinstance(epoch, int) else f'epoch {epoch:.2f}'


def _learning_rate_panel(axes, train: list[dict]) -> None:
  """Each update's rate; a log axis where the rates span more than 10× (a warm-up from
  near 0, an inverse or step decay), where a linear one would flatten all but the peak."""
  rated = [r for r in train if 'learning_rate' in r]  # Older records have none.
  rates = [r['learning_rate'] for r in rated]
  axes.plot([r['step'] for r in rated], rates, marker=_marker(rated))
  axes.set(xlabel='update', ylabel='learning rate', title='Learning rate')
  # A rate of 0 (a schedule decayed to its end) has no place on a log axis: linear then.
  if rates and min(rates) > 0 and max(rates) > 10 * min(rates):
    axes.set_yscale('log')
  if not train:
    _say(axes, 'no progress record yet')
  elif not rated:
    _say(axes, 'no learning rate in these records\n(written before nplm recorded it)')


def validated_part(valid: list[dict]) -> str:
  """'the first N of M valid tokens' where the validations (metrics.jsonl's
  'valid' records) scored a part of the split (--valid_tokens_per_eval), else ''."""
  partial = [r for r in valid if r.get('tokens') != r.get('of')]  # Older records: neither.
  return (f'the first {partial[0]["tokens"]:,} of {partial[0]["of"]:,} valid tokens'
          if partial else '')


def _say(axes, text: str) -> None:
  """An empty panel that explains itself rather than looking broken."""
  axes.text(0.5, 0.5, text, ha='center', va='center', transform=axes.transAxes, fontsize=11,
            color='0.4')
  axes.set_xticks([])
  axes.set_yticks([])


def sweep_results(rows: list[dict], path: str | Path,
                  baseline: tuple[str, float] | None = None) -> Path:
  """Valid and test perplexity of every point of a sweep (nplm.studies.sweep rows), one pair of
  horizontal bars a point, named as its workdir is; the axis spans the data (not from zero:
  a 159-192 spread must show), and `baseline` (name, test perplexity) is a reference line."""
  from matplotlib.figure import Figure
  figure = Figure(figsize=(9, 1.2 + 0.55 * len(rows)), layout='constrained')
  axes = figure.add_subplot()
  positions = range(len(rows))
  values = []
  for offset, split, color in ((-0.2, 'valid', 'tab:blue'), (0.2, 'test', 'tab:orange')):
    widths = [math.nan if r[f'{split}_ppl'] is None else r[f'{split}_ppl'] for r in rows]
    bars = axes.barh([p + offset for p in positions], widths, height=0.4, label=split,
                     color=color)  # A diverged point (no perplexity) keeps its place, bare.
    axes.bar_label(bars, fmt='%.1f', padding=2, fontsize=8)
    values += [w for w in widths if math.isfinite(w)]
  if baseline:
    name, value = baseline
    axes.axvline(value, color='0.2', linestyle='--', linewidth=1,
                 label=f'{name} test {value:.1f}')
    values.append(value)
  if values:
    axes.set_xlim(*value_range(values))
  axes.set_yticks(list(positions), [r['point'] for r in rows], fontsize=8)
  axes.invert_yaxis()  # The first point on top, as in results.md.
  axes.set(xlabel='perplexity (exact; lower is better)', title='Sweep: perplexity per point')
  axes.legend(fontsize=8, loc='upper left', bbox_to_anchor=(1.01, 1))
  save_figure_atomically(figure, path)
  return Path(path)


def value_range(values: list[float]) -> tuple[float, float]:
  """An axis range around the values, with room on the right for the bars' labels."""
  low, high = min(values), max(values)
  span = max(high - low, 0.05 * high, 1e-9)
  return max(0.0, low - 0.3 * span), high + 0.25 * span


def compared_curves(curves: list[dict], note: str = ''):
  """A Figure of every run's validation perplexity by epoch, one line a run: a curve where
  `epochs` and `ppl` are given, a dashed level line where only `level` is (a count model,
  which has no epochs). Each curve: {'label', 'epochs', 'ppl'} or {'label', 'level'}."""
  from matplotlib.figure import Figure
  from matplotlib.ticker import MaxNLocator, StrMethodFormatter
  figure = Figure(figsize=(9, 5.5), layout='constrained')
  axes = figure.add_subplot()
  for index, curve in enumerate(curves):
    color = f'C{index % 10}'  # One colour a run, curves and level lines alike.
    if curve.get('level') is not None:
      axes.axhline(curve['level'], linestyle='--', linewidth=1.2, label=curve['label'],
                   color=color)
    else:
      axes.plot(curve['epochs'], curve['ppl'], marker='o', markersize=3, label=curve['label'],
                color=color)
  axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # Epochs are whole.
  # Log scale: runs hundreds apart and a late epoch's 2% gain both show.
  axes.set_yscale('log')
  for axis_ticks in (axes.yaxis.set_major_formatter, axes.yaxis.set_minor_formatter):
    axis_ticks(StrMethodFormatter('{x:g}'))  # 200, not 2×10².
  axes.set(xlabel='epoch', ylabel='validation perplexity (exact, log scale; lower is better)',
           title='Validation perplexity' + (f'\n{note}' if note else ''))
  if curves:
    axes.legend(fontsize=8, loc='upper left', bbox_to_anchor=(1.01, 1))
  return figure
