"""A model, a head and a source of a user's own package, written by WORKSPACE's recipe
("Adding things") outside nplm/, and named on the command line by their import paths:

  nplm train --model=tests.toy_components:MeanOfContext \
      --head=tests.toy_components:PlainSoftmax --dataset=tests.toy_components:Rhymes

tests/test_contract.py trains them and checks the numbers against numpy.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from nplm.data import sources
from nplm.data.vocab import UNK

LINE_END = '<line>'
WORDS = ('cat', 'hat', 'sat', 'mat', 'bat', 'rat', 'that', 'flat')


class MeanOfContext(nn.Module):
  """The mean of the n-1 context words' vectors: context [B, n-1] -> hidden [B, m]."""
  vocab_size: int
  order: int
  feature_size: int

  language_model = True
  family = 'windows'
  recurrent = False
  knobs = ('order', 'feature_size')

  @classmethod
  def config_errors(cls, config) -> list[str]:
    return [] if config.order >= 2 else [f'--order must be at least 2, got {config.order}']

  @classmethod
  def describe(cls, config) -> str:
    return f'mean of context (n={config.order}, m={config.feature_size})'

  @classmethod
  def from_config(cls, config, vocab_size: int) -> 'MeanOfContext':
    return cls(vocab_size=vocab_size, order=config.order, feature_size=config.feature_size)

  @property
  def output_width(self) -> int:
    return self.feature_size

  def activation_words(self, config, head, batch, evaluated, shards):
    """(train step, evaluation step) words: the context vectors and their mean (and their
    gradients in training), with the head's scores."""
    per_example = self.order * self.feature_size
    return (batch * (2 * per_example + 3 * head.scores_per_example(True, None, shards)),
            evaluated * (per_example + head.scores_per_example(False, evaluated, shards)))

  @nn.compact
  def __call__(self, context, train: bool = False):
    del train  # Nothing differs in training.
    return nn.Embed(self.vocab_size, self.feature_size, name='vectors')(context).mean(axis=1)


class PlainSoftmax(nn.Module):
  """A dense layer and a softmax: hidden [B, D] -> log p over the vocabulary."""
  vocab_size: int
  input_width: int

  knobs = ()
  output_rows = False  # Its rows are a Dense layer's, not an OutputLayer named `output`.

  @classmethod
  def config_errors(cls, config) -> list[str]:
    del config
    return []

  @classmethod
  def from_config(cls, config, counts, input_width: int) -> 'PlainSoftmax':
    del config
    return cls(vocab_size=len(counts), input_width=input_width)

  def scores_per_example(self, training, batch, shards):
    del training, batch, shards  # Every word's score, in one layer.
    return self.vocab_size

  def setup(self):
    self.scores = nn.Dense(self.vocab_size)

  def log_probs(self, hidden):
    return jax.nn.log_softmax(self.scores(hidden))

  def log_prob(self, hidden, targets):
    return jnp.take_along_axis(self.log_probs(hidden), targets[:, None], axis=1)[:, 0]

  def loss(self, hidden, targets, rng=None):
    del rng
    return -self.log_prob(hidden, targets)


class Rhymes(sources.Source):
  """Lines of rhyming words, each ended by '<line>' (its own marker), cut 300 / 100 / rest
  unless told; the argument is the number of lines (default 150)."""

  usage = 'tests.toy_components:Rhymes[:LINES]'
  boundary_token = LINE_END
  reserved_tokens = (UNK, LINE_END)
  cuts_by_tokens = True

  def __init__(self, argument: str):
    super().__init__(argument)
    self.lines = int(argument or 150)

  def default_split(self):
    return {'train_tokens': 300, 'valid_tokens': 100}

  def token_splits(self, config):
    tokens = []
    for line in range(self.lines):
      tokens += [WORDS[(line * 3 + k) % len(WORDS)] for k in range(1 + line % 4)] + [LINE_END]
    valid_end = config.train_tokens + config.valid_tokens
    return {'train': tokens[:config.train_tokens],
            'valid': tokens[config.train_tokens:valid_end], 'test': tokens[valid_end:]}
