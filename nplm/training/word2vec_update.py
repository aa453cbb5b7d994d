"""word2vec's own update: CBOW and skip-gram, hierarchical softmax or negative sampling, with
the word2vec tool's gradient and learning rate per pair (Mikolov et al. 2013a, 2013b).

For one (input, target) example the tool computes, with h the input vector (skip-gram: the
context word's C(w_{t+j}); CBOW: the mean of the context words' C) and α the rate:
  for each output vector v of the example (negative sampling: the target's and k negatives'
  from Q ∝ count^0.75, a negative equal to the target skipped; hierarchical softmax: the
  nodes on the target's Huffman path):
    f = h·v;  g = α (label - σ(f))         label 1 for the target (or the path's bit), else 0
    e += g v;  v += g h                      e, the error sent back to the input
  then C(w) += e for the input word (skip-gram), or for every context word (CBOW: each
  receives the whole error, not its share of the mean, as the tool and gensim's cbow_mean).
  Beyond |f| ≥ 6 (MAX_EXP) the tool takes σ as 0 or 1 (negative sampling), or skips the
  node (hierarchical softmax); σ is exact here, where the tool reads a 1,000-entry table.

A batch applies every example's update from the parameters as the batch found them, summed
(a scatter-add; nothing sorts the ids read): for one example the tool's own step, for many
the sum of their steps without the updates made in between. `chunked_step` applies a batch
a chunk at a time, so that only a chunk's updates are summed. word2vec's threads (and
gensim's workers) make the same kind of approximation, each reading vectors the others are
writing (Hogwild, Recht et al. 2011); at word2vec's small rates a chunk's updates barely
interact: CBOW's scores are gensim's, skip-gram's the same at 1, 32 or 128 positions per
chunk (experiments/results/word2vec/). A skip-gram position's pairs under the hierarchical
softmax all read its path's rows, and are taken in turn on them, as the tool takes them
(`path_in_turn`; their C rows' updates are the chunk's, summed): summed, a position's ~2c
updates of the same rows interacted, and its WordSim-353 trailed gensim's by 0.02. Under
negative sampling a position's pairs are summed (they share only the target's row). And a
negative drawn twice for one example is read twice from the same vector, where the tool reads
its first update the second time (an O(α²) difference in a few percent of the examples, not
worth the draw-by-draw loop, which cost a third of the step).

The tables: C [|V|, m] (the model's), the output vectors [rows, m] (the head's: |V| rows
for negative sampling, the |V| - 1 internal nodes for the tree). Their biases stay at zero:
word2vec has none.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from nplm.models.word2vec import ABSENT
from nplm.training import word2vec_native

MAX_EXP = 6.0  # The word2vec tool's bound on |f| (its sigmoid table's range).


def logistic_errors(scores, labels, hierarchical: bool):
  """label - σ(f) per score, with the tool's treatment beyond ±MAX_EXP."""
  sigma = jax.nn.sigmoid(scores)
  if hierarchical:  # The tool skips a node whose score is beyond the table.
    return jnp.where(jnp.abs(scores) < MAX_EXP, labels - sigma, 0.0)
  return labels - jnp.where(scores > MAX_EXP, 1.0, jnp.where(scores < -MAX_EXP, 0.0, sigma))


def logistic_loss(scores, labels):
  """-log σ(±f): the negative log-likelihood of each binary decision (for the logs)."""
  return jax.nn.softplus(jnp.where(labels > 0, -scores, scores))


def draw_negatives(proposal, rng, shape) -> jnp.ndarray:
  """k negatives per example drawn from Q (the proposal, count^0.75), with replacement:
  [B, J, k] for J examples of each of B positions."""
  batch, slots, num_samples = shape
  return proposal.sample(rng, num_samples, batch * slots).reshape(shape)


def sampled_outputs(negatives, centers):
  """(output rows [B, J, 1 + k]: the target, then the example's k negatives; labels; which
  count: a negative equal to the target is skipped, as the tool skips it)."""
  targets = jnp.broadcast_to(centers[:, None, None], (*negatives.shape[:2], 1))
  rows = jnp.concatenate([targets, negatives], axis=2)
  labels = jnp.zeros(rows.shape).at[..., 0].set(1.0)
  return rows, labels, (rows != targets) | (labels > 0)


class Examples(NamedTuple):
  """A batch's examples, every array by position first: what `apply` reads."""
  context: jnp.ndarray  # [B, 2c] the context words (0 where none)
  present: jnp.ndarray  # [B, 2c] which context slots hold a word of a real position
  counted: jnp.ndarray  # [B, J] which examples count (J: 2c pairs, or 1 for CBOW)
  rows: jnp.ndarray  # [B, J, R] each example's output rows, or [B, R] a position's path
  labels: jnp.ndarray  # [B, J, R]
  counts: jnp.ndarray  # [B, J, R] which rows of each example count


