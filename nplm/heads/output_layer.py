"""The output units s(w, h) = b_w + o_w · h shared by the softmax and the sampled heads.

The output vectors o_w are stored as rows, {'embedding': [units, D], 'bias': [units]} (an
"output embedding"), not as a Dense kernel [D, units]: the sampled and tree heads gather a
few rows per update, and on a CPU gathering rows of [units, D] (and scatter-adding their
gradients) was 4x faster than gathering columns of [D, units]. The full softmax's matmul
reads either layout at the same speed.

The softmax, importance-sampling and NCE heads all hold one OutputLayer named 'output', so a
model trained with any of them is the same model as under the full softmax: the sampled
heads change only how its gradient is estimated.

Under --dtype=bfloat16 the train step hands the layer bfloat16 weights and hidden vectors
(nplm.lm.in_compute_dtype): its matmuls run in bfloat16, its scores come out in float32.

Given a mesh whose 'model' axis has more than one device, the layer is vocabulary-parallel
(the paper's section 3.2; nplm.heads.vocab_parallel): its rows are padded to a multiple of
the shard count and split over 'model', the padding masked, and the full scores never
gathered.

On one shard, the exact log p of a target (`log_softmax_at`, what evaluation and the full
softmax's loss read) never holds more than `plain_bytes()` of scores: where [batch, units]
float32 would, the normalizer is summed over chunks of rows (`chunked_log_partition`) of
CHUNK_BYTES each. At |V| = 300k and 2,048 examples the full scores would be 2.5 GB.
"""

from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from nplm import sparse_rows
from nplm.heads import vocab_parallel


def _zero_padded(init: Callable, units: int) -> Callable:
  """`init` for the first `units` rows, zeros below: the same model on any number of
  vocabulary shards, and a checkpoint padded or cut to another count loses nothing."""
  def padded_init(key, shape, dtype=jnp.float32):
    values = init(key, (units, *shape[1:]), dtype)
    return jnp.pad(values, [(0, shape[0] - units)] + [(0, 0)] * (len(shape) - 1))
  return padded_init


# The most scores log_softmax_at holds in one piece on a CPU: at or below, the plain
# log-softmax (Brown's 14,039 words at --eval_batch_size=2048 are 115 MB, and keep it to the
# digit).
PLAIN_BYTES = 128 * 2 ** 20
# On an accelerator, this share of a device's memory: its chunks are a loop of thin matmuls,
# one after another, where the plain log-softmax is one wide matmul (MLP9 at batch 8,192,
# 460 MB of scores, ran as 14 chunks on the H200; its bfloat16 step there at 0.22x the float32
# one, against 1.14x at batch 256, one piece: experiments/results/h200/; this share is yet to
# be timed on a GPU).
ACCELERATOR_PLAIN_SHARE = 1 / 16
# Above, one chunk's scores: small enough to stay in the cache between the max and the sum
# over them (on the 2-core EPYC at |V| = 300k, 16 MiB chunks reach 66% of its square-matmul
# rate, 128 MiB chunks 47%; experiments/results/cpu/exact_eval.md).
CHUNK_BYTES = 16 * 2 ** 20
# Fewer rows than this per chunk would make matmuls too thin to keep an accelerator busy.
MIN_CHUNK_ROWS = 1024


def plain_bytes() -> int:
  """The most float32 scores held in one piece on the default backend's devices: PLAIN_BYTES
  on a CPU, ACCELERATOR_PLAIN_SHARE of an accelerator's memory (never less)."""
  device = jax.local_devices()[0]
  stats = device.memory_stats() if device.platform != 'cpu' else None
  if not stats or 'bytes_limit' not in stats:
    return PLAIN_BYTES
  return max(PLAIN_BYTES, int(stats['bytes_limit'] * ACCELERATOR_PLAIN_SHARE))


