"""The two-level class-factored softmax (Goodman 2001; Mikolov et al. 2011,
section 3): P(w | h) = P(c(w) | h) · P(w | c(w), h), exactly normalized.

Classes are frequency bins over the frequency-sorted ids: each holds about the same share of
Σ_w √count(w) (Mikolov et al. 2011's √-frequency binning). Plain frequency binning would put
a few thousand rare words in the last class; the √ spreads them, so with √|V| classes no
class is much larger than a few hundred words, and training touches about |C| + max|class|
output units per example instead of |V|.
"""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from nplm.errors import ConfigError
from nplm.heads.output_layer import OutputLayer
from nplm.knobs import Knob


@dataclasses.dataclass(frozen=True, eq=False)
class WordClasses:
  """Contiguous classes of frequency-sorted ids: class c holds ids start[c] … start[c]+size[c]-1."""
  class_of: np.ndarray  # int32 [|V|]
  start: np.ndarray  # int32 [C]
  size: np.ndarray  # int32 [C]

  @classmethod
  def by_frequency(cls, counts, num_classes: int) -> 'WordClasses':
    mass = np.sqrt(np.maximum(np.asarray(counts, np.float64), 1.0))
    mass_before = np.cumsum(mass) - mass
    bins = np.minimum((num_classes * mass_before / mass.sum()).astype(np.int64),
                      num_classes - 1)
    # Bins are non-decreasing in the id; renumbering the non-empty ones keeps them contiguous.
    _, class_of = np.unique(bins, return_inverse=True)
    size = np.bincount(class_of)
    start = np.cumsum(size) - size
    return cls(class_of.astype(np.int32), start.astype(np.int32), size.astype(np.int32))

  @property
  def num_classes(self) -> int:
    return len(self.size)


class ClassSoftmaxHead(nn.Module):
  """hidden -> P(class | h) over the classes, then P(w | class, h) within the class."""
  vocab_size: int
  input_width: int
  classes: WordClasses

  knobs = {'num_classes': Knob(0, 'The number of frequency-binned classes (0 = √|V|).')}
  output_rows = False  # Its class layer is not one row per word.

  @classmethod
  def config_errors(cls, config) -> list[str]:
    """Checks that need the vocabulary come when it is built (from_config)."""
    if config.num_classes < 0:
      return [f'--num_classes must be 0 (√|V|) or more, got {config.num_classes}']
    return []

  @classmethod
  def from_config(cls, config, counts, input_width: int) -> 'ClassSoftmaxHead':
    num_classes = config.num_classes or int(round(np.sqrt(len(counts))))
    if num_classes > len(counts):
      raise ConfigError(f'--num_classes={num_classes} exceeds the vocabulary ({len(counts)} '
                        'words); use at most |V|, or 0 for √|V|')
    return cls(vocab_size=len(counts), input_width=input_width,
               classes=WordClasses.by_frequency(counts, num_classes))

  def scores_per_example(self, training: bool, batch: int | None, shards: int) -> int:
    """The classes' scores and the largest class's rows of D+1 (nplm.training.memory)."""
    del training, batch, shards
    return self.classes.num_classes + int(self.classes.size.max()) * (self.input_width + 1)

  def setup(self):
    self.class_output = OutputLayer(self.classes.num_classes, self.input_width)
    self.word_output = OutputLayer(self.vocab_size, self.input_width)

  def log_probs(self, hidden: jnp.ndarray) -> jnp.ndarray:
    """All |V| words: word scores normalized within each class by a segment logsumexp."""
    class_of = jnp.asarray(self.classes.class_of)
    log_p_class = jax.nn.log_softmax(self.class_output(hidden))  # log P(c | h)
    scores = self.word_output(hidden).T  # [|V|, batch]: segments run along the first axis
    segment_max = jax.ops.segment_max(scores, class_of, self.classes.num_classes,
                                      indices_are_sorted=True)
    shifted = jnp.exp(scores - segment_max[class_of])
    log_z = segment_max + jnp.log(jax.ops.segment_sum(
        shifted, class_of, self.classes.num_classes, indices_are_sorted=True))
    log_p_word = (scores - log_z[class_of]).T  # log P(w | c(w), h)
    return log_p_class[:, class_of] + log_p_word  # P(c(w) | h) · P(w | c(w), h) (Goodman 2001)

  def log_prob(self, hidden: jnp.ndarray, targets: jnp.ndarray) -> jnp.ndarray:
    """Exact log P(target | h) touching only the target's class: [batch]."""
    class_of = jnp.asarray(self.classes.class_of)
    target_class = class_of[targets]
    log_p_class = jnp.take_along_axis(jax.nn.log_softmax(self.class_output(hidden)),
                                      target_class[:, None], axis=1)[:, 0]
    # A window of the largest class's width that holds the target's whole class; it is
    # shifted left near the end of the vocabulary, and the other classes' words masked.
    width = int(self.classes.size.max())
    starts = jnp.minimum(jnp.asarray(self.classes.start)[target_class], self.vocab_size - width)
    scores = self.word_output.score_windows(hidden, starts, width)
    in_class = class_of[starts[:, None] + jnp.arange(width)] == target_class[:, None]
    log_z = jax.nn.logsumexp(jnp.where(in_class, scores, -jnp.inf), axis=1)
    target_scores = jnp.take_along_axis(scores, (targets - starts)[:, None], axis=1)[:, 0]
    return log_p_class + target_scores - log_z  # log P(c(w) | h) + log P(w | c(w), h)

  def loss(self, hidden: jnp.ndarray, targets: jnp.ndarray, rng=None) -> jnp.ndarray:
    """Exact negative log-likelihood, computed over the target's class only."""
    del rng
    return -self.log_prob(hidden, targets)
