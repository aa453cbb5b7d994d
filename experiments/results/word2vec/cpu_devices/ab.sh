# A/B of nplm train alone, 1 epoch of Brown, interleaved: before = one device at --batch_size=4096 (the old recipe), after = the recipe now.
cd /tmp/w2vt
for rep in 1 2 3; do
 for v in cbow_hs cbow_ns skipgram_hs skipgram_ns; do
  rm -rf ab_b ab_a
  JAX_NUM_CPU_DEVICES=1 /work/main/.venv/bin/nplm train --flagfile=$v --data_dir=/tmp/w2v/tfds --epochs=1 --batch_size=4096 --checkpoint_minutes=0 --workdir=ab_b > /dev/null 2>&1
  /work/main/.venv/bin/nplm train --flagfile=$v --data_dir=/tmp/w2v/tfds --epochs=1 --checkpoint_minutes=0 --workdir=ab_a > /dev/null 2>&1
  python3 -c "
import json
b=json.load(open('ab_b/summary.json')); a=json.load(open('ab_a/summary.json'))
print('$v', $rep, round(b['train_examples_per_second']), round(a['train_examples_per_second']), round(a['train_examples_per_second']/b['train_examples_per_second'],2))"
 done
done
