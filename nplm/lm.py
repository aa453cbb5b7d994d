"""A language model: a model (context -> hidden) under a head (hidden -> loss | log p).

Feed-forward models read a window of n-1 words per example; recurrent models read a segment
[B, T] of words and carry a state, and their head sees the hidden vectors flattened to
[B·T, H], so every head works under every model. A feed-forward model that trains every
position of its window (the Transformer) is trained the same way, its [B, n-1, H] flattened
for the head, and evaluated at the window's last position only.

Every exact log-prob (`log_prob`, `log_probs`) is computed with float32 matmuls on any device
(nplm.precision); the training loss takes the backend's default.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from nplm.errors import ConfigError
from nplm.heads import build_head, head_class, with_output_rows
from nplm.models import build_model
from nplm.precision import exact


class LanguageModel(nn.Module):
  """Composes a feed-forward model with any head; its parameters are {'model': …, 'head': …}."""
  model: nn.Module
  head: nn.Module
  tied: bool = False  # The head's output rows are the model's input embedding C.

  @property
  def trains_every_position(self) -> bool:
    """Its training loss covers every position of a window, not only the last."""
    return getattr(self.model, 'trains_every_position', False)

  def loss(self, context: jnp.ndarray, targets: jnp.ndarray, rng=None) -> jnp.ndarray:
    """The training objective per example (with dropout, if the model has any); for a model
    that trains every position, the mean over the window's n-1 positions of the loss of the
    word after each (the window shifted by one, then the target)."""
    if not self.trains_every_position:
      return self.head.loss(self.model(context, train=True), targets, rng)
    hidden = self.model.every_position(context, train=True)  # [B, n-1, H], time order
    following = jnp.concatenate([context[:, ::-1][:, 1:], targets[:, None]], axis=1)
    losses = self.head.loss(hidden.reshape(-1, hidden.shape[-1]), following.reshape(-1), rng)
    return losses.reshape(following.shape).mean(axis=1)

  @exact
  def log_prob(self, context: jnp.ndarray, targets: jnp.ndarray) -> jnp.ndarray:
    return self.head.log_prob(self.model(context), targets)

  @exact
  def log_probs(self, context: jnp.ndarray) -> jnp.ndarray:
    return self.head.log_probs(self.model(context))

  @property
  def vocab_parallel(self) -> bool:
    """Its output rows are split over the mesh's 'model' axis (nplm.parallel)."""
    return getattr(self.head, 'mesh', None) is not None

  def variables_of(self, params: dict) -> dict:
    """The variables to apply the module with, from the parameters as trained and saved.

    Tied embeddings (Press & Wolf 2017) are stored once, as C; the head reads the same
    array, so the gradient of C sums both uses."""
    if not self.tied:
      return {'params': params}
    head = params['head']
    embedding = params['model']['C']['embedding']
    # Vocabulary-parallel rows are padded to a multiple of the shards (the bias shows how far).
    padding = head['output']['bias'].shape[0] - embedding.shape[0]
    if padding:
      embedding = jnp.pad(embedding, ((0, padding), (0, 0)))
    output = {**head['output'], 'embedding': embedding}
    return {'params': {**params, 'head': {**head, 'output': output}}}

  def stored_params(self, initialized: dict) -> dict:
    """The parameters to train from `init`'s: a tied head's copy of C is dropped."""
    if not self.tied:
      return initialized
    head = dict(initialized['head'])
    head['output'] = {k: v for k, v in head['output'].items() if k != 'embedding'}
    return {**initialized, 'head': head}


class RecurrentLanguageModel(LanguageModel):
  """A recurrent model under any head: words [B, T] and a state in, per-word results and the
  state after the segment out."""

  def _hidden(self, words, state, train=False):
    hidden, state = self.model(words, state, train)
    return hidden.reshape(-1, hidden.shape[-1]), state

  def loss(self, words, targets, state, rng=None):
    """The training objective per word [B, T] (with dropout), and the state after."""
    hidden, state = self._hidden(words, state, train=True)
    return self.head.loss(hidden, targets.reshape(-1), rng).reshape(targets.shape), state

  @exact
  def log_prob(self, words, targets, state):
    """Exact log p(target_t | all earlier words) [B, T], and the state after."""
    hidden, state = self._hidden(words, state)
    return self.head.log_prob(hidden, targets.reshape(-1)).reshape(targets.shape), state

  @exact
  def hidden(self, words, state):
    """What the head reads after each word [B·T, H], and the state after."""
    return self._hidden(words, state)

  @exact
  def head_log_prob(self, hidden, targets):
    """Exact log p of each target [N] from its hidden state [N, H]."""
    return self.head.log_prob(hidden, targets)

  @exact
  def log_probs(self, words, state):
    """The full distribution after each word [B, T, |V|], and the state after."""
    hidden, state = self._hidden(words, state)
    return self.head.log_probs(hidden).reshape(*words.shape, -1), state


COMPUTE_DTYPES = {'float32': jnp.float32, 'bfloat16': jnp.bfloat16}


def in_compute_dtype(params, dtype: str):
  """The parameters as the train step computes with them under --dtype: bfloat16 copies make
  every matmul and activation bfloat16 (the output layers return float32 scores, so the
  log-sum-exp and losses stay float32). The gradient flows back through the cast to the
  float32 parameters, which the optimizer keeps in float32; evaluation never casts."""
  if dtype == 'float32':
    return params
  return jax.tree.map(lambda p: p.astype(COMPUTE_DTYPES[dtype]), params)


def build_language_model(config, counts, mesh=None) -> LanguageModel:
  """The model and head of `config` for a vocabulary with these training-split counts
  (ids sorted by frequency, as `Vocabulary.counts`), its output rows split over the mesh's
  'model' axis if it has one (nplm.parallel)."""
  model = build_model(config, len(counts))
  if config.tie_embeddings:
    if not head_class(config.head).output_rows:
      raise ConfigError(f'--tie_embeddings needs a head with one output row per word '
                        f'({", ".join(with_output_rows())}); --head={config.head} has none')
    if model.output_width != config.feature_size:
      raise ConfigError(f'--tie_embeddings needs the hidden vector as wide as the embeddings: '
                        f'the model gives {model.output_width}, --feature_size is '
                        f'{config.feature_size}; make them equal')
  language_model = RecurrentLanguageModel if model.recurrent else LanguageModel
  return language_model(model=model, head=build_head(config, counts, model.output_width, mesh),
                        tied=config.tie_embeddings)
