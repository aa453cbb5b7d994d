"""Several runs side by side: a row of numbers per run, from the files each run left, and
their validation curves in one figure.

A row reads a training workdir's summary.json (and metrics.jsonl for its curve) or an n-gram
directory's ngram.json (nplm ngram --out); nothing is loaded or recomputed. Perplexities on
different vocabularies are not comparable (DESIGN.md, "Rules of the numbers"): runs are grouped
by vocabulary (the vocabulary fingerprint run.json or ngram.json records, or the data
fingerprint, which digests the vocabulary and every split), and only runs of one vocabulary are
ranked; otherwise the rows keep the order
given and a warning names each vocabulary's runs. A training run without summary.json
(still training, interrupted or diverged) is a row marked unfinished, with what run.json,
vocab.txt and metrics.jsonl tell. A run that ended other than by its epochs or early
stopping (--max_steps, before its first validation or after) is a row like any other, its
ending in an `ended` column. In the figure each trained run's final exact validation
perplexity (the reported one, over the whole split, where the curve may have scored a part
of it) is a star, and a run without a curve (stopped before its first validation) is that
star alone; a run with no number to draw is named under the title.
"""

from __future__ import annotations

import json
import math
import os
import string
from pathlib import Path

from nplm import paths
from nplm.data.corpus import SPLITS
from nplm.data.vocab import Vocabulary
from nplm.display import duration
from nplm.errors import ConfigError
from nplm.files import save_figure_atomically
from nplm.run_files.plots import compared_curves, read_metrics, validated_part
from nplm.run_files.summary import SummaryDamaged, read_summary


