# The main job (nplm train, its defaults: MLP9 on Brown to early stopping) with
# --updates_per_call=0 (the default: chosen at the first progress line) and =1, 3 runs each,
# alternated. From the checkout, nplm on PATH:
#   bash experiments/results/cpu/updates_per_call/main_job.sh [DATA_DIR]  # main_job.txt
data_dir=${1:-.tfds}
mkdir -p /tmp/main_job
for rep in 1 2 3; do for k in 0 1; do
  w=/tmp/main_job/k${k}_r${rep}; rm -rf $w
  /usr/bin/time -f "$k $rep wall %e s" env -u PYTHONUNBUFFERED nplm train --data_dir=$data_dir \
    --workdir=$w --updates_per_call=$k > $w.log 2>&1
  tail -n 1 $w.log
  python3 -c "import json; s=json.load(open('$w/summary.json')); p=s['phase_seconds']; print($k, $rep, repr(s['valid_ppl']), repr(s['test_ppl']), s['steps'], round(p['train'], 1), round(p['compile'], 2), round(s['train_examples_per_second']))"
done; done