def examples_of(model: str, output, windows, centers, mask, rng, draw: bool = True) -> Examples:
  """The examples of a batch of positions: windows [B, 2c] (ABSENT beyond the drawn radius),
  centers [B], mask [B] (1 for a real position). `output` says how the output vectors are
  read: ('tree', paths, bits, on_path) or ('sampled', proposal, k), k negatives per example
  drawn from `rng`, or (`draw` False) none: rows [B, J, 1], each example's target, for the
  C++ update to draw its negatives."""
  present = (windows != ABSENT) & (mask[:, None] > 0)
  if model == 'cbow':  # One example per position, if it has a context word (as the tool).
    counted = jnp.any(present, axis=1, keepdims=True)
  else:  # One example per (context word, center word) pair: C(w_{t+j}) predicts w_t.
    counted = present
  if output[0] == 'tree':
    _, paths, bits, on_path = output
    rows = paths[centers]
    counts = counted[..., None] & on_path[centers][:, None, :]
    labels = jnp.broadcast_to(bits[centers][:, None, :].astype(jnp.float32), counts.shape)
  elif not draw:
    rows = jnp.broadcast_to(centers[:, None, None], (*counted.shape, 1))
    counts = counted[..., None]
    labels = jnp.ones(counts.shape)
  else:
    _, proposal, num_samples = output
    negatives = draw_negatives(proposal, rng, (*counted.shape, num_samples))
    rows, labels, counts = sampled_outputs(negatives, centers)
    counts = counts & counted[..., None]
    rows = jnp.where(counts, rows, 0)  # Rows that do not count: row 0, kept in the cache.
  return Examples(jnp.where(present, windows, 0), present, counted, rows, labels, counts)


def path_in_turn(hidden, path, labels, counts, alpha):
  """Scores, g and errors [B, J, ...] of skip-gram's examples sharing their position's path
  (hierarchical softmax), taken in turn as the tool takes a position's pairs: example j
  scores the path's rows [B, R, m] as examples 0 … j-1 left them (v += g h after each);
  and the rows' change [B, 1, R, m]. Summed from the rows as the position found them
  instead, its ~2c examples' updates of the same rows interact (docs/decisions.md)."""
  def example(rows, at):
    h, example_labels, example_counts = at
    scores = jnp.einsum('bm,brm->br', h, rows)
    g = alpha * jnp.where(example_counts, logistic_errors(scores, example_labels, True), 0.0)
    errors = jnp.einsum('br,brm->bm', g, rows)
    return rows + g[..., None] * h[:, None, :], (scores, g, errors)

  by_example = (jnp.swapaxes(hidden, 0, 1), jnp.swapaxes(labels, 0, 1),
                jnp.swapaxes(counts, 0, 1))
  taken_path, taken = jax.lax.scan(example, path, by_example)
  return (*(jnp.swapaxes(each, 0, 1) for each in taken), (taken_path - path)[:, None])


def apply(model: str, hierarchical: bool, vectors, out_table, examples: Examples, alpha):
  """word2vec's update for the examples, from the tables as they are: -> (C, output vectors,
  the summed loss, the examples counted: pairs or positions)."""
  context, present, counted, rows, labels, counts = examples
  read = vectors[context]  # [B, 2c, m]
  if model == 'cbow':  # The mean of the context words' vectors.
    hidden = (jnp.sum(jnp.where(present[..., None], read, 0.0), axis=1)
              / jnp.maximum(present.sum(axis=1), 1)[:, None])[:, None]  # [B, 1, m]
  else:
    hidden = read
  shared = rows.ndim == 2
  out = out_table[rows]  # [B, (J,) R, m]
  if shared and hidden.shape[1] > 1:
    scores, g, errors, out_updates = path_in_turn(hidden, out, labels, counts, alpha)
  else:
    scores = jnp.einsum('bjm,brm->bjr' if shared else 'bjm,bjrm->bjr', hidden, out)
    g = alpha * jnp.where(counts, logistic_errors(scores, labels, hierarchical), 0.0)
    errors = jnp.einsum('bjr,brm->bjm' if shared else 'bjr,bjrm->bjm', g, out)
    out_updates = g[..., None] * hidden[:, :, None, :]
  out_table = out_table.at[rows.reshape(-1)].add(
      out_updates.reshape(-1, out_table.shape[1]).astype(out_table.dtype))
  # CBOW: every context word receives the whole error ([B, 1, m] -> [B, 2c, m]).
  errors = jnp.where(present[..., None] & counted[..., None] if model == 'cbow'
                     else counted[..., None], errors, 0.0)
  vectors = vectors.at[context.reshape(-1)].add(
      jnp.broadcast_to(errors, read.shape).reshape(-1, vectors.shape[1]).astype(vectors.dtype))
  loss = jnp.sum(jnp.where(counts, logistic_loss(scores, labels), 0.0))
  return vectors, out_table, loss, jnp.sum(counted)


