#!/bin/sh
# nplm train alone, 1 epoch of Brown, before and after interleaved, 3 repetitions:
#   ab.sh DATA_DIR BEFORE_DIR
# BEFORE_DIR: a checkout of the commit before the compiled update (git worktree add DIR 19232f0),
# run through PYTHONPATH; after: this checkout. Each recipe as it stands on its side (after: the
# CBOW recipes' --batch_size=32768). Prints recipe, repetition, before and after examples/s
# (summary.json's train_examples_per_second) and their ratio.
set -e
DATA_DIR=$1
BEFORE_DIR=$2
WORK=$(mktemp -d)
cd "$WORK"
for rep in 1 2 3; do
  for v in cbow_hs cbow_ns skipgram_hs skipgram_ns; do
    rm -rf ab_b ab_a
    PYTHONPATH=$BEFORE_DIR nplm train --flagfile=$v --data_dir=$DATA_DIR --epochs=1 --checkpoint_minutes=0 --workdir=ab_b > /dev/null 2>&1
    nplm train --flagfile=$v --data_dir=$DATA_DIR --epochs=1 --checkpoint_minutes=0 --workdir=ab_a > /dev/null 2>&1
    python3 -c "
import json
b=json.load(open('ab_b/summary.json')); a=json.load(open('ab_a/summary.json'))
print('$v', $rep, round(b['train_examples_per_second']), round(a['train_examples_per_second']), round(a['train_examples_per_second']/b['train_examples_per_second'],2))"
  done
done
rm -rf "$WORK"
