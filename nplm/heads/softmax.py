"""The full softmax output layer: the reference every other head is measured against."""

import flax.linen as nn
import jax.numpy as jnp
from jax.sharding import Mesh

from nplm.heads.output_layer import OutputLayer, chunk_rows


class SoftmaxHead(nn.Module):
  """hidden [batch, D] -> P(w | context) over the whole vocabulary."""
  vocab_size: int
  input_width: int
  mesh: Mesh | None = None  # With a 'model' axis: vocabulary-parallel output rows.

  knobs = {}  # The full softmax has none.
  output_rows = True  # One row o_w, b_w per word: tied to C, split over the 'model' axis.

  @classmethod
  def config_errors(cls, config) -> list[str]:
    del config  # The full softmax has no knobs.
    return []

  @classmethod
  def from_config(cls, config, counts, input_width: int) -> 'SoftmaxHead':
    del config  # The full softmax has no knobs.
    return cls(vocab_size=len(counts), input_width=input_width)

  def scores_per_example(self, training: bool, batch: int | None, shards: int) -> int:
    """S, the scores one example holds (nplm.training.memory): every row's, |V| / the
    'model' shards; an exact log p over a global `batch` on one shard, the rows of one
    chunk of the normalizer (output_layer.chunk_rows)."""
    del training  # The full softmax scores every row in both.
    if batch is not None and shards == 1:
      return chunk_rows(batch, self.vocab_size)
    return -(-self.vocab_size // shards)

  def setup(self):
    self.output = OutputLayer(self.vocab_size, self.input_width, mesh=self.mesh)

  def log_probs(self, hidden: jnp.ndarray) -> jnp.ndarray:
    """The full normalized distribution, [batch, |V|]."""
    return self.output.log_softmax(hidden)  # Eq. 1 (nplm/heads/output_layer.py)

  def log_prob(self, hidden: jnp.ndarray, targets: jnp.ndarray) -> jnp.ndarray:
    """Exact log P(target | context), [batch]."""
    return self.output.log_softmax_at(hidden, targets)

  def loss(self, hidden: jnp.ndarray, targets: jnp.ndarray, rng=None) -> jnp.ndarray:
    """The training objective per example, [batch]: here the exact negative log-likelihood."""
    del rng  # Nothing is sampled.
    return -self.log_prob(hidden, targets)
