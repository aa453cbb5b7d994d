"""Recurrent models by truncated BPTT: streams, the carried state, exact evaluation.

The training split is cut into B contiguous streams (nplm.data.streams) kept on the device;
update s reads segment s, [B, T] words, starting from the state the previous segment ended
in. That state enters the step as a constant, so gradients stop at the segment's start
(truncation), and it is part of the train state: checkpoints keep it and a resumed run goes
on exactly. It is reset to h_0 = 0 at the start of every epoch.

Evaluation reads a split as one stream in order, T' = --eval_batch_size words at a time (a
shorter split in one segment of its own length), carrying the state across the whole split:
every word is scored once, given all the words before it in the split, by the head's exact
log_prob.

Data-parallel (nplm.parallel): the B training streams and their carried states are split
over the mesh's 'data' axis. Evaluation's one stream is sequential: every data device reads
all of it, and only the head's output rows are split (over 'model').
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax.training import train_state

from nplm import parallel, sparse_rows
from nplm.display import counted
from nplm.data import batching, streams
from nplm.lm import COMPUTE_DTYPES, in_compute_dtype
from nplm.training import optimizer
from nplm.training.feed import Feed, masked_mean


class RecurrentTrainState(train_state.TrainState):
  carry: jnp.ndarray  # The recurrent state after the last segment trained on.


def _segment(array, index, length: int):
  return jax.lax.dynamic_slice_in_dim(array, index * length, length, axis=1)


def _ceil(a: int, b: int) -> int:
  return -(-a // b)


class StreamFeed(Feed):
  """A recurrent model (one at a time) on contiguous streams: segments, carried state."""

  batch_axes = {'carry': 2}  # The carry [layers, parts, B, H] is split over 'data' by stream.
  batch_layout = ('data', 'data', 'data', None)  # Words, targets, mask of the B streams; index.
  per_update = (False, False, False, True)
  scoring_layout = (None, None, None, None)  # One stream's words, targets; index; carry.
  scoring_unit = 'segment'
  trains_together = False  # Each model carries its own streams' state: one by one.

  @classmethod
  def example_span(cls, config) -> tuple[str, int, str]:
    length = config.bptt_length
    return '--bptt_length', length, f'trains on segments of {length:,} tokens'

  @classmethod
  def epoch_examples(cls, config, lm, train: int) -> tuple[str, int, int, str, int]:
    """B streams of --bptt_length words."""
    batch, length = config.batch_size, config.bptt_length
    return (f'--batch_size={batch:,} streams × --bptt_length={length:,} = '
            f'{counted(batch * length, "word")}', batch * length, train, 'word',
            train // length)

  @classmethod
  def data_words(cls, config, split_sizes: dict, data: int) -> int:
    """Words, targets and mask of the B streams (split over 'data'), and the words and
    targets of the one stream an evaluation reads, in segments of --eval_batch_size, padded
    to its scored length."""
    streams, length = config.batch_size, config.bptt_length
    per_stream = _ceil(_ceil(split_sizes.get('train', 0), streams), length) * length
    longest, segment = max(split_sizes.values()), config.eval_batch_size
    scored = batching.scored_length(_ceil(longest, segment) * segment)
    return 3 * _ceil(streams, data) * per_stream + 2 * scored

  @classmethod
  def example(cls, config, lm) -> tuple:
    words = jnp.zeros((1, 1), jnp.int32)
    return words, words, lm.model.initial_state(1)

  @classmethod
  def init_state(cls, config, lm, rng, tx) -> RecurrentTrainState:
    """The initial state on the default device (create_state lays it out): the parameters,
    the optimizer's state and h_0 = 0 for each of the --batch_size streams."""
    return RecurrentTrainState.create(apply_fn=lm.apply,
                                      params=cls.initial_params(config, lm, rng), tx=tx,
                                      carry=lm.model.initial_state(config.batch_size))

  def placed(self, ids):
    return np.asarray(ids)  # Cut into its stream at each pass: one split on the devices.

  def prepare_training(self, ids) -> int:
    num_streams, length = self.config.batch_size, self.config.bptt_length
    words, targets, mask = streams.streams(ids, num_streams, length, self.boundary_id)
    self.train_arrays = tuple(parallel.put(a, self.mesh, 'data') for a in (words, targets, mask))
    segments = streams.num_segments(len(ids), num_streams, length)
    self.tokens_per_segment = mask.reshape(num_streams, segments, length).sum(
        axis=(0, 2)).astype(int)
    return segments

  def initial_carry(self):
    """h_0 = 0 for every stream, split over 'data' like the streams."""
    return parallel.put(self.lm.model.initial_state(self.config.batch_size), self.mesh,
                        None, None, 'data')

  def start_epoch(self, state, epoch: int, start: int):
    """The state to continue with (reset to h_0 = 0 at an epoch's start) and the epoch's
    segments from `start` on, each ((index,), tokens in it)."""
    del epoch  # Every epoch reads the streams in the same order.
    if start == 0:
      state = state.replace(carry=self.initial_carry())
    return state, (((index,), int(self.tokens_per_segment[index]))
                   for index in range(start, self.steps_per_epoch))

  def step_data(self, batch) -> tuple:
    return (*self.train_arrays, *batch)

  def update(self, state, words, targets, mask, index, run_rng):
    """The update on segment `index` of the streams, from the state the last one ended in."""
    lm, config, length = self.lm, self.config, self.config.bptt_length
    words, targets, mask = (_segment(a, index, length) for a in (words, targets, mask))
    head_rng, dropout_rng = jax.random.split(jax.random.fold_in(run_rng, state.step))

    def apply_loss(variables, mutable=False):
      variables = {**variables, 'params': in_compute_dtype(variables['params'], config.dtype)}
      carry_in = state.carry.astype(COMPUTE_DTYPES[config.dtype])
      (losses, carry), mutated = lm.apply(variables, words, targets, carry_in, head_rng,
                                          rngs={'dropout': dropout_rng}, method=lm.loss,
                                          mutable=mutable or [])
      carry = carry.astype(state.carry.dtype)  # Carried in float32 under any --dtype.
      return (masked_mean(losses, mask), carry), mutated

    if optimizer.reads_rows(config):
      (loss, carry), grads, rows = sparse_rows.value_and_row_grads(
          apply_loss, state.params, optimizer.row_debts(config, state))
    else:
      (loss, carry), grads = jax.value_and_grad(
          lambda params: apply_loss(lm.variables_of(params))[0], has_aux=True)(state.params)
      rows = None
    state = optimizer.apply_gradients(config, state, grads, rows)
    return state.replace(carry=carry), loss

  def score(self, params, words, targets, index, carry):
    """The exact log p of segment `index`'s targets [1, T'], and the state after it."""
    length = min(self.config.eval_batch_size, words.shape[1])  # A short split: one segment.
    words, targets = _segment(words, index, length), _segment(targets, index, length)
    return self.lm.apply(self.lm.variables_of(params), words, targets, carry,
                         method=self.lm.log_prob)

  def scoring_pass(self, params, ids, num_tokens: int):
    """One stream from h_0 = 0, T' = --eval_batch_size words a segment (a shorter split in
    one segment of its length), the state carried across every segment:
    log p(w_t | w_0 … w_{t-1})."""
    length = batching.pass_batch_size(num_tokens, self.config.eval_batch_size, 8)
    words, targets, mask = streams.streams(ids, 1, length, self.boundary_id)
    segments = streams.num_segments(num_tokens, 1, length)
    if segments > 1:  # Padded to the scored length, which no segment reads: one shape.
      pad = [(0, 0), (0, batching.scored_length(words.shape[1]) - words.shape[1])]
      words, targets = np.pad(words, pad), np.pad(targets, pad)
    words, targets = parallel.put(words, self.mesh), parallel.put(targets, self.mesh)

    def pieces():
      carry = parallel.put(self.lm.model.initial_state(1), self.mesh)
      for index in range(segments):
        log_p, carry = self.log_prob_step(params, words, targets, index, carry)
        yield log_p, mask[:, index * length:(index + 1) * length]

    return pieces(), segments
