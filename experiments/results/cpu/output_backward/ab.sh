#!/bin/bash
# before: a worktree of the commit before (BEFORE_DIR); after: this checkout. Alternated.
cd "$(dirname "$0")/../../../.."
out=experiments/results/cpu/output_backward
for i in 1 2 3; do
  (cd "${2:?BEFORE_DIR}" && "$OLDPWD"/.venv/bin/python -m experiments.benchmarks.nnlm --data_dir=${1:?DATA_DIR} --out="$OLDPWD"/$out/before$i) > $out/before$i.log 2>&1
  .venv/bin/python -m experiments.benchmarks.nnlm --data_dir=$1 --out=$out/after$i > $out/after$i.log 2>&1
done
