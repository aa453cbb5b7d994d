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
(a scatter-add): for one example the tool's own step (but for a negative drawn twice for it,
which the tool scores the second time from the vector its first draw changed: an O(α²)
difference in a few percent of the examples, not worth the draw-by-draw loop that would cost a
third of the step), for many the sum of their steps without the updates made in between; a
skip-gram position's pairs, which the tool takes one after another, are summed too. word2vec's threads (and gensim's workers) make the same kind of
approximation, each reading vectors the others are writing (Hogwild, Recht et al. 2011); at
word2vec's small rates a batch's updates barely interact, so the results match (the
benchmark, experiments/results/word2vec/). Nothing sorts the ids read: a row read by several
examples receives the sum of their updates, which is what the scatter-add computes.

The tables: C [|V|, m] (the model's), the output vectors [rows, m] (the head's: |V| rows
for negative sampling, the |V| - 1 internal nodes for the tree). Their biases stay at zero:
word2vec has none.
"""

import jax
import jax.numpy as jnp

from nplm.models.word2vec import ABSENT

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


def output_step(table, hidden, rows, labels, counts, alpha, hierarchical: bool):
  """One output layer's part for a batch's examples: hidden [B, J, m] (J examples per
  position), their output rows [B, J, R] (negative sampling) or, shared by a position's
  examples, [B, R] (a tree path); labels and which count, shaped as the scores [B, J, R].
  -> (the table after the update, the error e of each example [B, J, m], the summed loss)."""
  shared = rows.ndim == 2
  if not shared:  # Rows that do not count read and write row 0, which stays in the cache.
    rows = jnp.where(counts, rows, 0)
  vectors = table[rows]  # [B, (J,) R, m]
  scores = jnp.einsum('bjm,brm->bjr' if shared else 'bjm,bjrm->bjr', hidden, vectors)
  g = alpha * jnp.where(counts, logistic_errors(scores, labels, hierarchical), 0.0)
  errors = jnp.einsum('bjr,brm->bjm' if shared else 'bjr,bjrm->bjm', g, vectors)
  if shared:  # Each row's update summed over the position's examples: [B, R, m].
    updates = jnp.einsum('bjr,bjm->brm', g, hidden)
  else:
    updates = g[..., None] * hidden[:, :, None, :]
  table = table.at[rows.reshape(-1)].add(updates.reshape(-1, table.shape[1]).astype(table.dtype))
  loss = jnp.sum(jnp.where(counts, logistic_loss(scores, labels), 0.0))
  return table, errors, loss


def step(model: str, output, vectors, out_table, windows, centers, mask, alpha, rng):
  """word2vec's update for a batch of positions: windows [B, 2c] (ABSENT beyond the drawn
  radius), centers [B], mask [B] (1 for a real position). `output` says how the output
  vectors are read: ('tree', paths, bits, on_path) or ('sampled', proposal, k).
  -> (C, output vectors, the summed loss, the examples counted: pairs or positions)."""
  present = (windows != ABSENT) & (mask[:, None] > 0)
  context = jnp.where(present, windows, 0)
  read = vectors[context]  # [B, 2c, m]
  if model == 'cbow':  # One example per position: the mean of its context words.
    count = present.sum(axis=1)
    hidden = (jnp.sum(jnp.where(present[..., None], read, 0.0), axis=1)
              / jnp.maximum(count, 1)[:, None])[:, None]  # [B, 1, m]
    examples = (count > 0)[:, None]  # The tool skips a position with no context word.
  else:  # One example per (context word, center word) pair: C(w_{t+j}) predicts w_t.
    hidden, examples = read, present
  if output[0] == 'tree':
    _, paths, bits, on_path = output
    rows, labels = paths[centers], bits[centers].astype(jnp.float32)
    counts = examples[..., None] & on_path[centers][:, None, :]
    labels = jnp.broadcast_to(labels[:, None, :], counts.shape)
  else:
    _, proposal, num_samples = output
    negatives = draw_negatives(proposal, rng, (*hidden.shape[:2], num_samples))
    rows, labels, counts = sampled_outputs(negatives, centers)
    counts = counts & examples[..., None]
  out_table, errors, loss = output_step(out_table, hidden, rows, labels, counts, alpha,
                                        output[0] == 'tree')
  errors = jnp.where(examples[..., None], errors, 0.0)
  if model == 'cbow':  # Every context word receives the whole error.
    errors = jnp.where(present[..., None], errors, 0.0)  # [B, 1, m] -> [B, 2c, m]
  updates = errors.reshape(-1, vectors.shape[1]).astype(vectors.dtype)
  vectors = vectors.at[context.reshape(-1)].add(updates)
  return vectors, out_table, loss, jnp.sum(examples)


def chunked_step(model: str, output, vectors, out_table, windows, centers, mask, alpha, rng,
                 chunk: int):
  """`step` over the batch's positions `chunk` at a time, one after another, each chunk
  reading the vectors the previous ones left: word2vec's sequential updates, a chunk's
  examples summed. -> (C, output vectors, the summed loss, the examples counted)."""
  count = centers.shape[0] // chunk

  def chunk_step(carry, piece):
    vectors, out_table, loss, examples = carry
    windows, centers, mask, index = piece
    vectors, out_table, chunk_loss, chunk_examples = step(
        model, output, vectors, out_table, windows, centers, mask, alpha,
        jax.random.fold_in(rng, index))
    return (vectors, out_table, loss + chunk_loss, examples + chunk_examples), None

  pieces = (windows.reshape(count, chunk, -1), centers.reshape(count, chunk),
            mask.reshape(count, chunk), jnp.arange(count))
  zero = jnp.zeros((), jnp.float32)
  (vectors, out_table, loss, examples), _ = jax.lax.scan(
      chunk_step, (vectors, out_table, zero, jnp.zeros((), jnp.int32)), pieces)
  return vectors, out_table, loss, examples
