#!/bin/bash
# nplm predict and generate on a trained LSTM, the code of BEFORE (a checkout) against AFTER,
# interleaved, 5 runs each; prints "side command seconds" lines.
#   ab_commands.sh BEFORE_CHECKOUT AFTER_CHECKOUT WORKDIR
# WORKDIR: e.g. `nplm train --flagfile=lstm --max_steps=30 --eval_splits=none --workdir=WORKDIR`.
set -euo pipefail
before=$1 after=$2 workdir=$(realpath "$3") python=${PYTHON:-python}
for i in 1 2 3 4 5; do
  for side in before after; do
    checkout=$([ $side = before ] && echo "$before" || echo "$after")
    for command in "generate --length=20 --seed=1" "predict"; do
      started=$(date +%s.%N)
      (cd "$checkout" && $python -m nplm $command --workdir="$workdir" "The jury said" >/dev/null 2>&1)
      echo "$side ${command%% *} $(echo "$(date +%s.%N) - $started" | bc)"
    done
  done
done
