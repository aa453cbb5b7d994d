"""What a run will cost, said once its first updates have given it a rate: where a head that
scores every word of a large vocabulary for every example makes the run take hours, the
rate of a sampled head on the same model and batches, measured here, and what it would take.

Importance sampling (Bengio & Senécal 2003) scores the target and k shared samples per
example; with a row-sparse optimizer its step reads and writes those rows only, so it costs
about the same at |V| = 300k as at 10k, and the run's perplexities stay exact
(nplm.training.loop evaluates every head under the full softmax).
"""

import logging
import time

import jax

from nplm import parallel
from nplm.config import Config, ConfigError
from nplm.display import counted, duration
from nplm.lm import build_language_model
from nplm.training import memory, optimizer
from nplm.training.config_checks import validated

log = logging.getLogger(__name__)

COSTLY_SECONDS = 3600  # A run planned longer than this is worth a second look.
LARGE_VOCABULARY = 10_000  # Below, a full softmax is not what makes a run long.
FULL_SHARE = 0.5  # A head scoring this share of |V| per training example scores them all.
FASTER = 2.0  # The sampled head is named only where it is at least this much faster.
TIMED_UPDATES = 10  # The sampled head's updates timed, after its compiled first one.
SAMPLES = 100  # k of the sampled head named.


def scores_every_word(lm, mesh, vocab_size: int) -> bool:
  """Whether the head's training step scores (about) every word of a large vocabulary for
  every example (a vocabulary-parallel head's shards each a part)."""
  shards = mesh.shape['model'] if lm.vocab_parallel else 1
  per_example = lm.head.scores_per_example(True, None, shards) * shards
  return vocab_size >= LARGE_VOCABULARY and per_example >= FULL_SHARE * vocab_size


def sampled_alternative(config: Config) -> Config:
  """The run's config under importance sampling, with the row-sparse form of its optimizer
  (Adam stays Adam: lazy_adam; SGD is already row-sparse)."""
  rows = 'lazy_adam' if config.optimizer == 'adamw' else config.optimizer
  return validated(config.replace(head='is', num_samples=SAMPLES, optimizer=rows))


def examples_per_second(config: Config, feed_class, corpus, mesh) -> float:
  """The rate of `config`'s train step on the corpus's first batches (TIMED_UPDATES after
  the compiled first one), on a state of its own: the run's is not touched."""
  lm = build_language_model(config, corpus.vocab.counts, mesh)
  feed = feed_class(config, lm, {'train': corpus.splits['train']}, corpus.boundary_id, mesh)
  state = feed.create_state(jax.random.key(config.seed))
  values = optimizer.hyperparameters_of(config, feed.steps_per_epoch)
  state = optimizer.with_hyperparameters(
      state, {name: parallel.put(value, mesh) for name, value in values.items()})
  state, batches = feed.start_epoch(state, 0, 0)
  batches, rng = iter(batches), jax.random.key(0)
  batch, _ = next(batches)
  state, losses = feed.step(state, batch, rng)
  jax.block_until_ready(losses)
  started, examples = time.perf_counter(), 0
  for _, (batch, count) in zip(range(TIMED_UPDATES), batches):
    state, losses = feed.step(state, batch, rng)
    examples += count
  jax.block_until_ready(losses)
  return examples / (time.perf_counter() - started)


def warn_if_costly(config: Config, lm, corpus, mesh, feed_class, rate: float,
                   steps_left: int, examples_per_step: float) -> None:
  """Logs what the run will take at `rate` (examples/s, measured) and, where it is hours
  because the head scores every word, what a sampled head measured here would take."""
  seconds = steps_left * examples_per_step / rate
  vocab_size = corpus.vocab.size
  if seconds < COSTLY_SECONDS or not scores_every_word(lm, mesh, vocab_size):
    return
  alternative = sampled_alternative(config)
  split_sizes = {name: len(ids) for name, ids in corpus.splits.items()}
  try:  # Its state beside the run's.
    memory.require_fit(alternative, build_language_model(alternative, corpus.vocab.counts,
                                                         mesh),
                       corpus.vocab.counts, split_sizes, mesh, num_models=2)
  except ConfigError:
    log.warning('this run takes up to %s more at %s examples/s: --head=%s scores all %s for '
                'every example; --head=is --optimizer=%s would be faster (not measured: two '
                'states would not fit in memory)', duration(seconds), f'{rate:,.0f}',
                config.head, counted(vocab_size, 'word'), alternative.optimizer)
    return
  faster = examples_per_second(alternative, feed_class, corpus, mesh)
  if faster < FASTER * rate:
    return
  log.warning('this run takes up to %s more at %s examples/s: --head=%s scores all %s for '
              'every example. --head=is --num_samples=%d --optimizer=%s trained at %s '
              'examples/s here (%d updates of this model on these batches): about %s, its '
              'perplexities as exact (docs/scale.md)', duration(seconds), f'{rate:,.0f}',
              config.head, counted(vocab_size, 'word'), SAMPLES, alternative.optimizer,
              f'{faster:,.0f}', TIMED_UPDATES, duration(seconds * rate / faster))
