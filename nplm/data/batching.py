"""Batches of n-gram windows for feed-forward models, as positions into a padded split.

A split of N tokens is kept on the device once, left-padded with n-1 copies of the
text-boundary token: the first n-1 tokens of every split are predicted as if a text had
just ended, so each split is scored on its own and every one of its N tokens counts. A batch
is then only B positions; the step gathers the windows itself, so the host sends B integers
per update instead of B·n.

A model that trains on whole windows (the Transformer: a loss at each of its n-1 positions)
reads every (n-1)-th position only, `stride` n-1: non-overlapping windows, the last ending
at the split's last token, so each training token is a target once per epoch.
"""

import numpy as np


# A scored split's device copy is padded at its end, with boundary tokens that no position
# reads, to a power of two, or above 2^20 tokens to a multiple of 2^20 (4 MiB of int32): splits
# of like sizes are then one shape and share one compiled scoring program. Brown's valid and
# test (200,000 and 177,359 tokens) share one, its train another. Each program of its own is
# a compile, 0.6 s for the NNLM's on an H200 (experiments/results/h200/), every split paying
# it. The power of two below keeps a sentence's stream small (nplm.use.sentences).
SCORED_LENGTH_MULTIPLE = 1 << 20


def scored_length(length: int) -> int:
  """`length` rounded up to a power of two, or above SCORED_LENGTH_MULTIPLE to a multiple of
  it."""
  if length <= SCORED_LENGTH_MULTIPLE:
    return 1 << max(0, length - 1).bit_length()
  return -(-length // SCORED_LENGTH_MULTIPLE) * SCORED_LENGTH_MULTIPLE


def pad_split(ids: np.ndarray, order: int, boundary_id: int, length: int | None = None):
  """The split's ids after n-1 boundary tokens: position t's window is padded[t : t+n]; with
  `length`, boundary tokens after them up to that length. Written into one new array: a
  corpus-sized int32 copy, no temporary beside it."""
  end = len(ids) + order - 1
  padded = np.empty(max(end, length or 0), np.int32)
  padded[:order - 1] = boundary_id
  padded[order - 1:end] = ids
  padded[end:] = boundary_id
  return padded


def windows(padded: np.ndarray, positions: np.ndarray, order: int):
  """Context [B, n-1] (w_{t-1} first, as Eq. 1's x) and target [B] for each position t.

  Works on numpy and jax arrays alike, so the jitted steps and the tests share it.
  """
  context_offsets = np.arange(order - 2, -1, -1)  # n-2 … 0: w_{t-1}, …, w_{t-n+1}
  return padded[positions[:, None] + context_offsets], padded[positions + order - 1]


def num_batches(num_examples: int, batch_size: int) -> int:
  return -(-num_examples // batch_size)


def _padded_batch(indices: np.ndarray, batch_size: int):
  """Pads a short last batch to full size (no recompilation) with a mask of the real rows."""
  mask = np.zeros(batch_size, np.float32)
  mask[:len(indices)] = 1.0
  positions = np.zeros(batch_size, np.int32)
  positions[:len(indices)] = indices
  return positions, mask


def strided_count(num_tokens: int, stride: int = 1) -> int:
  """How many positions `strided_positions` holds, computed without them."""
  return -(-(num_tokens - (num_tokens - 1) % stride) // stride)


def strided_positions(num_tokens: int, stride: int = 1) -> np.ndarray:
  """The positions every `stride`-th, counted back from the last token: windows of `stride`
  targets ending there tile the split, the first reaching into the left padding."""
  return np.arange((num_tokens - 1) % stride, num_tokens, stride)


def train_batches(num_examples: int, batch_size: int, seed: int, epoch: int, start: int = 0,
                  stride: int = 1):
  """The batches of `epoch` from batch `start` on: slices of a shuffle derived from (seed, epoch)
  of the positions `strided_positions(num_examples, stride)` (every position at stride 1).

  Any update of any epoch can be rebuilt from its number alone, which makes resumption exact.
  The shuffle is one int32 array of the epoch's example indices, shuffled in place: 4 bytes
  per training token, the only corpus-sized array besides the ids (`rng.permutation(n)`
  would hold the same permutation in int64, and indexing the positions with it a second
  such array: 16 bytes per token, 1.6 GB for 100M tokens).
  """
  order = np.arange(strided_count(num_examples, stride), dtype=np.int32)
  np.random.default_rng([seed, epoch]).shuffle(order)  # The permutation rng.permutation gives.
  first = (num_examples - 1) % stride
  for index in range(start, num_batches(len(order), batch_size)):
    examples = order[index * batch_size:(index + 1) * batch_size]
    yield _padded_batch(first + stride * examples, batch_size)


def pass_batch_size(num_examples: int, batch_size: int, multiple: int) -> int:
  """A scoring pass's batch: --eval_batch_size, or a split shorter than that in one batch of
  its size rounded up to `multiple` (a 120-token split is not padded to 2,048), its program
  its own; longer splits share one (scored_length)."""
  return min(batch_size, -(-max(num_examples, 1) // multiple) * multiple)


def eval_batches(num_examples: int, batch_size: int):
  """Every position once, in order, the last batch padded and masked."""
  for start in range(0, num_examples, batch_size):
    yield _padded_batch(np.arange(start, min(start + batch_size, num_examples)), batch_size)
