# nplm train --flagfile=RECIPE on Brown, STEPS updates, one a call against 8 a call, 3 runs each,
# alternated. From the checkout, nplm on PATH:
#   bash experiments/results/cpu/updates_per_call/one_or_eight.sh mlp9 400 200 [DATA_DIR]  # mlp9.txt
#   bash experiments/results/cpu/updates_per_call/one_or_eight.sh lstm 320 160 [DATA_DIR]  # lstm.txt
recipe=$1 steps=$2 log_every=$3 data_dir=${4:-.tfds}
mkdir -p /tmp/kbench
for rep in 1 2 3; do for k in 1 8; do
  w=/tmp/kbench/${recipe}_k${k}_r${rep}; rm -rf $w
  nplm train --flagfile=$recipe --data_dir=$data_dir --workdir=$w --max_steps=$steps \
    --log_every=$log_every --eval_splits=none --checkpoint_minutes=0 --updates_per_call=$k > $w.log 2>&1
  python3 -c "import json; s=json.load(open('$w/summary.json')); print('$recipe', $k, $rep, round(s['train_examples_per_second']), s['steps'], round(s['phase_seconds']['compile'],2))"
done; done
