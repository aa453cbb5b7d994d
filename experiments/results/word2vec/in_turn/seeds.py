"""nplm's (and, with `gensim`, gensim's) WordSim-353 and SimLex-999 over seeds for a recipe
with overrides, one JSON line per run, into /tmp/b16/hs/NAME/rows.json (the rows in seeds/).

  PYTHONPATH=. python experiments/results/word2vec/in_turn/seeds.py NAME RECIPE 0,1,2,3,4 \
      [chunk_positions=1 ...] [gensim]

Brown prepared in /tmp/w2v/tfds; `taskset -c 0` before it: one core, so one thread of the
update and one gensim worker."""
import json, sys, shutil, time
from pathlib import Path
from absl import logging as absl_logging
from experiments.benchmarks import word2vec as b
from nplm.data.datasets import load_dataset
from nplm.trainer import request_cpu_devices
from nplm.use import embeddings
from nplm.parallel import usable_cores
absl_logging.set_verbosity(absl_logging.WARNING)
name, recipe, seeds = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3].split(',')]
over, do_gensim = {}, False
for arg in sys.argv[4:]:
  if arg == 'gensim': do_gensim = True; continue
  k, v = arg.split('='); over[k] = type(getattr(b.flagfile_config(recipe), k))(v)
out = Path('/tmp/b16/hs') / name; shutil.rmtree(out, ignore_errors=True)
config = b.flagfile_config(recipe, workdir=str(out / 'run'), data_dir='/tmp/w2v/tfds', **over)
request_cpu_devices(config)
corpus = load_dataset(config)
words = corpus.vocab.decode(corpus.splits['train'])
rows = []
for seed in seeds:
  c = b.seeded(config, seed)
  t = time.time(); keyed, timing = b.train_nplm(c, corpus, len(words))
  s = embeddings.benchmark_scores(keyed)
  row = {'who': 'nplm', 'seed': seed, 'ws': s['wordsim353']['spearman'], 'sl': s['simlex999']['spearman'], 'wps': timing['words_per_second']}
  rows.append(row); print(json.dumps(row), flush=True)
  if do_gensim:
    g, sec = b.train_gensim(words, b.gensim_settings(c, usable_cores()))
    s = embeddings.benchmark_scores(g)
    row = {'who': 'gensim', 'seed': seed, 'ws': s['wordsim353']['spearman'], 'sl': s['simlex999']['spearman'], 'wps': len(words) * c.epochs / sec}
    rows.append(row); print(json.dumps(row), flush=True)
import numpy as np
for who in ('nplm', 'gensim'):
  r = [x for x in rows if x['who'] == who]
  if r: print(name, who, 'WS %.3f ± %.3f  SL %.3f ± %.3f  wps %.0f' % (np.mean([x['ws'] for x in r]), np.std([x['ws'] for x in r]), np.mean([x['sl'] for x in r]), np.std([x['sl'] for x in r]), np.median([x['wps'] for x in r])))
json.dump(rows, open(out / 'rows.json', 'w'))
