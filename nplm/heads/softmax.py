"""The full softmax output layer: the reference every other head is measured against."""

import flax.linen as nn
import jax
import jax.numpy as jnp

from nplm.heads.output_layer import OutputLayer


class SoftmaxHead(nn.Module):
  """hidden [batch, D] -> P(w | context) over the whole vocabulary."""
  vocab_size: int
  hidden_dim: int

  @classmethod
  def from_config(cls, config, counts, hidden_dim: int) -> 'SoftmaxHead':
    del config  # The full softmax has no knobs.
    return cls(vocab_size=len(counts), hidden_dim=hidden_dim)

  def setup(self):
    self.output = OutputLayer(self.vocab_size, self.hidden_dim)

  def log_probs(self, hidden: jnp.ndarray) -> jnp.ndarray:
    """The full normalized distribution, [batch, |V|]."""
    y = self.output(hidden)  # y = b + [W U]·hidden = b + W x + U tanh(d + H x)   (Eq. 1)
    return jax.nn.log_softmax(y)  # P(w_t | context) = e^{y_{w_t}} / Σ_i e^{y_i}   (Eq. 1)

  def log_prob(self, hidden: jnp.ndarray, targets: jnp.ndarray) -> jnp.ndarray:
    """Exact log P(target | context), [batch]."""
    return jnp.take_along_axis(self.log_probs(hidden), targets[:, None], axis=-1)[:, 0]

  def loss(self, hidden: jnp.ndarray, targets: jnp.ndarray, rng=None) -> jnp.ndarray:
    """The training objective per example, [batch]: here the exact negative log-likelihood."""
    del rng  # Nothing is sampled.
    return -self.log_prob(hidden, targets)
