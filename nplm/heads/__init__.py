"""Output heads map a hidden vector to a training loss and to exact log-probabilities.

Every head offers `loss(hidden, targets, rng)` (the training objective, possibly sampled),
`log_prob(hidden, targets)` (exact and normalized: every reported perplexity comes from it)
and `log_probs(hidden)` (the full [batch, |V|] distribution). Heads are built from the
config, the training-split counts of the frequency-sorted vocabulary (for trees, classes and
proposals) and the width of their input, the model's hidden vector.

--head names a registry entry or a class of the user's own ('module.path:Name') offering
what nplm's do: `knobs` (the Config fields it reads), `config_errors(config)`,
`from_config(config, counts, input_width)` and the three calls above.
"""

from nplm import components
from nplm.errors import ConfigError

__all__ = ['HEADS', 'OUTPUT_ROW_HEADS', 'build_head', 'head_class']

# Import paths, not classes: naming and validating a head imports no Flax.
HEADS = {
    'softmax': 'nplm.heads.softmax:SoftmaxHead',
    'class': 'nplm.heads.class_softmax:ClassSoftmaxHead',
    'tree': 'nplm.heads.tree:TreeSoftmaxHead',
    'is': 'nplm.heads.importance:ImportanceSamplingHead',
    'nce': 'nplm.heads.nce:NCEHead',
    'negative_sampling': 'nplm.heads.nce:NCEHead',  # Not a language model: see nplm/heads/nce.py.
    'adaptive': 'nplm.heads.adaptive:AdaptiveSoftmaxHead',
}


# Heads with one output row per word ({'output': {'embedding', 'bias'}}): the rows can be
# split over the vocabulary (vocabulary-parallel) and tied to the input embedding.
OUTPUT_ROW_HEADS = ('softmax', 'is', 'nce', 'negative_sampling')


def head_class(name: str):
  """The class --head=`name` names (a ConfigError if none)."""
  return components.load('--head', HEADS, name)


def readers(knob: str) -> list[str]:
  """The registry's heads that read the Config field `knob`."""
  return [name for name in HEADS if knob in head_class(name).knobs]


def config_errors(config) -> list[str]:
  """What in the config the named head cannot be built from: its knobs' values."""
  return head_class(config.head).config_errors(config)


def build_head(config, counts, input_width: int, mesh=None):
  """The head named by `config.head` for a vocabulary with these training counts, reading
  hidden vectors `input_width` wide; with a mesh whose 'model' axis is over 1, an output-row
  head splits its rows over it (the others stay replicated: their parameters are the tree's
  nodes or the classes', not |V| rows)."""
  head = head_class(config.head).from_config(config, counts, input_width)
  if mesh is not None and mesh.shape['model'] > 1 and config.head in OUTPUT_ROW_HEADS:
    if config.noise_per_example:
      raise ConfigError('--noise_per_example gathers rows per example, which the '
                        'vocabulary-parallel output layer does not: use a mesh without a '
                        "'model' axis, or noise shared by the batch")
    head = head.clone(mesh=mesh)
  return head
