#!/bin/bash
# A rerun that resumes: MLP9 (hidden size H) on Brown trained to step 1, then the same workdir
# to step 2; the rerun's wall seconds and peak RSS (KB), the code of BEFORE against AFTER,
# interleaved, RUNS times each.
#   ab_resume.sh BEFORE_CHECKOUT AFTER_CHECKOUT DATA_DIR H RUNS
set -euo pipefail
before=$1 after=$2 data_dir=$(realpath "$3") hidden=$4 runs=$5 python=${PYTHON:-python}
scratch=$(mktemp -d)
for i in $(seq "$runs"); do
  for side in before after; do
    checkout=$([ $side = before ] && echo "$before" || echo "$after")
    workdir=$scratch/$side; rm -rf "$workdir"
    train="$python -m nplm train --flagfile=mlp9 --hidden_size=$hidden --data_dir=$data_dir --eval_splits=none --workdir=$workdir"
    (cd "$checkout" && $train --max_steps=1 >/dev/null 2>&1)
    (cd "$checkout" && /usr/bin/time -f "%e %M" -o "$scratch/time" $train --max_steps=2 >/dev/null 2>&1)
    echo "$side h=$hidden rerun: $(cat "$scratch/time") (s, KB)"
  done
done
rm -rf "$scratch"
