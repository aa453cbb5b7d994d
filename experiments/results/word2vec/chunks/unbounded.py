"""experiments.benchmarks.word2vec with no cut of a chunk (MAX_SUMMED_RATE lifted), so that
--chunk_positions=N is taken as typed: how the chunks that the cut now refuses were measured.

  PYTHONPATH=. python experiments/results/word2vec/chunks/unbounded.py --configs=cbow_ns \
      --chunk_positions=2048 --seeds=0 --data_dir=DIR --out=OUT
"""

from experiments.benchmarks import word2vec
from nplm.cli import run_experiment
from nplm.training import word2vec_feed

if __name__ == '__main__':
  word2vec_feed.MAX_SUMMED_RATE = dict.fromkeys(word2vec_feed.MAX_SUMMED_RATE, 1e12)
  word2vec.define_flags()
  run_experiment(word2vec.main)
