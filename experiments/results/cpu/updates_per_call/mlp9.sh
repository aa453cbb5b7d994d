# nplm train --flagfile=mlp9 on Brown, 400 updates, one a call against 8 a call, 3 runs each, alternated.
# From the checkout, nplm on PATH: bash experiments/results/cpu/updates_per_call/mlp9.sh [DATA_DIR]
data_dir=${1:-.tfds}
mkdir -p /tmp/kbench
for rep in 1 2 3; do for k in 1 8; do
  w=/tmp/kbench/mlp9_k${k}_r${rep}; rm -rf $w
  nplm train --flagfile=mlp9 --data_dir=$data_dir --workdir=$w --max_steps=400 --log_every=200 \
    --eval_splits=none --checkpoint_minutes=0 --updates_per_call=$k > $w.log 2>&1
  python3 -c "import json; s=json.load(open('$w/summary.json')); print('mlp9', $k, $rep, round(s['train_examples_per_second']), s['steps'], round(s['phase_seconds']['compile'],2))"
done; done
