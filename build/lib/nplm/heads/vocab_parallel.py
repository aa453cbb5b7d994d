"""The parameter-parallel output layer (Bengio et al. 2003, section 3.2).

The |V|-way output layer dominates the cost of a step, so the paper splits the output units
over processors: each one holds the rows o_w, b_w of its own words, computes their scores
s(w, h) = b_w + o_w · h for the whole minibatch, and only [batch]-sized partial results cross
processors. Here the processors are the shards of the mesh axis 'model':

  embedding [R, D], bias [R]   sharded along R over 'model'
  hidden [b, D], targets [b]   sharded along the batch over 'data'

R is the vocabulary padded up to a multiple of the 'model' shards (`padded_rows`); rows with
id >= vocab_size are padding, masked out of every sum. The log-partition is a logsumexp
combined across shards, max-shifted for stability: each shard sends its local max (pmax),
then its Σ exp(s - max) (psum); a target's score comes from the one shard that owns it (psum
of a value that is 0 elsewhere). The full [b, R] logits are never gathered: the only
collectives are all-reduces of [b]-sized vectors.

The mesh has exactly the axes ('data', 'model'); either may have size 1.
"""

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

_ROWS = P('model', None)
_BIASES = P('model')


def _batch_specs(hidden: jnp.ndarray, mesh: Mesh) -> tuple[P, P]:
  """Specs of hidden [b, D] and of per-example arrays [b]: split over 'data', or replicated
  where 'data' does not divide b (initialization's single example, generation)."""
  axis = 'data' if hidden.shape[0] % mesh.shape['data'] == 0 else None
  return P(axis, None), P(axis)


