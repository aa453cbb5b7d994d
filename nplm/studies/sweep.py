"""Sweeps: many runs that differ from one base Config by a few fields, each in its own
workdir under one root, and their results as one table.

A sweep is a list of points, each a dict of Config overrides, built by grid (every
combination), zipped (lists paired) or random_search (sampled from a seed), or read from the
command line (parse_grid: `--grid=learning_rate=0.1,0.03`). run_sweep checks every point
before training any, so a typo in the last point costs nothing; it reuses the points already
finished and resumes an interrupted one (or one whose summary.json was damaged), so a sweep
is rerun, not restarted.
"""

import csv
import dataclasses
import difflib
import hashlib
import io
import itertools
import logging
import math
import random
import re
from pathlib import Path
from typing import Any, Callable

from nplm import parallel, paths, trainer
from nplm.run_files import plots
from nplm.config import DATA_FIELDS, Config, ConfigError
from nplm.data.corpus import Corpus
from nplm.data.datasets import load_dataset
from nplm.display import counted
from nplm.files import write_text_atomically
from nplm.run_files.summary import RunStatus, finished_summary
from nplm.training.config_checks import settled

log = logging.getLogger(__name__)

# What each row reports of a point's summary, after its overrides (train_ppl only where a
# point's --eval_splits scored the train split).
RESULTS = ('train_ppl', 'valid_ppl', 'test_ppl', 'vocab_size', 'epochs', 'wall_seconds',
           'train_examples_per_second', 'status', 'workdir')
_FIELDS = tuple(field.name for field in dataclasses.fields(Config))
_TYPES = {field.name: field.type for field in dataclasses.fields(Config)}
# Fields one sweep holds for all its points, and why.
_IN_ITS_PROCESSES = "the sweep's points run in the processes it started in"
FIXED_IN_A_SWEEP = {
    'workdir': 'the sweep gives each point a workdir of its own, <root>/<point>',
    **{name: _IN_ITS_PROCESSES
       for name in ('distributed', 'coordinator_address', 'num_processes', 'process_id')}}
_MAX_NAME = 200  # Bytes, well under the 255 most filesystems allow for one name.


class SweepInterrupted(RuntimeError):
  """A point's training was stopped (Ctrl-C, SIGTERM) after saving a checkpoint."""


# --- sweep definitions ----------------------------------------------------------------

def _check_fields(names) -> None:
  unknown = [_with_close_match(name) for name in names if name not in _FIELDS]
  if unknown:
    raise ConfigError(f'unknown Config fields in the sweep: {", ".join(unknown)}')


def _with_close_match(name: str) -> str:
  close = difflib.get_close_matches(name, _FIELDS, n=1)
  return f'{name} (did you mean {close[0]}?)' if close else name


def grid(**axes: list) -> list[dict]:
  """Every combination of the axes' values, the last axis varying fastest."""
  _check_fields(axes)
  return [dict(zip(axes, values)) for values in itertools.product(*axes.values())]


def zipped(**axes: list) -> list[dict]:
  """The i-th point takes the i-th value of every axis; the axes must be equally long."""
  _check_fields(axes)
  lengths = {name: len(values) for name, values in axes.items()}
  if len(set(lengths.values())) > 1:
    raise ConfigError(f'zipped axes differ in length: {lengths}')
  return [dict(zip(axes, values)) for values in zip(*axes.values())]


def random_search(seed: int, count: int, **axes) -> list[dict]:
  """`count` points drawn from a seed: an axis that is a list gives one of its values; one
  that is a (low, high, 'log' | 'linear') tuple, a float uniform in [low, high] (in log space
  for 'log', as learning rates are searched)."""
  _check_fields(axes)
  for name, axis in axes.items():
    if isinstance(axis, tuple):
      if len(axis) != 3 or axis[2] not in ('log', 'linear') or not axis[0] < axis[1]:
        raise ConfigError(f'{name}: a range is (low, high, "log" | "linear") with low < high, '
                          f'got {axis!r}')
      if axis[2] == 'log' and axis[0] <= 0:
        raise ConfigError(f'{name}: a log range needs low > 0, got {axis!r}')
    elif not axis:
      raise ConfigError(f'{name}: no values to choose from')
  rng = random.Random(seed)

  def draw(axis):
    if not isinstance(axis, tuple):
      return rng.choice(axis)
    low, high, scale = axis
    if scale == 'linear':
      return rng.uniform(low, high)
    return math.exp(rng.uniform(math.log(low), math.log(high)))

  return [{name: draw(axis) for name, axis in axes.items()} for _ in range(count)]


def parse_grid(axes: list[str]) -> dict[str, list]:
  """{field: values} from `FIELD=V1,V2,...` strings (--grid, repeatable), each value read as
  the Config field's type; values that hold commas themselves (--split_fractions, --mesh)
  are separated by '|' instead. grid() of the result gives the points."""
  parsed = {}
  for axis in axes:
    name, values = _grid_axis(axis)
    if name in parsed:
      raise ConfigError(f'--grid names {name} twice: give its values in one --grid={name}=...')
    parsed[name] = values
  return parsed


