"""A language model: a model (context -> hidden) under a head (hidden -> loss | log p)."""

import flax.linen as nn
import jax.numpy as jnp

from nplm.heads import build_head
from nplm.models import build_model


class LanguageModel(nn.Module):
  """Composes any model with any head; its parameters are {'model': …, 'head': …}."""
  model: nn.Module
  head: nn.Module

  def loss(self, context: jnp.ndarray, targets: jnp.ndarray, rng=None) -> jnp.ndarray:
    return self.head.loss(self.model(context), targets, rng)

  def log_prob(self, context: jnp.ndarray, targets: jnp.ndarray) -> jnp.ndarray:
    return self.head.log_prob(self.model(context), targets)

  def log_probs(self, context: jnp.ndarray) -> jnp.ndarray:
    return self.head.log_probs(self.model(context))


def build_language_model(config, counts) -> LanguageModel:
  """The model and head of `config` for a vocabulary with these training-split counts
  (ids sorted by frequency, as `Vocabulary.counts`)."""
  model = build_model(config, len(counts))
  return LanguageModel(model=model, head=build_head(config, counts, model.hidden_dim))
