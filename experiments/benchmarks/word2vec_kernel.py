r"""word2vec's compiled update (nplm/training/word2vec_update.cc) in versions side by side, in
one process: each source is built, and its step timed in turn with the others', repetition
after repetition, so that the host's drift falls on all alike.

  git show REV:nplm/training/word2vec_update.cc > /tmp/before/word2vec_update.cc
  git show REV:nplm/training/word2vec_arithmetic.h > /tmp/before/word2vec_arithmetic.h
  git show REV:nplm/training/word2vec_sampler.h > /tmp/before/word2vec_sampler.h
  python -m experiments.benchmarks.word2vec_kernel --sources=/tmp/before/word2vec_update.cc,nplm/training/word2vec_update.cc

(a source older than a header does not include it: copy those REV has). The step: `word2vec_update.
chunked_step` on --batch_size positions of Zipf words (|V| = 11,856, Brown's; m = 100,
window 5 with its radius drawn from 1 … 5), --model and --head as the recipes set them,
--threads threads. Prints each source's median and least milliseconds a step, the largest
difference of its tables and loss from the first source's after one step, and the median
over repetitions of first / this (above 1: faster than the first).
"""

import tempfile
import time
from pathlib import Path
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from nplm.cli import run_experiment
from nplm.heads.binary_tree import huffman_tree
from nplm.heads.proposal import Proposal
from nplm.models.word2vec import ABSENT
from nplm.training import word2vec_native, word2vec_update

VOCAB, FEATURES, WINDOW = 11_856, 100, 5


def registered(source: Path, name: str, scratch: Path) -> None:
  """Builds `source` as word2vec_native builds the package's, registered as `name`."""
  library = scratch / f'{name}.so'
  word2vec_native.compile_source(word2vec_native.compiler(), source, library)
  word2vec_native.register(library, name)


def batch(model: str, head: str, positions: int):
  """(output, windows, centers, mask, the output table's rows) of Zipf words."""
  rng = np.random.default_rng(0)
  zipf = 1 / np.arange(1, VOCAB + 1)
  stream = rng.choice(VOCAB, size=400_000, p=zipf / zipf.sum()).astype(np.int32)
  at = rng.integers(WINDOW, len(stream) - WINDOW, size=positions)
  radii = rng.integers(1, WINDOW + 1, size=positions)
  offsets = np.concatenate([np.arange(-WINDOW, 0), np.arange(1, WINDOW + 1)])
  windows = np.where(np.abs(offsets) <= radii[:, None], stream[at[:, None] + offsets],
                     ABSENT).astype(np.int32)
  counts = np.bincount(stream, minlength=VOCAB)
  if head == 'negative_sampling':
    output, rows = ('sampled', Proposal.from_counts(counts, 0.75), 5), VOCAB
  else:
    tree = huffman_tree(counts + 1)
    output = ('tree', jnp.asarray(tree.paths), jnp.asarray(tree.bits), jnp.asarray(tree.mask))
    rows = VOCAB - 1
  return output, jnp.asarray(windows), jnp.asarray(stream[at]), jnp.ones(positions), rows


def main(argv):
  del argv
  f = flags.FLAGS
  output, windows, centers, mask, rows = batch(f.model, f.head, f.batch_size)
  rng = np.random.default_rng(1)
  start = (rng.uniform(-0.5, 0.5, (VOCAB, FEATURES)).astype(np.float32) / FEATURES,
           rng.normal(0, 0.1, (rows, FEATURES)).astype(np.float32))
  steps, first_results = [], None
  with tempfile.TemporaryDirectory() as scratch:
    for index, source in enumerate(f.sources):
      name = f'nplm_word2vec_kernel_{index}'
      registered(Path(source).resolve(), name, Path(scratch))
      with (mock.patch.object(word2vec_native, 'TARGET', name),  # Traced now, with its name,
            mock.patch.object(word2vec_native, 'unavailable', return_value=None)):  # built.
        step = jax.jit(lambda vectors, out, alpha: word2vec_update.chunked_step(
            f.model, output, vectors, out, windows, centers, mask, alpha, jax.random.key(0),
            f.chunk_positions, f.threads), donate_argnums=(0, 1))
        results = [np.asarray(x) for x in step(*map(jnp.asarray, start), 0.025)]
      first_results = first_results or results
      difference = max(float(np.max(np.abs(a - b))) for a, b in zip(first_results, results))
      steps.append((source, step, difference))
    tables = [list(map(jnp.asarray, start)) for _ in steps]
    seconds = [[] for _ in steps]
    for _ in range(f.repetitions):
      for index, (_, step, _) in enumerate(steps):
        began = time.perf_counter()
        *tables[index], _, _ = jax.block_until_ready(step(*tables[index], 0.025))
        seconds[index].append(time.perf_counter() - began)
  print(f'{f.model}, {f.head}, {f.batch_size:,} positions, chunks of {f.chunk_positions}, '
        f'{f.threads} thread(s), {f.repetitions} repetitions')
  for (source, _, difference), times in zip(steps, seconds):
    ratio = np.median(np.asarray(seconds[0]) / np.asarray(times))
    print(f'{source}: median {1e3 * np.median(times):.2f} ms, least {1e3 * min(times):.2f} ms,'
          f' largest difference from the first {difference:.2g}, first / this {ratio:.3f}')


if __name__ == '__main__':
  flags.DEFINE_list('sources', None, 'word2vec_update.cc versions to time.', required=True)
  flags.DEFINE_enum('model', 'skipgram', ['cbow', 'skipgram'], 'word2vec model.')
  flags.DEFINE_enum('head', 'tree', ['tree', 'negative_sampling'], 'Output.')
  flags.DEFINE_integer('batch_size', 16384, 'Positions a step.')
  flags.DEFINE_integer('chunk_positions', 256, 'Positions a chunk.')
  flags.DEFINE_integer('threads', 1, 'Threads of the update.')
  flags.DEFINE_integer('repetitions', 30, 'Steps timed per source.')
  run_experiment(main)
