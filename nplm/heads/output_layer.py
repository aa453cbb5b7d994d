"""The output units s(w, h) = b_w + o_w · h shared by the softmax and the sampled heads.

The output vectors o_w are stored as rows, {'embedding': [units, D], 'bias': [units]} (an
"output embedding"), not as a Dense kernel [D, units]: the sampled and tree heads gather a
few rows per update, and on a CPU gathering rows of [units, D] (and scatter-adding their
gradients) was 4x faster than gathering columns of [D, units]. The full softmax's matmul
reads either layout at the same speed.

The softmax, importance-sampling and NCE heads all hold one OutputLayer named 'output', so a
model trained with any of them is the same model as under the full softmax: the sampled
heads change only how its gradient is estimated.
"""

from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp


class OutputLayer(nn.Module):
  """Scores of every unit, of one unit per example, or of units shared by the batch."""
  units: int
  hidden_dim: int
  bias_init: Callable = nn.initializers.zeros_init()

  def setup(self):
    # lecun_normal over the fan-in D, as flax's Dense initializes its kernel.
    init = nn.initializers.lecun_normal(in_axis=1, out_axis=0)
    self.embedding = self.param('embedding', init, (self.units, self.hidden_dim))
    self.bias = self.param('bias', self.bias_init, (self.units,))

  def __call__(self, hidden: jnp.ndarray) -> jnp.ndarray:
    """s(w, h) for every unit: [batch, units]."""
    return hidden @ self.embedding.T + self.bias

  def score_each(self, hidden: jnp.ndarray, units: jnp.ndarray) -> jnp.ndarray:
    """s(units[i], hidden[i]): one unit per example, [batch]."""
    return jnp.sum(hidden * self.embedding[units], axis=-1) + self.bias[units]

  def score_paths(self, hidden: jnp.ndarray, units: jnp.ndarray) -> jnp.ndarray:
    """s(units[i, j], hidden[i]): a few units per example, [batch, j]."""
    return jnp.einsum('bd,bjd->bj', hidden, self.embedding[units]) + self.bias[units]

  def score_windows(self, hidden: jnp.ndarray, starts: jnp.ndarray, width: int) -> jnp.ndarray:
    """s(starts[i] + j, hidden[i]) for j < width: a run of consecutive units per example,
    [batch, width]. One slice per example, not `width` gathered rows: several times faster."""
    def window(start):
      return (jax.lax.dynamic_slice_in_dim(self.embedding, start, width),
              jax.lax.dynamic_slice_in_dim(self.bias, start, width))
    vectors, biases = jax.vmap(window)(starts)
    return jnp.einsum('bd,bjd->bj', hidden, vectors) + biases

  def score_shared(self, hidden: jnp.ndarray, units: jnp.ndarray) -> jnp.ndarray:
    """s(units[j], hidden[i]) for units shared by the batch: one dense matmul, [batch, k]."""
    return hidden @ self.embedding[units].T + self.bias[units]
