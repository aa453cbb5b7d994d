"""The adaptive softmax (Grave et al. 2017), exactly normalized.

The most frequent words and one unit per tail cluster form the head softmax; a word in tail
cluster i has P(w | h) = P(cluster i | h) · P(w | cluster i, h), the tail's softmax taken
over a projection of h to D / 4^(i+1) dimensions. Frequent words cost a full-width dot
product, rare ones a narrow one: on Brown about 4x fewer multiply-adds than |V| full units.

Grave et al. evaluate a tail only for the examples whose target lies in it. With static
shapes every tail is evaluated for the whole batch here, so the saving is in the matmuls
only: every example still gets a score and a softmax term for every word, and on a CPU
that elementwise work keeps the adaptive softmax close to the full one (heads benchmark).

Clusters are contiguous ranges of the frequency-sorted ids, cut at `--adaptive_cutoffs`; by
default at the words that cover 80% and 95% of the training tokens.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from nplm.errors import ConfigError
from nplm.heads.output_layer import OutputLayer, chunk_rows
from nplm.knobs import Knob


def default_cutoffs(counts, coverages=(0.80, 0.95)) -> tuple[int, ...]:
  """The ids at which the frequency-sorted vocabulary reaches each share of the tokens."""
  covered = np.cumsum(counts) / np.sum(counts)
  cutoffs = sorted({int(np.searchsorted(covered, c)) + 1 for c in coverages})
  return tuple(c for c in cutoffs if 0 < c < len(counts))


def parse_cutoffs(text: str, vocab_size: int) -> tuple[int, ...]:
  try:
    cutoffs = tuple(int(part) for part in text.split(','))
  except ValueError:
    raise ConfigError(f'--adaptive_cutoffs={text!r} is not a comma-separated list of '
                      'integers (for example 2000,6000)') from None
  if list(cutoffs) != sorted(set(cutoffs)) or not 0 < cutoffs[0] or cutoffs[-1] >= vocab_size:
    raise ConfigError(f'--adaptive_cutoffs={text!r} must increase strictly within 1 … '
                      f'{vocab_size - 1} (the vocabulary has {vocab_size} words)')
  return cutoffs


class AdaptiveSoftmaxHead(nn.Module):
  """A head softmax over frequent words and clusters; narrow tail softmaxes for the rest."""
  vocab_size: int
  input_width: int
  cutoffs: tuple[int, ...]  # Ids below cutoffs[0] are in the head; the tails follow.

  knobs = {'adaptive_cutoffs': Knob('', 'Comma-separated ids where the tail clusters start '
                                         '(empty = where the words cover 80% and 95% of the '
                                         'training tokens).')}
  output_rows = False  # Its tails project the hidden vector first.

  @classmethod
  def config_errors(cls, config) -> list[str]:
    del config  # --adaptive_cutoffs needs the vocabulary: checked by from_config.
    return []

  @classmethod
  def from_config(cls, config, counts, input_width: int) -> 'AdaptiveSoftmaxHead':
    cutoffs = (parse_cutoffs(config.adaptive_cutoffs, len(counts)) if config.adaptive_cutoffs
               else default_cutoffs(counts))
    if not cutoffs:
      raise ConfigError(f'the vocabulary ({len(counts)} words) is too small for a tail: '
                        'set --adaptive_cutoffs or use --head=softmax')
    return cls(vocab_size=len(counts), input_width=input_width, cutoffs=cutoffs)

  @property
  def bounds(self) -> list[tuple[int, int]]:
    """(first id, end id) of each tail cluster."""
    edges = list(self.cutoffs) + [self.vocab_size]
    return list(zip(edges[:-1], edges[1:]))

  def scores_per_example(self, training: bool, batch: int | None, shards: int) -> int:
    """|V| in training; an exact log p over a global `batch`: its whole layers'
    log-softmaxes live together (XLA's count), plus the largest chunk of a chunked layer
    (their loops run one after another in one chunk's buffers)."""
    del training, shards  # Never vocabulary-parallel.
    if batch is None:
      return self.vocab_size
    layers = [self.cutoffs[0] + len(self.bounds)] + [end - start for start, end in self.bounds]
    rows = [chunk_rows(batch, units) for units in layers]
    return (sum(r for r, units in zip(rows, layers) if r == units)
            + max((r for r, units in zip(rows, layers) if r < units), default=0))

  def setup(self):
    self.head = OutputLayer(self.cutoffs[0] + len(self.bounds), self.input_width)
    tail_dims = [max(1, self.input_width // 4 ** (i + 1)) for i in range(len(self.bounds))]
    self.projections = [nn.Dense(dim, use_bias=False, name=f'tail{i}_projection')
                        for i, dim in enumerate(tail_dims)]
    self.tails = [OutputLayer(end - start, dim, name=f'tail{i}')
                  for i, ((start, end), dim) in enumerate(zip(self.bounds, tail_dims))]

  def _log_p_head(self, hidden):
    return jax.nn.log_softmax(self.head(hidden))  # [batch, shortlist + clusters]

  def _log_p_tail(self, hidden, i):
    return jax.nn.log_softmax(self.tails[i](self.projections[i](hidden)))  # [batch, |cluster|]

  def log_probs(self, hidden: jnp.ndarray) -> jnp.ndarray:
    log_p_head = self._log_p_head(hidden)
    shortlist = self.cutoffs[0]
    parts = [log_p_head[:, :shortlist]]
    for i in range(len(self.bounds)):
      parts.append(log_p_head[:, shortlist + i, None] + self._log_p_tail(hidden, i))
    return jnp.concatenate(parts, axis=1)

  def log_prob(self, hidden: jnp.ndarray, targets: jnp.ndarray) -> jnp.ndarray:
    """Exact log P(target | h): the head softmax at the target's own unit (its word, or its
    cluster's unit), plus for a tail word the tail softmax at it. Each normalizer is summed
    in chunks where a layer's scores are large (OutputLayer.log_softmax_at)."""
    shortlist = self.cutoffs[0]
    # A few cutoffs: compared all at once, not a loop (a GPU launches a loop's rounds in turn).
    cluster = jnp.searchsorted(jnp.asarray(self.cutoffs), targets, side='right',
                               method='compare_all') - 1
    log_p = self.head.log_softmax_at(hidden, jnp.where(targets < shortlist, targets,
                                                       shortlist + cluster))
    # Static shapes: every tail is computed for the whole batch and used where it applies.
    for i, (start, end) in enumerate(self.bounds):
      in_tail = (targets >= start) & (targets < end)
      log_p_word = self.tails[i].log_softmax_at(self.projections[i](hidden),
                                                jnp.where(in_tail, targets - start, 0))
      log_p = jnp.where(in_tail, log_p + log_p_word, log_p)
    return log_p

  def loss(self, hidden: jnp.ndarray, targets: jnp.ndarray, rng=None) -> jnp.ndarray:
    del rng
    return -self.log_prob(hidden, targets)
