# nplm train on Brown, row 7's NNLM shape (order 5, m=64, h=128, nce, SGD 0.1), K updates a call.
# From the checkout, nplm on PATH: bash experiments/results/cpu/updates_per_call/row7_brown.sh [DATA_DIR]
data_dir=${1:-.tfds}
mkdir -p /tmp/kbench
for rep in 1 2 3; do for batch in 1024 64; do for k in 1 8 32; do
  w=/tmp/kbench/b${batch}_k${k}_r${rep}; rm -rf $w
  nplm train --dataset=brown --data_dir=$data_dir --workdir=$w \
    --order=5 --feature_size=64 --hidden_size=128 --direct=false --head=nce --optimizer=sgd --learning_rate=0.1 \
    --batch_size=$batch --max_steps=2560 --log_every=256 --eval_splits=none --checkpoint_minutes=0 \
    --updates_per_call=$k > $w.log 2>&1
  python3 -c "import json,sys; s=json.load(open('$w/summary.json')); print($batch, $k, $rep, round(s['train_examples_per_second']), s['steps'], round(s['phase_seconds']['compile'],2), s.get('valid_ppl'))"
done; done; done