def step(model: str, output, vectors, out_table, windows, centers, mask, alpha, rng):
  """word2vec's update for a batch of positions (`examples_of`), all from the tables as the
  batch found them. -> (C, output vectors, the summed loss, the examples counted)."""
  examples = examples_of(model, output, windows, centers, mask, rng)
  return apply(model, output[0] == 'tree', vectors, out_table, examples, alpha)


def pairs_first(examples: Examples, size: int) -> Examples:
  """Skip-gram's examples with their own draws as [N, 1] pairs, the counted ones first in
  their order (by position, then slot), then the rest, N padded to a multiple of `size`:
  chunks of pairs then hold no empty slot but at the end. A permutation by scatter (no
  sort): counted pair i goes to its rank among them."""
  counted = examples.counted.reshape(-1)
  firsts = jnp.cumsum(counted) - 1
  rest = jnp.sum(counted) + jnp.cumsum(~counted) - 1
  order = jnp.zeros(counted.shape, jnp.int32).at[jnp.where(counted, firsts, rest)].set(
      jnp.arange(counted.shape[0], dtype=jnp.int32))
  padding = -counted.shape[0] % size

  def pairs(array, fill=0):
    array = array.reshape(counted.shape[0], 1, *array.shape[2:])[order]
    return jnp.pad(array, [(0, padding)] + [(0, 0)] * (array.ndim - 1), constant_values=fill)

  counted_pairs = pairs(examples.counted, False)
  return Examples(pairs(examples.context), counted_pairs, counted_pairs, pairs(examples.rows),
                  pairs(examples.labels), pairs(examples.counts, False))


def chunked_step(model: str, output, vectors, out_table, windows, centers, mask, alpha, rng,
                 chunk: int, threads: int = 0, every_chunk: bool = False):
  """`step`'s examples (the same draws) applied `chunk` positions at a time, one chunk after
  another, each reading the tables the previous ones left: word2vec's sequential updates, a
  chunk's examples summed. Skip-gram's sampled pairs, which share nothing within a position,
  are applied as many at a time as `chunk` positions have on average (c + 1 each), the
  empty slots left out. The examples are made for the whole batch at once, so the loop over
  chunks holds only the update. `threads` > 0: the loop is the compiled C++ one on a CPU
  (nplm.training.word2vec_native), its chunks shared among that many threads, each with
  its own copy of the tables, their changes summed at the end; it draws the negatives itself
  (other draws from the same Q). `every_chunk` (an accelerator's XLA loop): every chunk
  runs, skip-gram's pairs stay with their positions, and the loop's count is the compiler's
  to know. A loop to the last filled chunk stops at a count computed on the device, and
  XLA's GPU while loop reads such a loop's condition back to the host after every
  iteration, so the host cannot queue the next chunk's kernels while one runs; a chunk of
  empty slots costs an accelerator no more than its launches. -> (C, output vectors, the
  summed loss, the examples counted)."""
  sampled = output[0] == 'sampled'
  examples = examples_of(model, output, windows, centers, mask, rng, draw=not (threads and sampled))
  if model == 'skipgram' and sampled and not every_chunk:
    chunk = chunk * (windows.shape[1] // 2 + 1)
    examples = pairs_first(examples, chunk)
  count = examples.context.shape[0] // chunk
  pieces = jax.tree.map(lambda array: array.reshape(count, chunk, *array.shape[1:]), examples)
  hierarchical = output[0] == 'tree'
  # Chunks of none but empty slots (compacted pairs' end) would change nothing: not run.
  filled = count if every_chunk else jnp.sum(jnp.any(pieces.counted.reshape(count, -1), axis=1))
  if threads:
    if output[0] == 'tree':  # Each position's path once, not once per example.
      _, _, bits, on_path = output
      examples = examples._replace(labels=bits[centers].astype(jnp.float32),
                                   counts=on_path[centers])
    return word2vec_native.apply_chunks(model, vectors, out_table, examples, alpha, chunk,
                                        filled, threads, output, rng)

  def chunk_step(index, carry):
    vectors, out_table, loss, counted = carry
    piece = Examples(*(array[index] for array in pieces))
    vectors, out_table, chunk_loss, chunk_counted = apply(
        model, hierarchical, vectors, out_table, piece, alpha)
    return vectors, out_table, loss + chunk_loss, counted + chunk_counted

  start = (vectors, out_table, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))
  return jax.lax.fori_loop(0, filled, chunk_step, start)
