"""A causal Transformer language model over the n-1 previous words, up to its output layer.

The decoder of Vaswani et al. (2017), "Attention Is All You Need": token embeddings scaled by
√d plus positional encodings, N blocks of masked multi-head self-attention and a position-wise
feed-forward network, each a residual branch. The blocks are pre-LayerNorm (Xiong et al. 2020,
"On Layer Normalization in the Transformer Architecture", as GPT-2):
x + Dropout(Attention(LN(x))), then x + Dropout(FFN(LN(x))), and one LayerNorm after the last.

A window model like the NNLM: the context [batch, n-1] comes w_{t-1} first
(nplm.data.batching.windows) and is read here in time order. Position i attends to positions
j <= i only, so its hidden vector predicts the word after it: evaluation reads the last
position (w_t from all n-1 words before it), training reads every position
(`every_position`, nplm.lm.LanguageModel.loss).

Under --dtype=bfloat16 the matmuls run in bfloat16 while LayerNorm's statistics (flax computes
them in at least float32) and attention's logits and softmax (jax's XLA implementation
promotes them) stay float32.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from nplm import heads, sparse_rows
from nplm.knobs import Knob

POSITIONS = ('sinusoidal', 'learned')


def sinusoidal_encodings(length: int, width: int) -> np.ndarray:
  """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)), [length, d]
  (Vaswani et al. 2017, section 3.5)."""
  pair = np.arange(width) // 2
  angles = np.arange(length)[:, None] / 10000.0 ** (2 * pair / width)
  return np.where(np.arange(width) % 2 == 0, np.sin(angles), np.cos(angles)).astype(np.float32)


class CausalSelfAttention(nn.Module):
  """Multi-head self-attention, each position attending to itself and the positions before it
  (Vaswani et al. 2017, section 3.2)."""
  num_heads: int

  @nn.compact
  def __call__(self, x: jnp.ndarray, last_only: bool = False) -> jnp.ndarray:
    """[batch, length, d], or with `last_only` the last position's output only [batch, 1, d]."""
    batch, length, width = x.shape
    qkv = nn.Dense(3 * width, name='qkv')(x)
    query, key, value = jnp.split(qkv.reshape(batch, length, 3 * self.num_heads, -1), 3, axis=2)
    if last_only:  # The last position attends to every position: no mask to apply.
      query = query[:, -1:]
    # softmax(Q Kᵀ / √d_k) V per head (Eq. 1), the logits of later positions masked out.
    # implementation=None: jax picks its kernel (XLA here: float32 logits and softmax).
    heads = jax.nn.dot_product_attention(query, key, value, is_causal=not last_only)
    return nn.Dense(width, name='output')(heads.reshape(batch, -1, width))  # W^O (3.2.2)


class FeedForward(nn.Module):
  """FFN(x) = GELU(x W1 + b1) W2 + b2 at each position: Vaswani et al. 2017's Eq. 2 with GELU
  (Hendrycks & Gimpel 2016) in place of max(0, ·), as GPT-2."""
  hidden_size: int

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    hidden = jax.nn.gelu(nn.Dense(self.hidden_size, name='hidden')(x))
    return nn.Dense(x.shape[-1], name='output')(hidden)


class Block(nn.Module):
  """One pre-LayerNorm block (Xiong et al. 2020, Figure 1 (b))."""
  num_heads: int
  hidden_size: int
  dropout: float

  @nn.compact
  def __call__(self, x: jnp.ndarray, train: bool, last_only: bool = False) -> jnp.ndarray:
    drop = nn.Dropout(self.dropout, deterministic=not train or self.dropout == 0.0)
    attended = CausalSelfAttention(self.num_heads, name='attention')(
        nn.LayerNorm(name='attention_norm')(x), last_only)
    x = (x[:, -1:] if last_only else x) + drop(attended)
    return x + drop(FeedForward(self.hidden_size, name='ffn')(nn.LayerNorm(name='ffn_norm')(x)))


