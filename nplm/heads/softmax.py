"""The full softmax output layer: the reference every other head is measured against."""

import flax.linen as nn
import jax.numpy as jnp
from jax.sharding import Mesh

from nplm.heads.output_layer import OutputLayer


class SoftmaxHead(nn.Module):
  """hidden [batch, D] -> P(w | context) over the whole vocabulary."""
  vocab_size: int
  input_width: int
  mesh: Mesh | None = None  # With a 'model' axis: vocabulary-parallel output rows.

  knobs = ()  # The full softmax has none.

  @classmethod
  def config_errors(cls, config) -> list[str]:
    del config  # The full softmax has no knobs.
    return []

  @classmethod
  def from_config(cls, config, counts, input_width: int) -> 'SoftmaxHead':
    del config  # The full softmax has no knobs.
    return cls(vocab_size=len(counts), input_width=input_width)

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
