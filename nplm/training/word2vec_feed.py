"""word2vec's models (CBOW, skip-gram) in the loop: each epoch's stream on the devices, the
update in chunks, exact scores.

The epoch's subsampled stream (nplm.training.word2vec_windows) and its shuffled positions
live on the device for the epoch; each update is sent only its number, slices its B
positions, draws the radii from its own key and gathers the windows: no host work per
update. The update is word2vec's own (nplm.training.word2vec_update), its rate per pair or
position.
Evaluation scores every token of a split with the full window c and no subsampling, by the
model's own exact prediction (`token_log_probs`): not a language model's perplexity.
"""

import functools
import logging

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from nplm import heads, parallel
from nplm.data import batching
from nplm.errors import ConfigError
from nplm.models.word2vec import ABSENT, chunk_positions
from nplm.training import optimizer, schedules, word2vec_native, word2vec_update
from nplm.training.feed import Feed
from nplm.training.word2vec_windows import (Subsampler, context_windows, padded_stream,
                                           window_radii)

# A chunk's examples read the tables as the chunk found them and their updates are summed,
# which stays near word2vec's one-after-another updates while each row is read by few of
# them. A row read n times in a chunk moves by n updates of ~α|h| summed from one reading.
# Under negative sampling they point one way (Brown's busiest word is 2% of the negatives
# drawn, and a negative's update lowers its score): the row overshoots as a step n times as
# large would, and the vectors grow until they are not finite. The tree's root is on every
# path, but its subtrees hold similar counts, so its updates' signs differ and more of them
# sum safely; past a point the vectors are poorer. α·n of the busiest row, measured on
# Brown, 5 epochs (experiments/results/word2vec/chunks/): negative sampling, CBOW 3.0 (512
# positions a chunk, 3 seeds) and 5.9 (1,024) scored as gensim, 11.9 (2,048) diverged; one
# 8-word line repeated, skip-gram: 3.2 (32) trained, 12.8 (128) diverged. The tree (n:
# positions, a skip-gram position's pairs taking the path in turn): CBOW 12.8 (256) and
# skip-gram 6.4 (256, the recipe) scored as gensim; 25.6 (skip-gram, 1,024) and 51 (CBOW,
# 1,024) lost 0.03-0.11 of WordSim-353. A chunk is cut where α·n would pass these, each
# about a third of the least that failed: no recipe's chunk on Brown changes.
MAX_SUMMED_RATE = {'sampled': 4.0, 'tree': 8.0}
# On a CPU each core takes a share of a step's positions and the copies of the tables are
# summed at the step's end (Word2VecFeed.cpu_shares). The share must outweigh the sum: at
# 2,048 positions a core the sum of Brown's tables took as long as the loop (CBOW NS, 2 CPU
# devices).
MIN_POSITIONS_PER_SHARE = 4096

log = logging.getLogger(__name__)


def whole_chunks(config, per_device: int) -> bool:
  """Whether a device's `per_device` positions are whole chunks of --chunk_positions (or
  one chunk of fewer)."""
  return per_device % min(chunk_positions(config), per_device) == 0


def bounded_chunk(chunk: int, positions: int, busiest_reads: float, rate: float,
                  most: float) -> int:
  """The largest divisor of `positions` (a device's batch), at most `chunk`, whose examples
  read the busiest row (`busiest_reads` times a position on average) at most n times, with
  `rate`·n at most `most` (MAX_SUMMED_RATE); at least 1."""
  bound = most / max(rate * busiest_reads, 1e-12)
  limit = max(1, min(chunk, positions, int(bound)))
  return next(size for size in range(limit, 0, -1) if positions % size == 0)