def padded_rows(vocab_size: int, shards: int) -> int:
  """vocab_size rounded up to a multiple of shards: the R that splits evenly over 'model'."""
  return -(-vocab_size // shards) * shards


def _check_rows(embedding: jnp.ndarray, vocab_size: int, mesh: Mesh) -> None:
  rows, shards = embedding.shape[0], mesh.shape['model']
  if rows % shards or rows < vocab_size:
    raise ValueError(f'{rows} output rows do not pad {vocab_size} words to a multiple of '
                     f"{shards} 'model' shards: expected {padded_rows(vocab_size, shards)}")


def _first_row(rows_per_shard: int) -> jnp.ndarray:
  """The global id of this 'model' shard's first row (call inside shard_map)."""
  return jax.lax.axis_index('model') * rows_per_shard


def _owned(units: jnp.ndarray, rows_per_shard: int):
  """Which of `units` this shard holds, and their local row (0 where not held: a safe gather)."""
  local = units - _first_row(rows_per_shard)
  owned = (local >= 0) & (local < rows_per_shard)
  return owned, jnp.where(owned, local, 0)


def _local_scores(hidden, embedding, bias, vocab_size: int) -> jnp.ndarray:
  """s(w, h) for this shard's rows, [b_local, rows]; -inf on pad rows, so they drop out of
  the max and contribute exp(-inf) = 0 (with a zero gradient) to the sum."""
  scores = hidden @ embedding.T + bias  # y = b + U·h over this shard's words   (Eq. 1)
  ids = _first_row(embedding.shape[0]) + jnp.arange(embedding.shape[0])
  return jnp.where(ids < vocab_size, scores, -jnp.inf)


def _shift(scores: jnp.ndarray) -> jnp.ndarray:
  """The global max over the valid rows, [b]. log Z does not depend on it, and pmax has no
  differentiation rule, so its gradient is stopped before the collective (stopping it after
  is too late: the JVP still reaches pmax and raises). A shard of pad rows
  only sends -inf; the vocabulary is never empty, so the result is finite."""
  return jax.lax.pmax(jax.lax.stop_gradient(jnp.max(scores, axis=1)), 'model')


def _sum_exp(scores: jnp.ndarray, shift: jnp.ndarray) -> jnp.ndarray:
  """This shard's Σ_w exp(s(w) - shift), [b]: 0 from a shard of pad rows."""
  return jnp.sum(jnp.exp(scores - shift[:, None]), axis=1)


def _log_z(scores: jnp.ndarray) -> jnp.ndarray:
  """log Z = max + log Σ_shards Σ_w exp(s(w) - max), [b]."""
  shift = _shift(scores)
  return shift + jnp.log(jax.lax.psum(_sum_exp(scores, shift), 'model'))


def _owner_score(scores: jnp.ndarray, targets: jnp.ndarray) -> jnp.ndarray:
  """s(targets[i]) read from the local scores where this shard owns it, else 0, [b]."""
  owned, local = _owned(targets, scores.shape[1])
  picked = jnp.take_along_axis(scores, local[:, None], axis=1)[:, 0]
  return jnp.where(owned, picked, 0.)


def log_partition(hidden, embedding, bias, vocab_size: int, mesh: Mesh) -> jnp.ndarray:
  """log Z(h) = log Σ_{w < vocab_size} exp(s(w, h)), [b]: each shard sums its own words, and
  only the [b] max and partial sums cross shards."""
  _check_rows(embedding, vocab_size, mesh)

  def shard(hidden, embedding, bias):
    return _log_z(_local_scores(hidden, embedding, bias, vocab_size))

  hidden_spec, example_spec = _batch_specs(hidden, mesh)
  return jax.shard_map(shard, mesh=mesh, in_specs=(hidden_spec, _ROWS, _BIASES),
                       out_specs=example_spec)(hidden, embedding, bias)


def score_each(hidden, embedding, bias, units, mesh: Mesh) -> jnp.ndarray:
  """s(units[i], hidden[i]), [b]: gathered and scored on the shard that owns units[i]."""

  def shard(hidden, embedding, bias, units):
    owned, local = _owned(units, embedding.shape[0])
    scores = jnp.sum(hidden * embedding[local], axis=-1) + bias[local]
    return jax.lax.psum(jnp.where(owned, scores, 0.), 'model')

  hidden_spec, example_spec = _batch_specs(hidden, mesh)
  return jax.shard_map(shard, mesh=mesh, in_specs=(hidden_spec, _ROWS, _BIASES, example_spec),
                       out_specs=example_spec)(hidden, embedding, bias, units)


def score_shared(hidden, embedding, bias, units, mesh: Mesh) -> jnp.ndarray:
  """s(units[j], hidden[i]) for k units shared by the batch (e.g. noise samples), [b, k]:
  each unit scored on the shard that owns it."""

  def shard(hidden, embedding, bias, units):
    owned, local = _owned(units, embedding.shape[0])
    scores = hidden @ embedding[local].T + bias[local]
    return jax.lax.psum(jnp.where(owned[None, :], scores, 0.), 'model')

  hidden_spec, _ = _batch_specs(hidden, mesh)
  return jax.shard_map(shard, mesh=mesh, in_specs=(hidden_spec, _ROWS, _BIASES, P()),
                       out_specs=hidden_spec)(hidden, embedding, bias, units)


def log_softmax_at(hidden, embedding, bias, targets, vocab_size: int, mesh: Mesh):
  """Exact log P(target | h) = s(target, h) - log Z(h), [b], in one pass over each shard's
  scores: the target's score rides in the same psum as the partial sums."""
  _check_rows(embedding, vocab_size, mesh)

  def shard(hidden, embedding, bias, targets):
    scores = _local_scores(hidden, embedding, bias, vocab_size)
    shift = _shift(scores)
    total, target = jax.lax.psum((_sum_exp(scores, shift), _owner_score(scores, targets)),
                                 'model')
    return target - shift - jnp.log(total)  # log e^{y_{w_t}} / Σ_i e^{y_i}   (Eq. 1)

  hidden_spec, example_spec = _batch_specs(hidden, mesh)
  return jax.shard_map(shard, mesh=mesh, in_specs=(hidden_spec, _ROWS, _BIASES, example_spec),
                       out_specs=example_spec)(hidden, embedding, bias, targets)


def log_softmax_full(hidden, embedding, bias, vocab_size: int, mesh: Mesh) -> jnp.ndarray:
  """The full normalized log P(w | h), [b, vocab_size], for generation and mixtures: each
  shard normalizes its own slice by the combined log Z. The result stays sharded
  P('data', 'model') when vocab_size is a multiple of the 'model' shards; otherwise cutting
  off the pad columns gathers it along 'model', as jax arrays cannot be sharded unevenly."""
  _check_rows(embedding, vocab_size, mesh)

  def shard(hidden, embedding, bias):
    scores = _local_scores(hidden, embedding, bias, vocab_size)
    return scores - _log_z(scores)[:, None]

  hidden_spec, _ = _batch_specs(hidden, mesh)
  log_probs = jax.shard_map(shard, mesh=mesh, in_specs=(hidden_spec, _ROWS, _BIASES),
                            out_specs=P(hidden_spec[0], 'model'))(hidden, embedding, bias)
  return log_probs[:, :vocab_size]
