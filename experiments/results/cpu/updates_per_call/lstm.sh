# nplm train --flagfile=lstm on Brown, 320 updates, one a call against 8 a call, 3 runs each, alternated.
# From the checkout, nplm on PATH: bash experiments/results/cpu/updates_per_call/lstm.sh [DATA_DIR]
data_dir=${1:-.tfds}
mkdir -p /tmp/kbench
for rep in 1 2 3; do for k in 1 8; do
  w=/tmp/kbench/lstm_k${k}_r${rep}; rm -rf $w
  nplm train --flagfile=lstm --data_dir=$data_dir --workdir=$w --max_steps=320 --log_every=160 \
    --eval_splits=none --checkpoint_minutes=0 --updates_per_call=$k > $w.log 2>&1
  python3 -c "import json; s=json.load(open('$w/summary.json')); print('lstm', $k, $rep, round(s['train_examples_per_second']), s['steps'], round(s['phase_seconds']['compile'],2))"
done; done
