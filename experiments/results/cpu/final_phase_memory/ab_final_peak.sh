#!/bin/bash
# A run that reports its best parameters, not its last, then the same command again (it
# resumes the finished run: its final phase alone). MLP9 (hidden size H) on Brown, a
# validation every update (on 5,000 tokens) at a learning rate so high that every update
# after the first is worse: it stops early at step 3 and its final phase restores step 1's
# checkpoint. The wall seconds and peak RSS (KB) of the run and of the rerun, the code of
# BEFORE against AFTER, interleaved, RUNS times each.
#   ab_final_peak.sh BEFORE_CHECKOUT AFTER_CHECKOUT DATA_DIR H RUNS
set -euo pipefail
before=$1 after=$2 data_dir=$(realpath "$3") hidden=$4 runs=$5 python=${PYTHON:-python}
scratch=$(mktemp -d)
for i in $(seq "$runs"); do
  for side in before after; do
    checkout=$([ $side = before ] && echo "$before" || echo "$after")
    workdir=$scratch/$side; rm -rf "$workdir"
    for attempt in run rerun; do
      (cd "$checkout" && /usr/bin/time -f "%e %M" -o "$scratch/$attempt" $python -m nplm train \
        --flagfile=mlp9 --hidden_size="$hidden" --data_dir="$data_dir" --eval_every=1 \
        --max_steps=4 --valid_tokens_per_eval=5000 --learning_rate=1.0 --eval_splits=none \
        --workdir="$workdir" >/dev/null 2>&1)
    done
    reported=$($python -c "import json,sys; r=json.load(open(sys.argv[1]))['reported']; print(r['parameters'], r['step'])" "$workdir/summary.json")
    echo "$side h=$hidden: run $(cat "$scratch/run"), rerun $(cat "$scratch/rerun") (s, KB); reported $reported"
  done
done
rm -rf "$scratch"
