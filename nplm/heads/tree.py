"""The binary hierarchical softmax (Morin & Bengio 2005, section 3).

P(w | h) = Π_j σ(±(o_{n_j} · h + b_{n_j})) over the internal nodes n_j on w's path, + for a
right turn and - for a left one. Training and exact evaluation of one word touch only its
path: about log2 |V| node vectors instead of |V| output units. The leaves' probabilities sum
to one by construction (each node's two branches sum to one).
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from nplm.heads.binary_tree import BinaryTree, balanced_tree, huffman_tree
from nplm.heads.output_layer import OutputLayer
from nplm.knobs import Knob

TREES = {'huffman': huffman_tree, 'balanced': lambda counts: balanced_tree(len(counts))}


class TreeSoftmaxHead(nn.Module):
  """hidden -> P(w | h) as a product of binary decisions down a tree over the vocabulary."""
  vocab_size: int
  input_width: int
  tree: BinaryTree

  knobs = {'tree': Knob('huffman', 'huffman (from training counts) or balanced.')}
  output_rows = False  # Its rows are the tree's internal nodes, not the words.

  @classmethod
  def serves_word2vec(cls, name: str) -> bool:
    del name  # Hierarchical softmax is word2vec's own (Mikolov et al. 2013a).
    return True

  def word2vec_output(self) -> tuple[str, tuple]:
    """(the parameter of the node vectors, what word2vec's update reads: each word's
    path; nplm.training.word2vec_update)."""
    tree = self.tree
    return 'nodes', ('tree', jnp.asarray(tree.paths), jnp.asarray(tree.bits),
                     jnp.asarray(tree.mask))

  def scores_per_example(self, training: bool, batch: int | None, shards: int) -> int:
    """The path's nodes, each row of D+1 gathered (nplm.training.memory)."""
    del training, batch, shards  # The same path in training and evaluation.
    return self.tree.paths.shape[1] * (self.input_width + 1)

  @classmethod
  def config_errors(cls, config) -> list[str]:
    if config.tree not in TREES:
      return [f'unknown --tree={config.tree!r}; known: {", ".join(sorted(TREES))}']
    return []

  @classmethod
  def from_config(cls, config, counts, input_width: int) -> 'TreeSoftmaxHead':
    return cls(vocab_size=len(counts), input_width=input_width,
               tree=TREES[config.tree](counts))

  def setup(self):
    self.nodes = OutputLayer(self.tree.num_internal, self.input_width)  # o_n, b_n per node

  def log_prob(self, hidden: jnp.ndarray, targets: jnp.ndarray) -> jnp.ndarray:
    """Exact log P(target | h) from the target's path alone: [batch]."""
    node_scores = self.nodes.score_paths(hidden, jnp.asarray(self.tree.paths)[targets])
    signs = jnp.where(jnp.asarray(self.tree.bits)[targets], 1.0, -1.0)
    log_decisions = jax.nn.log_sigmoid(signs * node_scores)  # One binary decision per node.
    return jnp.sum(jnp.where(jnp.asarray(self.tree.mask)[targets], log_decisions, 0.0), axis=1)

  def log_probs(self, hidden: jnp.ndarray) -> jnp.ndarray:
    """All |V| words, [batch, |V|]: each node's log-probability from its parent's, top-down.

    Summing every word's padded path would cost |V|·depth per example; walking the tree one
    level at a time costs 2|V|.
    """
    node_scores = self.nodes(hidden)  # [batch, |V| - 1]
    log_right, log_left = jax.nn.log_sigmoid(node_scores), jax.nn.log_sigmoid(-node_scores)

    def log_edge(parents, bits):
      return jnp.where(bits, log_right[:, parents], log_left[:, parents])

    log_reach = jnp.zeros_like(node_scores)  # The root is reached with probability 1.
    for nodes, parents, bits in self.tree.levels:
      log_reach = log_reach.at[:, nodes].set(log_reach[:, parents] + log_edge(parents, bits))
    leaf_parents, leaf_bits = self.tree.paths[:, 0], self.tree.bits[:, 0]
    return log_reach[:, leaf_parents] + log_edge(leaf_parents, leaf_bits)

  def loss(self, hidden: jnp.ndarray, targets: jnp.ndarray, rng=None) -> jnp.ndarray:
    """Exact negative log-likelihood along the target's path."""
    del rng
    return -self.log_prob(hidden, targets)
