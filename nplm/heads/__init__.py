"""Output heads map a hidden vector to a training loss and to exact log-probabilities.

Every head offers `loss(hidden, targets, rng)` (the training objective, possibly sampled),
`log_prob(hidden, targets)` (exact and normalized: every reported perplexity comes from it)
and `log_probs(hidden)` (the full [batch, |V|] distribution). Heads are built from the
config, the training-split counts of the frequency-sorted vocabulary (for trees, classes and
proposals) and the width of their input, the model's hidden vector.

--head names a registry entry or a class of the user's own ('module.path:Name') offering
what nplm's do: `knobs` (the Config fields it reads), `config_errors(config)`,
`from_config(config, counts, input_width)`, the three calls above, and what it is capable of:
  output_rows           True if its parameters hold one output row per word,
                        {'output': {'embedding': [|V|, D], 'bias': [|V|]}} (an OutputLayer
                        named `output` with the head's `mesh` field): the rows can then be
                        tied to the input embedding (--tie_embeddings) and split over the
                        mesh's 'model' axis (vocabulary-parallel)
  scores_per_example(training, batch, shards)
                        the scores one example holds in its step (nplm.training.memory's
                        estimate, in words): in training, or in an exact log p over a
                        global `batch` (None: log_probs), its rows split over `shards`
  serves_word2vec(name), word2vec_output()
                        only for heads that word2vec's own update trains (tree,
                        negative_sampling; nplm.training.word2vec_update)
"""

from nplm import components
from nplm.errors import ConfigError

__all__ = ['HEADS', 'build_head', 'head_class', 'with_output_rows']

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


def head_class(name: str):
  """The class --head=`name` names (a ConfigError if none)."""
  return components.load('--head', HEADS, name)


def readers(knob: str) -> list[str]:
  """The registry's heads that read the Config field `knob`."""
  return [name for name in HEADS if knob in head_class(name).knobs]


def with_output_rows() -> list[str]:
  """The registry's heads with one output row per word (their `output_rows`)."""
  return [name for name in HEADS if head_class(name).output_rows]


def serving_word2vec() -> list[str]:
  """The registry's heads that word2vec's own update trains (their `serves_word2vec`)."""
  return [name for name in HEADS if serves_word2vec(name)]


def serves_word2vec(name: str) -> bool:
  """Whether --head=`name` is one that word2vec's own update trains."""
  serves = getattr(head_class(name), 'serves_word2vec', None)
  return serves is not None and serves(name)


def step_scores(head, eval_batch: int | None, shards: int) -> tuple[int, int]:
  """(train step, evaluation step) words a head holds per example: 3·S in training (the
  scores, their softmax or sigmoid, their gradient), S in an exact log p over `eval_batch`
  (None: log_probs), S = head.scores_per_example."""
  return (3 * head.scores_per_example(True, None, shards),
          head.scores_per_example(False, eval_batch, shards))


def config_errors(config) -> list[str]:
  """What in the config the named head cannot be built from: its knobs' values."""
  return head_class(config.head).config_errors(config)


def build_head(config, counts, input_width: int, mesh=None):
  """The head named by `config.head` for a vocabulary with these training counts, reading
  hidden vectors `input_width` wide; with a mesh whose 'model' axis is over 1, an output-row
  head splits its rows over it (the others stay replicated: their parameters are the tree's
  nodes or the classes', not |V| rows)."""
  head = head_class(config.head).from_config(config, counts, input_width)
  if mesh is not None and mesh.shape['model'] > 1 and head.output_rows:
    if config.noise_per_example:
      raise ConfigError('--noise_per_example gathers rows per example, which the '
                        'vocabulary-parallel output layer does not: use a mesh without a '
                        "'model' axis, or noise shared by the batch")
    head = head.clone(mesh=mesh)
  return head