class Word2VecFeed(Feed):
  """A word2vec model: subsampled epoch streams, dynamic windows, the model's own scores."""

  batch_layout = (None, None, None)  # The epoch's stream, its positions, the update's number.
  per_update = (False, False, True)
  chooses_updates_per_call = True
  scoring_layout = (None, 'data')  # The split's padded stream; positions.

  @classmethod
  def epoch_examples(cls, config, lm, train: int) -> tuple[str, int, int, str, int]:
    """Positions (before subsampling)."""
    batch = config.batch_size
    return f'--batch_size={batch:,} positions', batch, train, 'position', train

  @classmethod
  def data_words(cls, config, split_sizes: dict, data: int) -> int:
    """Each split padded by c on both sides, and the epoch's subsampled stream."""
    del data
    pad = 2 * config.window
    return sum(n + pad for n in split_sizes.values()) + split_sizes['train'] + pad

  @classmethod
  def example_span(cls, config) -> tuple[str, int, str]:
    span = 2 * config.window + 1
    return '--window', span, f'reads the {span:,} tokens around a word'

  @classmethod
  def example(cls, config, lm) -> tuple:
    """One position's (context, target): the shapes its model reads."""
    windows, centers = jnp.zeros((1, 2 * config.window), jnp.int32), jnp.zeros(1, jnp.int32)
    context, targets, _ = lm.model.examples(windows, centers, jnp.ones(1))
    return context, targets

  @classmethod
  def tables_read(cls, config, lm) -> tuple:
    return ()  # word2vec's update is its own (nplm.training.word2vec_update): no moments.

  def placed(self, ids):
    # Windows stop at a split's ends: nothing is read before its start (no boundary token).
    return parallel.put(padded_stream(ids, self.config.window, len(ids)), self.mesh)

  def placed_prefix(self, ids, tokens: int):
    # The last words of the prefix read their right-hand window as in the whole split.
    window = self.config.window
    return parallel.put(padded_stream(ids[:tokens + window], window, tokens), self.mesh)

  @classmethod
  def cpu_shares(cls, config) -> int:
    """How many cores take a share of a step's positions on a CPU, each updating its own
    copy of the tables, the copies summed at the step's end: one per usable core, at most
    as many as split the batch into whole chunks of at least MIN_POSITIONS_PER_SHARE
    positions each."""
    batch = config.batch_size
    most = min(parallel.usable_cores(), batch // MIN_POSITIONS_PER_SHARE)
    return max((shares for shares in range(2, most + 1)
                if batch % shares == 0 and whole_chunks(config, batch // shares)),
               default=1)

  @classmethod
  def cpu_devices(cls, config) -> int:
    """One: the C++ update shares a step among threads (`cpu_shares`). Where it cannot be
    built, a device per share: XLA runs the update's loop over chunks on one core."""
    return 1 if word2vec_native.unavailable() is None else cls.cpu_shares(config)

  def prepare_training(self, ids) -> int:
    if self.mesh.shape['model'] > 1:
      raise ConfigError("word2vec's update reads whole tables: use a mesh with data only "
                        '(e.g. --mesh=data:2)')
    per_device = self.config.batch_size // self.mesh.shape['data']
    if not whole_chunks(self.config, per_device):
      raise ConfigError(f'--chunk_positions={self.config.chunk_positions} must divide the '
                        f'{per_device} positions of --batch_size each device takes')
    self.subsampler = Subsampler(ids, self.config.subsample)
    self.chunk = self.chunk_for(per_device)
    if self.cpu_threads:
      log.info("word2vec's update: compiled C++, %d thread%s a device", self.cpu_threads,
               's' * (self.cpu_threads > 1))
    elif not self.accelerator_loop:
      log.info("word2vec's update: XLA's loop, not the compiled C++ (%s)",
               word2vec_native.unavailable())
    if self.accelerator_loop:
      self.describe_accelerator_loop(per_device)
    return batching.num_batches(self.subsampler.max_kept, self.config.batch_size)

  @functools.cached_property
  def accelerator_loop(self) -> bool:
    """Whether the update is XLA's loop on an accelerator: every chunk, a count XLA knows
    (word2vec_update.chunked_step's `every_chunk`)."""
    return self.mesh.devices.flat[0].platform != 'cpu'

  @functools.cached_property
  def cpu_threads(self) -> int:
    """The C++ update's threads on a CPU (`cpu_shares` on one device, one a device on
    several), or 0: XLA's loop (an accelerator; no C++ compiler here)."""
    return self.threads_on(self.config, self.mesh)

  @classmethod
  def threads_on(cls, config, mesh) -> int:
    """`cpu_threads` on `mesh`."""
    if mesh.devices.flat[0].platform != 'cpu' or word2vec_native.unavailable():
      return 0
    return cls.cpu_shares(config) if mesh.shape['data'] == 1 else 1

  @classmethod
  def host_scratch_words(cls, config, lm, mesh) -> int:
    """With more than one thread, each thread's copy of C and the output vectors: at most
    2 |V| m words each (a row is copied where the thread changes it)."""
    threads = cls.threads_on(config, mesh or parallel.make_mesh())
    model = lm.model
    return 2 * model.vocab_size * model.feature_size * threads if threads > 1 else 0

  def chunk_for(self, per_device: int) -> int:
    """The positions a device updates together: --chunk_positions (at most its batch), cut
    where a chunk would sum too many updates of one row (MAX_SUMMED_RATE)."""
    config = self.config
    chunk = min(chunk_positions(config), per_device)
    reads, most = self.busiest_reads()
    bounded = bounded_chunk(chunk, per_device, reads, config.learning_rate, most)
    if bounded < chunk:
      typed = f'--chunk_positions={config.chunk_positions}'
      log.info('updating %d positions at a time, not %s: the busiest row is read %.2f times a '
               'position, and more than %.0f of its updates summed at once at '
               '--learning_rate=%g can make training diverge or the vectors poorer', bounded,
               f'the whole batch ({typed})' if chunk == per_device else typed, reads,
               most / config.learning_rate, config.learning_rate)
    return bounded

  def busiest_reads(self) -> tuple[float, float]:
    """(how many times a position's examples read the busiest row, on average; the most
    α·n of its n reads a chunk may sum: MAX_SUMMED_RATE)."""
    config = self.config
    # A head word2vec's update does not train (a scoring-only config) has no such output.
    output = self.output_vectors()[1] if heads.serves_word2vec(config.head) else ('none',)
    if output[0] == 'tree':  # The root: once a position (skip-gram's pairs in turn).
      return 1.0, MAX_SUMMED_RATE['tree']
    kept = np.bincount(self.subsampler.ids) * self.subsampler.keep  # Expected kept counts.
    reads = kept / kept.sum()  # A word's output vector, read for it as the target,
    if output[0] == 'sampled':  # and as k negatives from Q.
      _, proposal, num_samples = output
      reads = reads + num_samples * proposal.probs[:len(reads)]
    # Skip-gram's examples are its pairs: c + 1 a position on average (radius 1 … c).
    examples = config.window + 1 if config.model == 'skipgram' else 1
    return examples * float(reads.max()), MAX_SUMMED_RATE['sampled']

  def describe_accelerator_loop(self, per_device: int):
    """The start-up line of XLA's loop on an accelerator: each chunk is a launch of the
    update's kernels, one after another, so a step's count of chunks is its time."""
    reads, most = self.busiest_reads()
    largest = bounded_chunk(per_device, per_device, reads, self.config.learning_rate, most)
    count = per_device // self.chunk
    log.info("word2vec's update: XLA's loop, %s chunk%s of %s positions a step, one after "
             'another%s', f'{count:,}', 's' * (count > 1), f'{self.chunk:,}',
             f'; --chunk_positions=0 takes {largest:,}, the most that trains stably'
             if largest > self.chunk else '')

  def epoch_stream(self, epoch: int):
    """(the epoch's subsampled stream, padded to a fixed length; its shuffled positions)."""
    rng = np.random.default_rng([self.config.batch_order_seed, epoch])
    kept = self.subsampler.ids[self.subsampler.keep_mask(rng)]
    stream = padded_stream(kept, self.config.window, self.subsampler.max_kept)
    return stream, rng.permutation(len(kept))

  def start_epoch(self, state, epoch: int, start: int):
    """The state to continue with and the epoch's batches from batch `start` on, each
    ((stream, positions, update number in the epoch), positions it holds); the stream and
    the epoch's positions (ABSENT past the kept ones) are placed once."""
    stream, order = self.epoch_stream(epoch)
    batch_size = self.config.batch_size
    positions = np.full(self.steps_per_epoch * batch_size, ABSENT, np.int32)
    positions[:len(order)] = order
    stream, positions = (parallel.put(array, self.mesh) for array in (stream, positions))

    def batches():
      for index in range(start, self.steps_per_epoch):
        held = min(batch_size, len(order) - index * batch_size)
        yield (stream, positions, np.int32(index)), held

    return state, batches()

  def step_data(self, batch) -> tuple:
    stream, positions, index = batch
    return stream, positions, parallel.step_input(index, self.mesh)

  @classmethod
  def initial_params(cls, config, lm, rng) -> dict:
    """word2vec's start: C uniform in ±0.5/m, the output vectors zero (the tool's syn1 and
    syn1neg; their biases, which word2vec has not, stay zero)."""
    params = super().initial_params(config, lm, rng)
    return {**params, 'head': jax.tree.map(jnp.zeros_like, params['head'])}

  def output_vectors(self):
    """(the head's parameter holding the output vectors, how word2vec_update reads them)."""
    return self.lm.head.word2vec_output()

  def update(self, state, stream, epoch_positions, index, run_rng):
    config, batch_size = self.config, self.config.batch_size
    window_rng, head_rng = jax.random.split(jax.random.fold_in(run_rng, state.step))
    positions = jax.lax.dynamic_slice(epoch_positions, (index * batch_size,), (batch_size,))
    mask = (positions != ABSENT).astype(jnp.float32)
    radii = window_radii(window_rng, batch_size, config.window)
    windows, centers = context_windows(stream, jnp.maximum(positions, 0), radii, config.window)
    alpha = schedules.learning_rate_at(config, state.step, optimizer.hyperparameters(state))
    name, output = self.output_vectors()
    params = state.params
    tables = (params['model']['C']['embedding'], params['head'][name]['embedding'])
    (vectors, out_table), loss, examples = self.updated_tables(
        output, tables, windows, centers, mask, alpha, head_rng)
    params = {'model': {**params['model'], 'C': {**params['model']['C'],
                                                 'embedding': vectors}},
              'head': {**params['head'], name: {**params['head'][name],
                                                'embedding': out_table}}}
    return state.replace(step=state.step + 1, params=params), loss / jnp.maximum(examples, 1)

  def updated_tables(self, output, tables, windows, centers, mask, alpha, rng):
    """((C, output vectors) after word2vec's update of the batch, the summed loss, the
    examples). Over N devices on 'data' (shard_map), each updates its copy of the tables
    with its B/N positions, chunk after chunk, and the devices' changes are summed at the
    end of the step: as N of word2vec's threads, each seeing the others' updates of a step
    at its end."""
    model, chunk, threads = self.config.model, self.chunk, self.cpu_threads
    every_chunk = self.accelerator_loop
    devices = self.mesh.shape['data']
    if devices == 1:
      *tables, loss, examples = word2vec_update.chunked_step(
          model, output, *tables, windows, centers, mask, alpha, rng, chunk, threads,
          every_chunk)
      return tuple(tables), loss, examples

    def per_device(tables, windows, centers, mask, alpha, rng):
      rng = jax.random.fold_in(rng, jax.lax.axis_index('data'))
      *updated, loss, examples = word2vec_update.chunked_step(
          model, output, *tables, windows, centers, mask, alpha, rng,
          min(chunk, centers.shape[0]), min(threads, 1), every_chunk)
      # Σ_d (new_d - old) + old, with one pass over each table after the all-reduce.
      summed = jax.lax.psum(updated, 'data')
      return (tuple(total - (devices - 1) * old for total, old in zip(summed, tables)),
              jax.lax.psum(loss, 'data'), jax.lax.psum(examples, 'data'))

    by_example, whole = P('data'), P()
    return jax.shard_map(per_device, mesh=self.mesh,
                         in_specs=((whole, whole), by_example, by_example, by_example, whole,
                                   whole),
                         out_specs=((whole, whole), whole, whole), check_vma=False)(
        tables, windows, centers, mask, alpha, rng)

  @property
  def whole_distribution(self) -> bool:
    """Heads whose log_prob normalizes over every output row score a position's context
    words from one distribution; the tree, class and adaptive heads score each pair."""
    return self.lm.head.output_rows

  def score(self, params, stream, positions):
    """The model's own exact log-prob of each position, with the full window: [B] (CBOW:
    log p(w_t | its ±c words); skip-gram: the mean over them of log p(w_{t+j} | w_t))."""
    window, whole_distribution = self.config.window, self.whole_distribution

    def per_token(bound, windows, centers):
      return bound.model.token_log_probs(bound.head, windows, centers, whole_distribution)

    radii = jnp.full(positions.shape, window)
    windows, centers = context_windows(stream, positions, radii, window)
    return self.lm.apply(self.lm.variables_of(params), windows, centers, method=per_token)
