"""The LSTM recipe's update as the lstm benchmark runs nplm's side, REPEATS blocks of 20
segments: prints ms per update for each block. Run from the repository root under
`perf stat -e page-faults`, at 27de533 (the benchmarks' package told malloc nothing: the feed
told it, after JAX's first computations) and after it:

  perf stat -e page-faults python experiments/results/cpu/lstm_malloc/page_faults.py DATA_DIR 6
"""
import os
import sys
import time

sys.path.insert(0, os.getcwd())
import numpy as np  # noqa: E402

from experiments.benchmarks import lstm as benchmark  # noqa: E402


def main(data_dir: str, repeats: int) -> None:
  config = benchmark.flagfile_config('lstm')
  train_ids, counts, boundary_id = benchmark.load_training_ids(data_dir)
  lm = benchmark.build_language_model(config, counts)
  feed = benchmark.StreamFeed(config, lm, {'train': np.asarray(train_ids)}, boundary_id)
  batches = benchmark.segment_batches(feed, 20)
  run = benchmark.nplm_runner(feed, 0)
  run(batches[:2])
  for _ in range(repeats):
    began = time.perf_counter()
    run(batches)
    print(f'{1e3 * (time.perf_counter() - began) / 20:.1f} ms per update', flush=True)


if __name__ == '__main__':
  main(sys.argv[1], int(sys.argv[2]))
