"""Binary trees over the vocabulary for the hierarchical softmax: Huffman or balanced.

A word's probability is the product of the binary decisions on the path from the root to its
leaf (Morin & Bengio 2005, section 3). For an accelerator the paths are stored as dense arrays,
padded to the deepest leaf and masked, so a batch gathers [batch, depth] node vectors at once.
Edges are coded 0 for the left child and 1 for the right one; the node's logistic unit gives
P(bit = 1) (Morin & Bengio 2005).
"""

import dataclasses
import heapq
import itertools

import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)
class BinaryTree:
  """|V| leaves (the words) under |V| - 1 internal nodes, each with a logistic unit."""
  paths: np.ndarray  # int32 [|V|, depth]: internal nodes from the leaf's parent up to the root
  bits: np.ndarray  # bool [|V|, depth]: True where the path turns right at that node
  mask: np.ndarray  # bool [|V|, depth]: False on padding
  levels: tuple  # per depth 1, 2, …: (internal nodes, their parents, their bits) top-down

  @property
  def num_internal(self) -> int:
    return len(self.paths) - 1

  @property
  def depths(self) -> np.ndarray:
    return self.mask.sum(axis=1)

  def code(self, word: int) -> str:
    """The word's code from the root down, as a string of 0s and 1s."""
    bits = self.bits[word][self.mask[word]]
    return ''.join('1' if b else '0' for b in bits[::-1])


def huffman_tree(counts) -> BinaryTree:
  """Huffman 1952 (as word2vec builds it, Mikolov et al. 2013b): merge the two least
  frequent subtrees until one remains."""
  weights = np.maximum(np.asarray(counts, np.float64), 1.0)  # Unseen words weigh one count.
  vocab_size = len(weights)
  if vocab_size < 2:
    raise ValueError(f'a tree needs at least 2 words, got {vocab_size}')
  # Nodes 0 … |V|-1 are the leaves; |V| + i is the i-th internal node made.
  parent = np.zeros(2 * vocab_size - 1, np.int64)
  bit = np.zeros(2 * vocab_size - 1, bool)
  order = itertools.count()  # Breaks ties by age: equal weights give a balanced tree.
  heap = [(w, next(order), node) for node, w in enumerate(weights)]
  heapq.heapify(heap)
  for new_node in range(vocab_size, 2 * vocab_size - 1):
    left_weight, _, left = heapq.heappop(heap)
    right_weight, _, right = heapq.heappop(heap)
    parent[[left, right]] = new_node
    bit[right] = True
    heapq.heappush(heap, (left_weight + right_weight, next(order), new_node))
  return _tree_arrays(parent, bit, vocab_size)


def balanced_tree(vocab_size: int) -> BinaryTree:
  """A tree of depth ⌈log2 |V|⌉ over the ids in order: Huffman's merges on equal weights."""
  return huffman_tree(np.ones(vocab_size))


def _tree_arrays(parent: np.ndarray, bit: np.ndarray, vocab_size: int) -> BinaryTree:
  root = 2 * vocab_size - 2
  depth = np.zeros(2 * vocab_size - 1, np.int64)
  for node in range(root - 1, -1, -1):  # Parents are made after their children.
    depth[node] = depth[parent[node]] + 1
  max_depth = int(depth[:vocab_size].max())

  paths = np.zeros((vocab_size, max_depth), np.int32)
  bits = np.zeros((vocab_size, max_depth), bool)
  mask = np.zeros((vocab_size, max_depth), bool)
  node = np.arange(vocab_size)
  for step in range(max_depth):  # Walk all leaves up one edge at a time.
    below_root = node != root
    paths[:, step] = np.where(below_root, parent[node] - vocab_size, 0)
    bits[:, step] = bit[node] & below_root
    mask[:, step] = below_root
    node = np.where(below_root, parent[node], root)

  internal = np.arange(vocab_size, root)  # All internal nodes but the root.
  levels = tuple(
      (nodes - vocab_size, parent[nodes] - vocab_size, bit[nodes])
      for d in range(1, int(depth[internal].max(initial=0)) + 1)
      for nodes in [internal[depth[internal] == d]])
  return BinaryTree(paths=paths, bits=bits, mask=mask, levels=levels)