def _grid_axis(axis: str) -> tuple[str, list]:
  name, equals, text = axis.partition('=')
  name = name.strip().lstrip('-')
  if not equals or not name or not text.strip():
    raise ConfigError(f'--grid={axis}: give a field and its values, e.g. '
                      '--grid=learning_rate=0.01,0.003')
  if name not in _FIELDS:
    raise ConfigError(f'--grid={axis}: no Config field {_with_close_match(name)}')
  if name in FIXED_IN_A_SWEEP:
    raise ConfigError(f'--grid={axis}: --{name} cannot vary in a sweep '
                      f'({FIXED_IN_A_SWEEP[name]})')
  texts = [value.strip() for value in text.split('|' if '|' in text else ',')]
  return name, [_typed(name, value, axis) for value in texts]


_BOOLS = {'true': True, 't': True, '1': True, 'false': False, 'f': False, '0': False}


def _typed(name: str, text: str, axis: str) -> Any:
  """A --grid value as its field's type, as absl reads the field's flag."""
  kind = _TYPES[name]
  try:
    if kind is bool:
      return _BOOLS[text.lower()]
    return kind(text)
  except (KeyError, ValueError):
    raise ConfigError(f'--grid={axis}: --{name} takes {kind.__name__} values, got '
                      f'{text!r}') from None


def crossed(points: list[dict], axes: dict[str, list]) -> list[dict]:
  """Every point of `points` with every combination of `axes` (a named sweep's points times
  a --grid); a field both set is refused."""
  both = sorted({name for point in points for name in point} & set(axes))
  if both:
    raise ConfigError(f'the sweep already varies {", ".join(both)}: leave it out of --grid')
  return [{**point, **extra} for point in points for extra in grid(**axes)]


def point_name(point: dict) -> str:
  """The point's workdir name: its overrides sorted by field, e.g. direct=True,hidden_size=50;
  characters a path cannot hold become '_', and a name too long keeps a hash of the whole."""
  if not point:
    return 'base'
  name = ','.join(f'{key}={point[key]}' for key in sorted(point))
  name = re.sub(r'[^A-Za-z0-9._+=,-]', '_', name)
  if name.startswith('.'):
    name = '_' + name[1:]
  if len(name) > _MAX_NAME:
    name = name[:_MAX_NAME - 9] + '~' + hashlib.sha256(name.encode()).hexdigest()[:8]
  return name


# --- running ---------------------------------------------------------------------------

def point_configs(base: Config, points: list[dict], root: str | Path) -> list[Config]:
  """Every point's Config, validated (a dry run of the sweep); a bad point raises
  ConfigError naming it."""
  configs, names, root = [], {}, Path(root)
  for point in points:
    _check_fields(point)
    name = point_name(point)
    if fixed := [field for field in FIXED_IN_A_SWEEP if field in point]:
      raise ConfigError(f'point {name}: --{fixed[0]} cannot vary in a sweep '
                        f'({FIXED_IN_A_SWEEP[fixed[0]]})')
    if name in names:
      raise ConfigError(f'points {names[name]} and {point} share the workdir {name}')
    names[name] = point
    try:
      configs.append(settled(base.replace(**point, workdir=str(root / name))))
    except ConfigError as error:
      raise ConfigError(f'point {name}: {error}') from None
  return configs


def run_sweep(base: Config, points: list[dict], root: str | Path,
              corpus: Corpus | None = None,
              run: Callable[[Config, Corpus], dict] = trainer.run,
              together: bool = False) -> list[dict]:
  """Trains (or reuses, or resumes) every point in root/<point_name(point)>; one row each.

  `corpus`, if given, is the one base's DATA_FIELDS name; otherwise it is loaded once
  and shared by every point (a point that overrides a data field gets its own, loaded once).
  `together`: the points left to train are trained at once, in one program
  (nplm.trainer.run of a list); they may differ only in PER_MODEL_FIELDS, and share the
  base's order of batches (--data_seed).
  """
  root = Path(root)
  if together:
    base = base.replace(data_seed=base.batch_order_seed)
  configs = point_configs(base, points, root)
  corpora = {}
  if corpus is not None:
    corpora[tuple(getattr(base, key) for key in DATA_FIELDS)] = corpus
  log.info('sweep of %s in %s, each scoring --eval_splits=%s: %s',
           counted(len(points), 'point'), paths.shown(root), base.eval_splits,
           ', '.join(map(point_name, points)))
  summaries = [_reusable_summary(point, config) for point, config in zip(points, configs)]
  left = [k for k, summary in enumerate(summaries) if summary is None]
  if together and left:
    log.info('training %d points together', len(left))
    trained = trainer.run([configs[k] for k in left], _corpus_for(base, corpora))
    for k, summary in zip(left, trained):
      summaries[k] = _finished(points[k], summary)
  else:
    for k in left:
      log.info('%s: training in %s', point_name(points[k]), paths.shown(configs[k].workdir))
      summaries[k] = _finished(points[k], run(configs[k], _corpus_for(configs[k], corpora)))
  return [{'point': point_name(point), 'overrides': dict(point),
           **{key: summary.get(key) for key in RESULTS if key != 'workdir'},
           'workdir': config.workdir}
          for point, config, summary in zip(points, configs, summaries)]


