"""The sweep cases of experiments.fault_injection --mode=cases (issue 42): `nplm sweep` with
`nplm train`'s flags and a --grid, as a user types it (relative --out, from OUT), a named
sweep rerun after a point's summary.json was cut short, a named sweep with data flags, and the
mistakes a user makes with --grid. Each row says what came of the case, so an old checkout's
table (which knows no --grid) and a new one's read side by side."""

import csv
import json
from pathlib import Path

from experiments.fault_harness import nplm, run

# Caps the sweeps' points (CASE_FLAGS train 3 epochs of 376 updates): seconds a point.
SWEEP_STEPS = 60


def sweep_argv(c, *args) -> list[str]:
  """`nplm sweep` with the cases' dataset, data dir and model (Cases.common), then `args`."""
  return nplm('sweep', *(f'--{k}={v}' for k, v in c.common.items()), *args)


def _rows(out: Path) -> list[dict]:
  try:
    with open(out / 'results.csv', newline='') as f:
      return list(csv.DictReader(f))
  except OSError:
    return []


def _summary(workdir: Path) -> dict | str:
  try:
    return json.loads((workdir / 'summary.json').read_text())
  except OSError:
    return 'none'
  except ValueError:
    return 'damaged'


def _evaluated(out: Path, rows: list[dict]) -> str:
  """Which splits each point's final evaluation scored (from its summary.json)."""
  scored = []
  for row in rows:
    summary = _summary(out / row['point'])
    scored.append(','.join(summary.get('evaluated', {})) if isinstance(summary, dict)
                  else summary)
  return '; '.join(scored) or 'no points'


def _header(result: dict) -> str:
  return next((line.split(' ', 1)[1][:120] for line in result['stderr']
               if 'sweep of' in line), 'no header line')


def case_sweep_grid(c) -> None:
  """S1: a grid over any dataset with a tokenizer, relative --out, from OUT."""
  out = c.out / 'sweeps' / 'grid'
  argv = sweep_argv(c, '--tokenizer=nltk', '--lowercase', '--grid=learning_rate=0.01,0.003',
                    f'--max_steps={SWEEP_STEPS}', '--out=sweeps/grid')
  result = run(argv, c.checkout, cwd=c.out)
  rows = _rows(out)
  c.row('S1 sweep --tokenizer=nltk --lowercase --grid=learning_rate=0.01,0.003 '
        '--out=sweeps/grid (relative, from OUT)', argv, result,
        f'points {[row["point"] for row in rows]}; scored {_evaluated(out, rows)}; '
        f'header: {_header(result)}')


def case_sweep_damaged_summary(c) -> None:
  """S2: a named sweep with the flags every checkout knows, then its rerun after one point's
  summary.json was cut in half (a full disk, a kill mid-write, an old nplm)."""
  out = c.out / 'sweeps' / 'named'
  argv = nplm('sweep', '--sweep=table1_direct', f'--dataset=text:{c.corpus}',
              f'--data_dir={c.data}', '--epochs=1', f'--max_steps={SWEEP_STEPS}',
              f'--root={out}')
  result = run(argv, c.checkout)
  rows = _rows(out)
  c.row('S2 sweep --sweep=table1_direct (its flags only)', argv, result,
        f'points {[row["point"] for row in rows]}; scored {_evaluated(out, rows)}')
  damaged = out / (rows[0]['point'] if rows else 'direct=True') / 'summary.json'
  if damaged.exists():
    text = damaged.read_text()
    damaged.write_text(text[:len(text) // 2])
  result = run(argv, c.checkout)
  trained = sum('training in' in line for line in result['stderr'])
  reused = sum('reused from' in line for line in result['stderr'])
  after = _summary(damaged.parent)
  c.row("S2 the same sweep rerun after a point's summary.json was cut in half", argv, result,
        f'points trained {trained}, reused {reused}; its summary.json after: '
        f'{after if isinstance(after, str) else after.get("status")}')


def case_sweep_named(c) -> None:
  """S3: a named sweep given `nplm train`'s flags (the cases' model, --unk_max_count) and a
  --grid."""
  out = c.out / 'sweeps' / 'named_grid'
  argv = sweep_argv(c, '--sweep=table1_direct', '--unk_max_count=1', '--grid=seed=0,1',
                    f'--max_steps={SWEEP_STEPS}', f'--root={out}')
  result = run(argv, c.checkout)
  rows = _rows(out)
  c.row('S3 sweep --sweep=table1_direct --unk_max_count=1 --grid=seed=0,1', argv, result,
        f'points {[row["point"] for row in rows]}; scored {_evaluated(out, rows)}')


def case_sweep_mistakes(c) -> None:
  """S4: --grid mistakes (a misspelt field, a field a sweep cannot vary, a value of the wrong
  type) and a sweep with nothing to vary: each one line, before any data is read."""
  for case, args in (('S4 --grid with a misspelt field', ['--grid=learnig_rate=0.1,0.01']),
                     ('S4 --grid=workdir=a,b', ['--grid=workdir=a,b']),
                     ('S4 --grid=dropout=0,high', ['--grid=dropout=0,high']),
                     ('S4 sweep with neither --sweep nor --grid', [])):
    out = c.out / 'sweeps' / 'mistake'
    argv = sweep_argv(c, *args, f'--max_steps={SWEEP_STEPS}', f'--out={out}')
    result = run(argv, c.checkout)
    c.row(case, argv, result, f'trained: {"yes" if out.exists() else "no"}')


CASES = (case_sweep_grid, case_sweep_damaged_summary, case_sweep_named,
         case_sweep_mistakes)
