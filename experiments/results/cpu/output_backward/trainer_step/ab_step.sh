#!/bin/bash
# 10 alternations of the trainer's MLP9 step (7 blocks of 30 updates each), before/after.
HERE=$(cd "$(dirname "$0")" && pwd)
for r in $(seq 10); do
  echo -n "before "; (cd ${BEFORE_DIR:?a worktree of the commit before} && PYTHONPATH=${BEFORE_DIR:?a worktree of the commit before} "$HERE"/../../../../../.venv/bin/python "$HERE"/step.py MLP9 | tail -1)
  echo -n "after  "; (cd "$HERE"/../../../../.. && PYTHONPATH=. .venv/bin/python "$HERE"/step.py MLP9 | tail -1)
done