def _reusable_summary(point: dict, config: Config) -> dict | None:
  """The point's finished summary, if any (finished_summary). A summary.json that cannot be
  read (cut short by a full disk or a kill, edited) stands for no finished run: the point
  trains again, which resumes from its checkpoints (a finished run just evaluates) and writes
  summary.json anew, as rerunning its own `nplm train` would."""
  try:
    summary = finished_summary(config)
  except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
    why = (str(error).splitlines() or [type(error).__name__])[0][:160]
    log.warning('%s: %s cannot be read (%s); the point resumes from its checkpoints and '
                'writes it anew', point_name(point),
                paths.shown(Path(config.workdir) / 'summary.json'), why)
    return None
  if summary is not None:
    log.info('%s: reused from %s', point_name(point), paths.shown(config.workdir))
  return summary


def _finished(point: dict, summary: dict) -> dict:
  """The summary of a point's training, unless a stop request interrupted it."""
  if summary['status'] == RunStatus.INTERRUPTED:
    raise SweepInterrupted(f'point {point_name(point)} was interrupted at step '
                           f'{summary["steps"]}; rerun the same sweep to resume it')
  return summary


def _corpus_for(config: Config, corpora: dict) -> Corpus:
  key = tuple(getattr(config, name) for name in DATA_FIELDS)
  if key not in corpora:
    parallel.initialize_processes(config)  # Before any device is touched by the loading.
    corpora[key] = parallel.main_process_first(lambda: load_dataset(config.resolved()))
  return corpora[key]


# --- results ---------------------------------------------------------------------------

def _columns(rows: list[dict]) -> list[str]:
  """point, every overridden field (sorted; `set.<field>` where a result has its name), the
  results (train_ppl where every point scored the train split)."""
  fields = sorted({key for row in rows for key in row['overrides']})
  results = [key for key in RESULTS if key != 'train_ppl' or _all_scored_train(rows)]
  return ['point', *(f'set.{f}' if f in RESULTS else f for f in fields), *results]


def _all_scored_train(rows: list[dict]) -> bool:
  """Whether every point that did not diverge scored the train split (--eval_splits): a
  column that some points leave empty (those a sweep scoring train reused) compares nothing."""
  ended = [row for row in rows if row['status'] != 'diverged']
  return bool(ended) and all(row.get('train_ppl') is not None for row in ended)


def _flat(row: dict) -> dict:
  overrides = {f'set.{f}' if f in RESULTS else f: v for f, v in row['overrides'].items()}
  return {'point': row['point'], **overrides, **{key: row.get(key) for key in RESULTS}}


def member(row: dict) -> str:
  """A point as its values read (`learning_rate=0.01, dropout=0.25`, in the sweep's order):
  its workdir's name may have had characters replaced or been shortened."""
  return ', '.join(f'{key}={value}' for key, value in row['overrides'].items()) or 'base'


def _cell(value: Any) -> str:
  if isinstance(value, float):
    return f'{value:.1f}' if abs(value) >= 10 else f'{value:.4g}'
  return str(value)


def markdown(rows: list[dict]) -> str:
  """The rows rounded, to read; workdirs as one would type them here (nplm.paths.shown)."""
  columns = _columns(rows)
  lines = ['| ' + ' | '.join(columns) + ' |', '|' + '---|' * len(columns)]
  for row in map(_flat, rows):
    row['workdir'] = paths.shown(row['workdir'])
    lines.append('| ' + ' | '.join(_cell(row.get(c, '')) for c in columns) + ' |')
  return '\n'.join(lines) + '\n'


def write_results(rows: list[dict], root: str | Path,
                  baseline: tuple[str, float] | None = None) -> None:
  """root/results.csv (every digit, for programs), root/results.md (rounded, to read) and
  root/results.png (perplexity per point; `baseline` (name, test perplexity) a reference
  line)."""
  root = Path(root)
  root.mkdir(parents=True, exist_ok=True)
  text = io.StringIO()
  writer = csv.DictWriter(text, _columns(rows), lineterminator='\n', extrasaction='ignore')
  writer.writeheader()
  writer.writerows(map(_flat, rows))
  write_text_atomically(root / 'results.csv', text.getvalue())
  write_text_atomically(root / 'results.md', markdown(rows))
  plots.sweep_results([{**row, 'point': member(row)} for row in rows], root / 'results.png',
                      baseline)
