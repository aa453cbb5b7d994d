r"""Two runs of the fault cases side by side: each case's outcome before and after a change.

  python -m experiments.fault_table BEFORE/cases.json AFTER/cases.json > before_after.md

Both runs must be of the same cases (experiments.fault_injection --mode=cases with the same
--cases, one with --checkout at the older commit)."""

import json
import sys

from experiments.fault_harness import markdown


def side_by_side(before: list[dict], after: list[dict]) -> str:
  if [row['case'] for row in before] != [row['case'] for row in after]:
    raise SystemExit('error: the two runs hold different cases; run the same --cases on both')
  rows = [{'case': old['case'], 'command': new['command'],
           'before: rc, stderr tail, outcome': _outcome(old),
           'after: rc, stderr tail, outcome': _outcome(new)} for old, new in zip(before, after)]
  return markdown(rows, list(rows[0]))


def _outcome(row: dict) -> str:
  traceback = ' **Traceback**' if row['Traceback'] else ''
  return f'**{row["rc"]}**{traceback} · {row["stderr tail"]} · {row["outcome"]}'


def main(before: str, after: str) -> None:
  with open(before) as b, open(after) as a:
    print(side_by_side(json.load(b), json.load(a)))


if __name__ == '__main__':
  main(*sys.argv[1:])
