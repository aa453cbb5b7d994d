"""A model, two heads and a source of a user's own package, written by WORKSPACE's recipe
("Adding things") outside nplm/, and named on the command line by their import paths:

  nplm train --model=tests.toy_components:MeanOfContext --context_scale=2 \
      --head=tests.toy_components:PlainSoftmax --dataset=tests.toy_components:Rhymes

The model and the source bring a knob of their own (--context_scale, --line_words); RowSoftmax has one output row per word,
so that it can be tied to the model's C and split over a mesh's 'model' axis. Nothing in
nplm/ names them. tests/test_contract.py trains them and checks the numbers against numpy.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from nplm.data import sources
from nplm.data.vocab import UNK
from nplm.heads.output_layer import OutputLayer
from nplm.knobs import Knob

LINE_END = '<line>'
WORDS = ('cat', 'hat', 'sat', 'mat', 'bat', 'rat', 'that', 'flat')


class MeanOfContext(nn.Module):
  """The mean of the n-1 context words' vectors C(w), times --context_scale: context
  [B, n-1] -> hidden [B, m]."""
  vocab_size: int
  order: int
  feature_size: int
  context_scale: float = 1.0

  language_model = True
  family = 'windows'
  recurrent = False
  knobs = {
      'order': Knob(5, 'n: the mean of the n-1 previous words predicts w_t.'),
      'feature_size': Knob(30, 'm: the size of each word vector C(w).'),
      'tie_embeddings': Knob(False, 'The output rows are C (a head with output rows).'),
      'context_scale': Knob(1.0, 'The hidden vector is the mean of the context vectors '
                                 'times this.'),  # Its own: nplm has no such knob.
  }

  @classmethod
  def config_errors(cls, config) -> list[str]:
    return [] if config.order >= 2 else [f'--order must be at least 2, got {config.order}']

  @classmethod
  def describe(cls, config) -> str:
    return f'mean of context (n={config.order}, m={config.feature_size})'

  @classmethod
  def from_config(cls, config, vocab_size: int) -> 'MeanOfContext':
    return cls(vocab_size=vocab_size, order=config.order, feature_size=config.feature_size,
               context_scale=config.context_scale)

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
    vectors = nn.Embed(self.vocab_size, self.feature_size, name='C')(context)
    return self.context_scale * vectors.mean(axis=1)


class PlainSoftmax(nn.Module):
  """A dense layer and a softmax: hidden [B, D] -> log p over the vocabulary."""
  vocab_size: int
  input_width: int

  knobs = {}
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


class RowSoftmax(nn.Module):
  """One output row per word (nplm's OutputLayer named `output`): hidden [B, D] -> log p over
  the vocabulary; tied to the model's C, or split over the mesh's 'model' axis."""
  vocab_size: int
  input_width: int
  mesh: jax.sharding.Mesh | None = None  # With a 'model' axis: vocabulary-parallel rows.

  knobs = {}
  output_rows = True

  @classmethod
  def config_errors(cls, config) -> list[str]:
    del config
    return []

  @classmethod
  def from_config(cls, config, counts, input_width: int) -> 'RowSoftmax':
    del config
    return cls(vocab_size=len(counts), input_width=input_width)

  def scores_per_example(self, training, batch, shards):
    del training, batch  # Every row's score, split over the shards.
    return -(-self.vocab_size // shards)

  def setup(self):
    self.output = OutputLayer(self.vocab_size, self.input_width, mesh=self.mesh)

  def log_probs(self, hidden):
    return self.output.log_softmax(hidden)

  def log_prob(self, hidden, targets):
    return self.output.log_softmax_at(hidden, targets)

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
  knobs = {**sources.split_knobs('The first this-many tokens train (0: 300).',
                                 'The next this-many validate (0: 100).'),
           'line_words': Knob(4, 'The most words in a line: line i has 1 + i mod this.')}

  def __init__(self, argument: str):
    super().__init__(argument)
    self.lines = int(argument or 150)

  def default_split(self):
    return {'train_tokens': 300, 'valid_tokens': 100}

  def token_splits(self, config):
    tokens = []
    for line in range(self.lines):
      words = 1 + line % config.line_words
      tokens += [WORDS[(line * 3 + k) % len(WORDS)] for k in range(words)] + [LINE_END]
    valid_end = config.train_tokens + config.valid_tokens
    return {'train': tokens[:config.train_tokens],
            'valid': tokens[config.train_tokens:valid_end], 'test': tokens[valid_end:]}