def chunk_rows(batch: int, units: int) -> int:
  """Rows scored at once for `batch` examples: all `units` where their float32 scores fit in
  plain_bytes(), else the fewest equal chunks of at most CHUNK_BYTES (or MIN_CHUNK_ROWS)."""
  if 4 * batch * units <= plain_bytes():
    return units
  most = max(MIN_CHUNK_ROWS, CHUNK_BYTES // (4 * max(batch, 1)))
  if units <= most:
    return units
  chunks = -(-units // most)
  return -(-units // chunks)


def every_score(hidden: jnp.ndarray, embedding: jnp.ndarray, bias: jnp.ndarray) -> jnp.ndarray:
  """y = b + U·h for every output row, [batch, units]: hidden [batch, D] @ embedding[units,
  D].T + bias; on a CPU, differentiated, as the bias in the matmul (`_bias_in_the_matmul`)."""
  if jax.default_backend() == 'cpu':
    return _bias_in_the_matmul(hidden, embedding, bias)
  return hidden @ embedding.T + bias


@jax.custom_vjp
def _bias_in_the_matmul(hidden, embedding, bias):
  """every_score; differentiated, the bias is the rows' last column, [U b]·[h 1]: one matmul
  writes the scores, and the bias's gradient comes out of the rows' (docs/decisions.md,
  "The output layer's matmuls").

  Written by hand for the CPU: autodiff of the plain expression writes the product, then the
  scores with the bias added (a pass through memory as large as the scores), and sums the
  gradient over the batch for the bias's (another); this copies the rows [units, D + 1] once
  a step instead. Not differentiated (evaluation), it is the plain expression: no copy, and
  evaluation's numbers as they were. On an accelerator every_score stays autodiff's plain
  expression: this form has not been timed there."""
  return hidden @ embedding.T + bias


def _bias_in_the_matmul_forward(hidden, embedding, bias):
  ones = jnp.ones((*hidden.shape[:-1], 1), hidden.dtype)
  with_one = jnp.concatenate([hidden, ones], axis=-1)  # [h 1]
  with_bias = jnp.concatenate([embedding, bias[:, None]], axis=-1)  # [U b]
  return with_one @ with_bias.T, (with_one, with_bias)


def _bias_in_the_matmul_backward(residuals, grad):
  with_one, with_bias = residuals
  hidden_grad, rows_grad = grad @ with_bias, grad.T @ with_one
  return hidden_grad[:, :-1], rows_grad[:, :-1], rows_grad[:, -1]


_bias_in_the_matmul.defvjp(_bias_in_the_matmul_forward, _bias_in_the_matmul_backward)


def chunked_log_partition(hidden, embedding, bias, units: int, chunk: int) -> jnp.ndarray:
  """log Z(h) = log Σ_{w < units} e^{y_w}, Eq. 1's normalizer (Bengio et al. 2003), [batch],
  from `chunk` rows of y = b + U·h at a time: memory O(batch·chunk), never O(batch·units), in
  evaluation. Differentiated (the full softmax's training step), the loop keeps each chunk's
  e^{y - m} and mask for the backward pass, 5 bytes a score, O(batch·units) as the memory
  estimate counts it: recomputing them instead (jax.checkpoint on the loop's body) took
  14-17 times less memory and 7-23% more time on a CPU (docs/decisions.md).

  An online logsumexp (Milakov & Gimelshein 2018): a running max m and a running sum
  Σ e^{y - m}, rescaled by e^{m_old - m_new} when a chunk raises the max. The last chunk
  starts at units - chunk (nothing padded or copied) and masks the rows already counted.
  The max is a constant of the result, so its gradient is stopped; the gradient of the sum
  is the softmax's. Reverse-differentiable: the chunk count is static."""
  batch = hidden.shape[0]

  def add_chunk(index, carry):
    peak, total = carry
    first = index * chunk
    start = jnp.minimum(first, units - chunk)
    rows = jax.lax.dynamic_slice_in_dim(embedding, start, chunk)
    scores = _float32(every_score(hidden, rows, jax.lax.dynamic_slice_in_dim(bias, start, chunk)))
    scores = jnp.where(start + jnp.arange(chunk) >= first, scores, -jnp.inf)
    raised = jnp.maximum(peak, jax.lax.stop_gradient(jnp.max(scores, axis=1)))
    total = (total * jnp.exp(peak - raised)
             + jnp.sum(jnp.exp(scores - raised[:, None]), axis=1))
    return raised, total

  empty = (jnp.full(batch, -jnp.inf, jnp.float32), jnp.zeros(batch, jnp.float32))
  peak, total = jax.lax.fori_loop(0, -(-units // chunk), add_chunk, empty)
  return peak + jnp.log(total)


@jax.custom_vjp
def log_softmax_of_scores_at(scores: jnp.ndarray, units: jnp.ndarray) -> jnp.ndarray:
  """log softmax(scores)[i, units[i]], [batch]: `jax.nn.log_softmax` then the target's entry,
  to the bit, forward and backward, in fewer passes over the [batch, units] scores.

  Written by hand because autodiff of the plain expression writes the scores' exponentials,
  a zero [batch, units] array and the one-hot scattered into it before the gradient: each a
  full pass through memory, which on a 2-core CPU cost as much as a matmul. Here the forward
  reads the scores twice (their max; Σ e^{y - max}) and writes nothing of their size, and the
  backward writes only the gradient, recomputing e^{y - max}. Its arithmetic is autodiff's,
  term for term: one-hot·g - e^{y - max}·(g / Σ e^{y - max})."""
  return _log_softmax_of_scores_at_forward(scores, units)[0]


def _log_softmax_of_scores_at_forward(scores, units):
  peak = jax.lax.stop_gradient(jnp.max(scores, axis=-1, keepdims=True))
  total = jnp.sum(jnp.exp(scores - peak), axis=-1)
  target = jnp.take_along_axis(scores, units[:, None], axis=-1) - peak
  return target[:, 0] - jnp.log(total), (scores, peak, total, units)


def _log_softmax_of_scores_at_backward(residuals, grad):
  scores, peak, total, units = residuals
  is_target = jax.lax.broadcasted_iota(jnp.int32, scores.shape, 1) == units[:, None]
  return (jnp.where(is_target, grad[:, None], 0.0)
          + jnp.exp(scores - peak) * (-grad / total)[:, None], None)


log_softmax_of_scores_at.defvjp(_log_softmax_of_scores_at_forward,
                                _log_softmax_of_scores_at_backward)


def _float32(scores: jnp.ndarray) -> jnp.ndarray:
  """Scores leave the layer in float32 whatever the matmul's precision (--dtype): the
  log-sum-exp and the losses over them are never taken in bfloat16."""
  return scores.astype(jnp.float32)


class OutputLayer(nn.Module):
  """Scores of every unit, of one unit per example, or of units shared by the batch."""
  units: int
  input_width: int
  bias_init: Callable = nn.initializers.zeros_init()
  mesh: Mesh | None = None  # Its 'model' axis splits the rows (vocabulary-parallel).

  @property
  def shards(self) -> int:
    return 1 if self.mesh is None else self.mesh.shape['model']

  def setup(self):
    rows = vocab_parallel.padded_rows(self.units, self.shards)
    # lecun_normal over the fan-in D, as flax's Dense initializes its kernel.
    init = nn.initializers.lecun_normal(in_axis=1, out_axis=0)
    self.embedding = self.param('embedding', _zero_padded(init, self.units),
                                (rows, self.input_width))
    self.bias = self.param('bias', _zero_padded(self.bias_init, self.units), (rows,))

  def __call__(self, hidden: jnp.ndarray) -> jnp.ndarray:
    """s(w, h) for every unit: [batch, units]."""
    return _float32(every_score(hidden, self.embedding, self.bias))

  def log_softmax(self, hidden: jnp.ndarray) -> jnp.ndarray:
    """log softmax over every unit, [batch, units]."""
    if self.shards > 1:
      return vocab_parallel.log_softmax_full(hidden, self.embedding, self.bias, self.units,
                                             self.mesh)
    y = self(hidden)  # y = b + [W U]·hidden = b + W x + U tanh(d + H x)   (Eq. 1)
    return jax.nn.log_softmax(y)  # P(w_t | context) = e^{y_{w_t}} / Σ_i e^{y_i}   (Eq. 1)

  def log_softmax_at(self, hidden: jnp.ndarray, units: jnp.ndarray) -> jnp.ndarray:
    """log softmax at units[i] for hidden[i], [batch]: s(units[i]) - log Z, Z summed in
    chunks where every unit's scores would exceed plain_bytes()."""
    if self.shards > 1:
      return vocab_parallel.log_softmax_at(hidden, self.embedding, self.bias, units,
                                           self.units, self.mesh)
    chunk = chunk_rows(hidden.shape[0], self.units)
    if chunk == self.units:
      return log_softmax_of_scores_at(self(hidden), units)
    # A plain gather, not take_rows: every row gets a gradient through log Z anyway, and a
    # table read by row would be updated by row (nplm.sparse_rows).
    target = _float32(jnp.sum(hidden * jnp.take(self.embedding, units, axis=0), axis=-1)
                      + jnp.take(self.bias, units))
    return target - chunked_log_partition(hidden, self.embedding, self.bias, self.units, chunk)

  def rows(self, units: jnp.ndarray):
    """(o_u, b_u) of the given units, read by row (nplm.sparse_rows): once per call."""
    return (sparse_rows.take_rows(self, 'embedding', self.embedding, units),
            sparse_rows.take_rows(self, 'bias', self.bias, units))

  def score_each(self, hidden: jnp.ndarray, units: jnp.ndarray) -> jnp.ndarray:
    """s(units[i], hidden[i]): one unit per example, [batch]."""
    if self.shards > 1:
      return vocab_parallel.score_each(hidden, self.embedding, self.bias, units, self.mesh)
    vectors, biases = self.rows(units)
    return _float32(jnp.sum(hidden * vectors, axis=-1) + biases)

  def score_each_and_shared(self, hidden: jnp.ndarray, units: jnp.ndarray,
                            shared: jnp.ndarray):
    """(score_each(hidden, units), score_shared(hidden, shared)), the rows read once."""
    if self.shards > 1:
      return self.score_each(hidden, units), self.score_shared(hidden, shared)
    vectors, biases = self.rows(jnp.concatenate([units, shared]))
    each = jnp.sum(hidden * vectors[:units.shape[0]], axis=-1) + biases[:units.shape[0]]
    return _float32(each), _float32(hidden @ vectors[units.shape[0]:].T
                                    + biases[units.shape[0]:])

  def score_paths(self, hidden: jnp.ndarray, units: jnp.ndarray) -> jnp.ndarray:
    """s(units[i, j], hidden[i]): a few units per example, [batch, j]."""
    vectors, biases = self.rows(units)
    return _float32(jnp.einsum('bd,bjd->bj', hidden, vectors) + biases)

  def score_windows(self, hidden: jnp.ndarray, starts: jnp.ndarray, width: int) -> jnp.ndarray:
    """s(starts[i] + j, hidden[i]) for j < width: a run of consecutive units per example,
    [batch, width]. One slice per example, not `width` gathered rows: several times faster."""
    def window(start):
      return (jax.lax.dynamic_slice_in_dim(self.embedding, start, width),
              jax.lax.dynamic_slice_in_dim(self.bias, start, width))
    vectors, biases = jax.vmap(window)(starts)
    return _float32(jnp.einsum('bd,bjd->bj', hidden, vectors) + biases)

  def score_shared(self, hidden: jnp.ndarray, units: jnp.ndarray) -> jnp.ndarray:
    """s(units[j], hidden[i]) for units shared by the batch: one dense matmul, [batch, k]."""
    if self.shards > 1:
      return vocab_parallel.score_shared(hidden, self.embedding, self.bias, units, self.mesh)
    return _float32(hidden @ self.embedding[units].T + self.bias[units])
