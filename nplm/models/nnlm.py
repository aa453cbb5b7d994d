"""Bengio et al. (2003)'s neural probabilistic language model, up to its output layer.

Eq. 1 of the paper is y = b + W x + U tanh(d + H x), with x the concatenated features of
the n-1 context words. Written as one output layer over concat(x, tanh(d + H x)) (the direct
connections W x join U's input), the model below computes that concatenation (the "hidden"
vector) and the output head computes y = b + [W U] · hidden and the softmax, so every head
works with direct connections unchanged.
"""

import flax.linen as nn
import jax.numpy as jnp

from nplm import heads, sparse_rows
from nplm.knobs import Knob


class NNLM(nn.Module):
  """Maps the context [batch, n-1] (w_{t-1} first) to the hidden vector [batch, output_width]."""
  vocab_size: int
  order: int  # n
  feature_size: int  # m
  hidden_size: int  # h; 0 = no hidden layer
  direct: bool
  dropout: float = 0.0  # On x and on the tanh units, in training only.

  language_model = True  # Gives p(w_t | the words before it).
  family = 'windows'  # Its feed (nplm.training.families).
  recurrent = False  # Carries no state from one window to the next.
  knobs = {
      'order': Knob(5, 'n: the model predicts w_t from the n-1 previous words.'),
      'feature_size': Knob(30, 'm: the size of each word feature vector C(w) (the embedding).'),
      'hidden_size': Knob(100, 'h: tanh units (0 = none, needs --direct).'),
      'direct': Knob(False, 'Direct connections W x from the word features to the output.'),
      'dropout': Knob(0.0, 'Dropout rate in training, on x and on the tanh units.'),
      'tie_embeddings': Knob(False, 'The output rows are the input embedding C (needs the '
                             'hidden vector as wide as --feature_size).'),
  }

  @classmethod
  def config_errors(cls, config) -> list[str]:
    checks = [
        (config.order >= 2, f'--order must be at least 2 (one word of context), got '
         f'{config.order}'),
        (config.hidden_size >= 0, f'--hidden_size must be 0 or more, got '
         f'{config.hidden_size}'),
        (config.hidden_size != 0 or config.direct,
         '--hidden_size=0 leaves no path to the output: set --direct (as MLP3/MLP4)'),
        (0 <= config.dropout < 1, f'--dropout must be within [0, 1), got {config.dropout}'),
    ]
    return [message for ok, message in checks if not ok]

  @classmethod
  def describe(cls, config) -> str:
    return (f'nnlm (n={config.order}, m={config.feature_size}, h={config.hidden_size}'
            f'{", direct" if config.direct else ""}'
            f'{f", dropout {config.dropout}" if config.dropout else ""})')

  @classmethod
  def from_config(cls, config, vocab_size: int) -> 'NNLM':
    return cls(vocab_size=vocab_size, order=config.order, feature_size=config.feature_size,
               hidden_size=config.hidden_size, direct=config.direct, dropout=config.dropout)

  @property
  def output_width(self) -> int:
    features = (self.order - 1) * self.feature_size
    return self.hidden_size + (features if self.direct else 0)

  def activation_words(self, config, head, batch: int, evaluated: int,
                       shards: int) -> tuple[int, int]:
    """The activations in words (train step, evaluation step; nplm.training.memory), `batch`
    and `evaluated` examples per device: per example x, the tanh units and the hidden
    vector (kept and their gradients in training), and the head's scores."""
    head_train, head_eval = heads.step_scores(head, config.eval_batch_size, shards)
    per_example = ((self.order - 1) * self.feature_size + 2 * self.hidden_size
                   + self.output_width)
    return batch * (2 * per_example + head_train), evaluated * (per_example + head_eval)

  @nn.compact
  def __call__(self, context: jnp.ndarray, train: bool = False) -> jnp.ndarray:
    # Dropout (Srivastava et al. 2014) regularizes what the paper's networks overfit.
    drop = nn.Dropout(self.dropout, deterministic=not train or self.dropout == 0.0)
    word_features = sparse_rows.Embed(self.vocab_size, self.feature_size, name='C')(context)
    x = drop(word_features.reshape(context.shape[0], -1))  # x = (C(w_{t-1}), …, C(w_{t-n+1}))
    if self.hidden_size == 0:
      return x
    tanh_hidden = drop(jnp.tanh(nn.Dense(self.hidden_size, name='H')(x)))  # tanh(d + H x)
    return jnp.concatenate([x, tanh_hidden], axis=-1) if self.direct else tanh_hidden