class Transformer(nn.Module):
  """Maps the context [batch, n-1] (w_{t-1} first) to the hidden vector [batch, d] of its
  last position; `every_position` gives all n-1 positions' [batch, n-1, d], in time order."""
  vocab_size: int
  order: int  # n: a window of n-1 words
  feature_size: int  # d_model
  hidden_size: int  # the feed-forward width d_ff
  num_layers: int  # N blocks
  num_heads: int  # h
  positions: str = 'sinusoidal'  # or 'learned'
  dropout: float = 0.0  # On the input sums and each residual branch, in training only.

  language_model = True  # Gives p(w_t | the words before it).
  family = 'windows'  # Its feed (nplm.training.families).
  recurrent = False  # Each window is read afresh.
  trains_every_position = True  # Its loss covers a window's n-1 targets (nplm.lm).
  knobs = {
      'order': Knob(5, 'n: the model reads a window of n-1 words, its last position '
                        'predicting w_t.'),
      'feature_size': Knob(30, 'm: the size of each word feature vector C(w) (the embedding, '
                               'd_model).'),
      'hidden_size': Knob(100, 'h: the feed-forward width d_ff.'),
      'num_layers': Knob(1, 'Blocks.'),
      'num_heads': Knob(1, 'Attention heads per block (must divide --feature_size, d_model).'),
      'positions': Knob('sinusoidal', 'Positional encodings, sinusoidal (Vaswani et al. 2017) '
                                      'or learned.'),
      'dropout': Knob(0.0, 'Dropout rate in training, on the input sums and each residual '
                           'branch.'),
      'tie_embeddings': Knob(False, 'The output rows are the input embedding C (needs the '
                             'hidden vector as wide as --feature_size).'),
  }

  @classmethod
  def config_errors(cls, config) -> list[str]:
    checks = [
        (config.order >= 2, f'--order must be at least 2 (one word of context), got '
         f'{config.order}'),
        (config.hidden_size > 0, '--model=transformer needs --hidden_size (the feed-forward '
         'width) of at least 1'),
        (config.num_layers >= 1, f'--num_layers must be positive, got {config.num_layers}'),
        (config.num_heads >= 1, f'--num_heads must be positive, got {config.num_heads}'),
        (config.num_heads < 1 or config.feature_size % config.num_heads == 0,
         f'--num_heads={config.num_heads} must divide --feature_size={config.feature_size} '
         '(each head reads feature_size / num_heads of it)'),
        (config.positions in POSITIONS,
         f'unknown --positions={config.positions!r}; known: {", ".join(POSITIONS)}'),
        (0 <= config.dropout < 1, f'--dropout must be within [0, 1), got {config.dropout}'),
    ]
    return [message for ok, message in checks if not ok]

  @classmethod
  def describe(cls, config) -> str:
    return (f'transformer (n={config.order}, {config.num_layers} layer'
            f'{"s" if config.num_layers > 1 else ""}, d={config.feature_size}, '
            f'{config.num_heads} heads, ffn {config.hidden_size}, {config.positions} positions, '
            f'dropout {config.dropout}{", tied" if config.tie_embeddings else ""})')

  @classmethod
  def from_config(cls, config, vocab_size: int) -> 'Transformer':
    return cls(vocab_size=vocab_size, order=config.order, feature_size=config.feature_size,
               hidden_size=config.hidden_size, num_layers=config.num_layers,
               num_heads=config.num_heads, positions=config.positions, dropout=config.dropout)

  @property
  def output_width(self) -> int:
    return self.feature_size

  def activation_words(self, config, head, batch: int, evaluated: int,
                       shards: int) -> tuple[int, int]:
    """The activations in words (train step, evaluation step; nplm.training.memory), `batch`
    and `evaluated` examples per device: per window L·(n-1)·(9m + 2h + 2·heads·(n-1)), the
    projections, the feed-forward layer and the attention logits and weights [heads, n-1,
    n-1], twice in training, which scores all n-1 positions; evaluation holds one block's
    (n-1)·(4m + h + heads·(n-1)) and scores the last position only."""
    head_train, head_eval = heads.step_scores(head, config.eval_batch_size, shards)
    context, m, h = self.order - 1, self.feature_size, self.hidden_size
    per_window = context * (9 * m + 2 * h + 2 * self.num_heads * context)
    one_block = context * (4 * m + h + self.num_heads * context)
    return (batch * (2 * self.num_layers * per_window + context * head_train),
            evaluated * (one_block + head_eval))

  def __call__(self, context: jnp.ndarray, train: bool = False) -> jnp.ndarray:
    """[batch, d]: the last position's vector, the one that predicts w_t."""
    return self.hidden_vectors(context, train, last_only=True)[:, 0]

  def every_position(self, context: jnp.ndarray, train: bool = False) -> jnp.ndarray:
    """[batch, n-1, d]: position i's vector predicts the word after the i-th of the window."""
    return self.hidden_vectors(context, train, last_only=False)

  @nn.compact
  def hidden_vectors(self, context: jnp.ndarray, train: bool, last_only: bool) -> jnp.ndarray:
    """Every position's vectors, or the last one's [batch, 1, d]: then the last block computes
    that position alone (evaluation reads only it)."""
    words = context[:, ::-1]  # Time order: w_{t-n+1} … w_{t-1}.
    drop = nn.Dropout(self.dropout, deterministic=not train or self.dropout == 0.0)
    embedded = sparse_rows.Embed(self.vocab_size, self.feature_size, name='C')(words)
    x = embedded * self.feature_size ** 0.5  # Vaswani 3.4; a Python float keeps the dtype.
    x = drop(x + self._encodings(words.shape[1]).astype(x.dtype))  # Vaswani 3.5 and 5.4.
    for layer in range(self.num_layers):
      block = Block(self.num_heads, self.hidden_size, self.dropout, name=f'block_{layer}')
      x = block(x, train, last_only and layer == self.num_layers - 1)
    return nn.LayerNorm(name='final_norm')(x)

  def _encodings(self, length: int) -> jnp.ndarray:
    if self.positions == 'learned':
      return self.param('positions', nn.initializers.normal(0.02), (length, self.feature_size))
    return jnp.asarray(sinusoidal_encodings(length, self.feature_size))
