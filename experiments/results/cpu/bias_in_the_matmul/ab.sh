#!/bin/bash
# The nnlm and lstm benchmarks before and after a change, 3 runs each, alternated, one Python
# (this checkout's .venv, PyTorch in it) for both sides: each side's code is its checkout's,
# the first on sys.path under `python -m`. Then the step's parts after (nnlm_step).
#   experiments/results/cpu/bias_in_the_matmul/ab.sh DATA_DIR BEFORE_CLONE OUT
# run from the repository root (the after side); nothing else running.
set -eu
data=$(realpath "$1"); before=$(realpath "$2"); mkdir -p "$3"; out=$(realpath "$3")
after=$PWD; python=$after/.venv/bin/python
for benchmark in nnlm lstm; do
  for i in 1 2 3; do
    for side in before after; do
      dir=$before; [ $side = after ] && dir=$after
      (cd "$dir" && env -u PYTHONUNBUFFERED "$python" -m experiments.benchmarks.$benchmark \
         --data_dir="$data" --out="$out/${benchmark}_$side$i" > "$out/${benchmark}_$side$i.log" 2>&1)
    done
  done
done
for shape in MLP9 MLP1; do
  env -u PYTHONUNBUFFERED "$python" -m experiments.benchmarks.nnlm_step --shape=$shape \
    --data_dir="$data" --out="$out/nnlm_step_$shape" > /dev/null 2>&1
done
