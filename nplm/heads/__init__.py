"""Output heads map a hidden vector to a training loss and to exact log-probabilities.

Every head offers `loss(hidden, targets, rng)` (the training objective, possibly sampled),
`log_prob(hidden, targets)` (exact and normalized: every reported perplexity comes from it)
and `log_probs(hidden)` (the full [batch, |V|] distribution). Heads are built from the
config, the training-split counts of the frequency-sorted vocabulary (for trees, classes and
proposals) and the width of the model's hidden vector.
"""

from nplm.errors import ConfigError
from nplm.heads.adaptive import AdaptiveSoftmaxHead
from nplm.heads.class_softmax import ClassSoftmaxHead
from nplm.heads.importance import ImportanceSamplingHead
from nplm.heads.nce import NCEHead
from nplm.heads.softmax import SoftmaxHead
from nplm.heads.tree import TREES, TreeSoftmaxHead

__all__ = ['HEADS', 'OUTPUT_ROW_HEADS', 'TREES', 'build_head']

HEADS = {
    'softmax': SoftmaxHead,
    'class': ClassSoftmaxHead,
    'tree': TreeSoftmaxHead,
    'is': ImportanceSamplingHead,
    'nce': NCEHead,
    'negative_sampling': NCEHead,  # Not a language model: see nplm/heads/nce.py.
    'adaptive': AdaptiveSoftmaxHead,
}


# Heads with one output row per word ({'output': {'embedding', 'bias'}}): the rows can be
# split over the vocabulary (vocabulary-parallel) and tied to the input embedding.
OUTPUT_ROW_HEADS = ('softmax', 'is', 'nce', 'negative_sampling')


def config_errors(config) -> list[str]:
  """What in the config no head could be built from: the head's name, and every head's
  checks of its own knobs (a knob set for another head must still hold a sound value)."""
  if config.head not in HEADS:
    return [f'unknown --head={config.head!r}; known: {", ".join(sorted(HEADS))}']
  errors = [error for head in dict.fromkeys(HEADS.values())
            for error in head.config_errors(config)]
  return list(dict.fromkeys(errors))


def build_head(config, counts, hidden_dim: int, mesh=None):
  """The head named by `config.head` for a vocabulary with these training counts; with a
  mesh whose 'model' axis is over 1, an output-row head splits its rows over it (the others
  stay replicated: their parameters are the tree's nodes or the classes', not |V| rows)."""
  head = HEADS[config.head].from_config(config, counts, hidden_dim)
  if mesh is not None and mesh.shape['model'] > 1 and config.head in OUTPUT_ROW_HEADS:
    if config.noise_per_example:
      raise ConfigError('--noise_per_example gathers rows per example, which the '
                        'vocabulary-parallel output layer does not: use a mesh without a '
                        "'model' axis, or noise shared by the batch")
    head = head.clone(mesh=mesh)
  return head