def read_runs(workdirs: list[str]) -> list[dict]:
  """A row per workdir, as typed, in the order given, each with its vocabulary's letter."""
  if not workdirs:
    raise ConfigError('name the runs to compare: nplm compare runs/a runs/b ...')
  rows = [read_run(workdir) for workdir in workdirs]
  for row, group in zip(rows, vocabulary_groups(rows)):
    row['vocabulary'] = string.ascii_uppercase[group % 26] + ('' if group < 26 else
                                                              str(group // 26))
  return rows


def read_run(typed: str) -> dict:
  """The row of a training workdir or an n-gram directory; a one-line error for anything
  else."""
  where = Path(paths.absolute(typed))
  if not where.is_dir():
    raise ConfigError(f'{typed}: no such directory; name a training workdir or an nplm '
                      'ngram --out directory')
  if (where / 'ngram.json').is_file():
    return _ngram_row(typed, _json(where / 'ngram.json'))
  if not (where / 'run.json').is_file() or not (where / 'vocab.txt').is_file():
    raise ConfigError(f'{typed} holds no run (neither run.json and vocab.txt nor '
                      'ngram.json); name a training workdir or an nplm ngram --out directory')
  identity = _json(where / 'run.json')
  try:  # Checked against its checksum: a hand-edited summary is never shown as a run's.
    summary = read_summary(where)
  except SummaryDamaged as error:
    raise ConfigError(f'{error}, or leave that run out') from None
  if summary is not None:
    row = _trained_row(typed, summary)
  else:
    row = _unfinished_row(typed, identity, where)
  row['vocab_fingerprint'] = identity.get('vocab_fingerprint')
  row['valid_curve'], row['valid_curve_part'] = _valid_curve(where)
  return row


def _json(path: Path) -> dict:
  try:
    value = json.loads(path.read_text(encoding='utf-8'))
  except (OSError, ValueError) as error:
    raise ConfigError(f'{paths.shown(path)} cannot be read ({error}); restore it or leave '
                      'that run out') from None
  if not isinstance(value, dict):
    raise ConfigError(f'{paths.shown(path)} is damaged (not a JSON object); restore it')
  return value


def _split_values(summary: dict, name: str) -> dict:
  """A per-split figure as {split: value}, from {name: {split: value}} or '{split}_{name}'."""
  recorded = summary.get(name)
  if isinstance(recorded, dict):
    return {split: recorded.get(split) for split in SPLITS}
  return {split: summary.get(f'{split}_{name}') for split in SPLITS}


def _trained_row(typed: str, summary: dict) -> dict:
  config = summary.get('config', {})
  return {'workdir': typed, 'kind': 'trained', 'finished': True,
          'dataset': summary.get('dataset'), 'tokens': config.get('tokens'),
          'vocab_size': summary.get('vocab_size'), 'model': config.get('model'),
          'head': config.get('head'), 'parameters': summary.get('parameters'),
          'ppl': _split_values(summary, 'ppl'), 'word_ppl': _split_values(summary, 'word_ppl'),
          'open_ppl': _split_values(summary, 'open_ppl'),
          'bpc': _split_values(summary, 'bpc'), 'wall_seconds': summary.get('wall_seconds'),
          'examples_per_second': summary.get('train_examples_per_second'),
          'data_fingerprint': summary.get('data_fingerprint'), 'status': summary.get('status'),
          'steps': summary.get('steps'), 'epochs': summary.get('epochs'),
          'best_epoch': summary.get('best_epoch'),
          'reported_parameters': (summary.get('reported') or {}).get('parameters')}


def _unfinished_row(typed: str, identity: dict, where: Path) -> dict:
  """What is known of a run that has written no summary yet."""
  config = identity.get('config') if isinstance(identity.get('config'), dict) else {}
  nothing = dict.fromkeys(SPLITS)
  return {'workdir': typed, 'kind': 'trained', 'finished': False,
          'dataset': config.get('dataset'), 'tokens': config.get('tokens'),
          'vocab_size': _vocabulary_size(where / 'vocab.txt'),
          'model': config.get('model'), 'head': config.get('head'), 'parameters': None,
          'ppl': nothing, 'word_ppl': nothing, 'open_ppl': nothing, 'bpc': nothing,
          'wall_seconds': None,
          'examples_per_second': None, 'data_fingerprint': identity.get('data_fingerprint'),
          'status': 'unfinished', 'steps': None, 'epochs': None, 'best_epoch': None,
          'reported_parameters': None}


def _vocabulary_size(path: Path) -> int | None:
  """|V| of an unfinished run's vocab.txt; None (shown as '-') where it cannot be read: its
  reader (nplm evaluate, predict) says why."""
  try:
    return Vocabulary.load(path).size
  except (OSError, ValueError):
    return None


def _ngram_row(typed: str, summary: dict) -> dict:
  name = f'KN{summary.get("order")}' if summary.get('model') == 'kn' else 'DelInt3'
  return {'workdir': typed, 'kind': 'ngram', 'finished': True,
          'dataset': summary.get('dataset'), 'tokens': summary.get('tokenization'),
          'vocab_size': summary.get('vocab_size'), 'model': name, 'head': None,
          'parameters': None, 'ppl': _split_values(summary, 'ppl'),
          'word_ppl': _split_values(summary, 'word_ppl'), 'bpc': _split_values(summary, 'bpc'),
          'open_ppl': _split_values(summary, 'open_ppl'),
          'wall_seconds': summary.get('wall_seconds'), 'examples_per_second': None,
          'data_fingerprint': summary.get('data_fingerprint'),
          'vocab_fingerprint': summary.get('vocab_fingerprint'), 'valid_curve': [],
          'valid_curve_part': '', 'status': 'fitted', 'steps': None, 'epochs': None,
          'best_epoch': None, 'reported_parameters': None}


def _valid_curve(where: Path) -> tuple[list[dict], str]:
  """[{'epoch', 'ppl'}] from metrics.jsonl's validation records (none if it has none), and
  what they scored where it was a part of the split (plots.validated_part; else '')."""
  if not (where / 'metrics.jsonl').is_file():
    return [], ''
  records = [record for record in read_metrics(where).get('valid', [])
             if 'epoch' in record and 'ppl' in record]
  return ([{'epoch': record['epoch'], 'ppl': record['ppl']} for record in records],
          validated_part(records))


def vocabulary_groups(rows: list[dict]) -> list[int]:
  """A group number per row, 0 first: rows share one when their vocabulary fingerprints are
  equal or their data fingerprints are (a fingerprint digests the vocabulary: equal ones mean equal
  vocabularies), and so transitively."""
  group = list(range(len(rows)))

  def root(i: int) -> int:
    while group[i] != i:
      i = group[i]
    return i

  for i, a in enumerate(rows):
    for j, b in enumerate(rows[:i]):
      if any(a.get(key) is not None and a.get(key) == b.get(key)
             for key in ('vocab_fingerprint', 'data_fingerprint')):
        group[root(i)] = root(j)
  numbers = {}
  return [numbers.setdefault(root(i), len(numbers)) for i in range(len(rows))]


def vocabularies_differ(rows: list[dict]) -> bool:
  return len({row['vocabulary'] for row in rows}) > 1


def ranked(rows: list[dict]) -> list[dict]:
  """Rows of one vocabulary by valid perplexity, best first (unfinished last); rows of
  several, as given: their perplexities do not rank."""
  if vocabularies_differ(rows):
    return list(rows)
  return sorted(rows, key=lambda row: (row['ppl']['valid'] is None,
                                       row['ppl']['valid'] or 0.0))


def warning(rows: list[dict]) -> str | None:
  """The one line that says which runs share which vocabulary, when they do not all."""
  if not vocabularies_differ(rows):
    return None
  groups = {}
  for row in rows:
    groups.setdefault(row['vocabulary'], []).append(row)
  named = '; '.join(f'{letter} (|V| = {_count(members[0]["vocab_size"])}): '
                    f'{", ".join(row["workdir"] for row in members)}'
                    for letter, members in groups.items())
  return (f'warning: {len(groups)} vocabularies, so these perplexities are not comparable '
          f'across them (per-word perplexity is); rows not ranked. Vocabularies {named}')


def _count(value) -> str:
  return '-' if value is None else f'{value:,}'


def _number(value, digits: int = 2) -> str:
  return '-' if value is None or not math.isfinite(value) else f'{value:,.{digits}f}'


def _duration(seconds) -> str:
  return '-' if seconds is None else duration(seconds)


# How a run ended, as its row says it; the first two (and an n-gram fit) go without saying.
_ENDINGS = {'epochs_done': 'epochs', 'early_stopped': 'early stop', 'fitted': '-',
            'max_steps': '--max_steps', 'interrupted': 'interrupted', 'diverged': 'diverged',
            'unfinished': 'unfinished'}


def ended(row: dict) -> str:
  """How the run ended: 'epochs', 'early stop', '--max_steps at 5 (no validation)', …"""
  status = row.get('status')
  text = _ENDINGS.get(status, status or '-')
  if status == 'max_steps':
    steps = f' at {row["steps"]:,}' if row.get('steps') is not None else ''
    text += steps + ('' if row['valid_curve'] else ' (no validation)')
  return text


def _ended_otherwise(rows: list[dict]) -> bool:
  return any(row.get('status') not in ('epochs_done', 'early_stopped', 'fitted')
             for row in rows)


def table(rows: list[dict]) -> list[str]:
  """The rows as aligned text lines: a header, a rule, a line per run; the open
  vocabulary's perplexity (unknown words spelt), per-word perplexity and bits per character
  only where some run has them, the vocabulary where they differ."""
  columns = [('workdir', lambda r: r['workdir']),
             ('dataset', lambda r: paths.shown_dataset(r['dataset'] or '-')),
             ('|V|', lambda r: _count(r['vocab_size'])), ('model', lambda r: r['model'] or '-'),
             ('head', lambda r: r['head'] or '-'), ('params', lambda r: _count(r['parameters'])),
             ('valid ppl', lambda r: _number(r['ppl']['valid']) if r['finished']
              else 'unfinished'),
             ('test ppl', lambda r: _number(r['ppl']['test']))]
  for name, label, digits in (('open_ppl', 'open ppl', 2), ('word_ppl', 'word ppl', 2),
                              ('bpc', 'bpc', 4)):
    if any(r[name][split] is not None for r in rows for split in ('valid', 'test')):
      columns += [(f'{split} {label}', lambda r, s=split, n=name, d=digits: _number(r[n][s], d))
                  for split in ('valid', 'test')]
  columns += [('wall', lambda r: _duration(r['wall_seconds'])),
              ('examples/s', lambda r: _number(r['examples_per_second'], 0))]
  if _ended_otherwise(rows):
    columns.append(('ended', ended))
  if vocabularies_differ(rows):
    columns.append(('vocab', lambda r: r['vocabulary']))
  cells = [[name for name, _ in columns]] + [[cell(r) for _, cell in columns] for r in rows]
  widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
  text_columns = {'workdir', 'dataset', 'model', 'head', 'ended', 'vocab'}
  lines = ['  '.join(value.ljust(width) if name in text_columns else value.rjust(width)
                     for value, width, (name, _) in zip(line, widths, columns)).rstrip()
           for line in cells]
  return lines[:1] + ['-' * len(lines[0])] + lines[1:]


def figure(rows: list[dict]):
  """Every run's validation perplexity by epoch in one plot (n-gram runs: a level line), each
  trained run's final exact validation perplexity a star (the module docstring says why)."""
  curves, stars, undrawn = [], [], []
  for row in rows:
    label, final = f'{row["workdir"]} ({row["model"]})', row['ppl']['valid']
    if row['kind'] == 'ngram':
      if final is not None:
        curves.append({'label': label, 'level': final})
      continue
    if row['valid_curve']:
      part = row['valid_curve_part']
      curves.append({'label': label + (f', validated on {part}' if part else ''),
                     'epochs': [p['epoch'] for p in row['valid_curve']],
                     'ppl': [p['ppl'] for p in row['valid_curve']]})
    elif final is not None:
      curves.append({'label': f'{label}, {ended(row)}', 'epochs': [_final_epoch(row)],
                     'ppl': [final]})
    else:
      undrawn.append(row['workdir'])
    if final is not None:
      stars.append((len(curves) - 1, _final_epoch(row), final))
  notes = []
  if vocabularies_differ(rows):
    notes.append('vocabularies differ: perplexities not comparable across them')
  if undrawn:
    notes.append(f'no validation perplexity to draw: {", ".join(undrawn)}')
  drawn = compared_curves(curves, '\n'.join(notes))
  _draw_stars(drawn, stars)
  return drawn


def _final_epoch(row: dict) -> float:
  """Where a run's final perplexity stands on the epoch axis: its best epoch where the
  best validated parameters were reported, else its last epoch (0 before the first ended)."""
  if row['reported_parameters'] == 'best' and row['best_epoch'] is not None:
    return row['best_epoch']
  if row['epochs'] is not None:
    return row['epochs']
  return max((point['epoch'] for point in row['valid_curve']), default=0)


def _draw_stars(drawn, stars: list[tuple[int, float, float]]) -> None:
  """A star per (curve index, epoch, final perplexity), in its curve's colour, and one
  legend entry saying what a star is."""
  if not stars:
    return
  from matplotlib.lines import Line2D
  axes = drawn.axes[0]
  for index, epoch, ppl in stars:  # Markers, not lines: the curves stay the axes' lines.
    axes.scatter([epoch], [ppl], s=160, marker='*', color=f'C{index % 10}',
                 edgecolors='black', zorder=3)
  handles, labels = axes.get_legend_handles_labels()
  key = Line2D([], [], marker='*', markersize=10, color='0.5', markeredgecolor='black',
               linestyle='none')
  axes.legend(handles + [key], labels + ['final exact valid perplexity (whole split)'],
              fontsize=8, loc='upper left', bbox_to_anchor=(1.01, 1))


def report(rows: list[dict]) -> dict:
  """The comparison as JSON: the rows (ranked when comparable) and the warning, if any."""
  return {'runs': ranked(rows), 'vocabularies_differ': vocabularies_differ(rows),
          'warning': warning(rows)}


def save_figure(rows: list[dict], path: str | os.PathLike) -> None:
  """figure(rows) as a PNG at `path`, whole or not at all."""
  folder = Path(paths.absolute(path)).parent
  if not folder.is_dir():
    raise ConfigError(f'no directory {paths.shown(folder)} to write --out={path} in; create '
                      'it or name another')
  save_figure_atomically(figure(rows), path)
