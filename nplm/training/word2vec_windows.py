"""word2vec's training data as the word2vec tool and gensim take it: subsampled streams and
dynamic windows (nplm.training.word2vec_feed drives them in the loop).

- Frequent-word subsampling (the word2vec tool's form of Mikolov et al. 2013b, section 2.3,
  whose Eq. 5 discards with probability 1 - √(t/f)): each epoch, a training token of word w
  is kept with probability min(1, (√(f/tN) + 1)·tN/f), f its training count, N the training
  tokens; the discarded are removed before windows are taken, so windows reach further.
- A dynamic window (Mikolov et al. 2013a, section 3.2): each position draws its radius b
  uniformly from 1 … c, so near words are context more often.
- Windows never cross the ends of a split: slots beyond them are ABSENT, not padding words.

The keep decisions are systematic sampling: the tokens in a random order, their keep
probabilities laid end to end on a line from one random offset, and a token kept where an
integer falls in its stretch. Each token is kept with exactly its probability (to 2^-32), as
by independent draws, but the number kept is the expected number rounded down or up, so
every epoch has the same number of updates (the loop's resumption, progress and the linear
schedule's T count them) and only its last batch can be short (rarely, empty: a zero
gradient, masked like any padding). The draws of epoch e come
from a numpy rng seeded by (--data_seed or --seed, e), with the epoch's shuffle: every
update is rebuilt from its number, and a resumed run is exact.
"""

import jax
import jax.numpy as jnp
import numpy as np

from nplm.errors import ConfigError
from nplm.models.word2vec import ABSENT

_ONE = 2 ** 32  # Keep probabilities in fixed point: exact integer sums over the stream.


def keep_probabilities(counts: np.ndarray, subsample: float) -> np.ndarray:
  """min(1, (√(f/tN) + 1)·tN/f) per word [|V|] (1 for a word never seen, or with t = 0),
  f its training count, N the training tokens, t = `subsample`."""
  counts = np.asarray(counts, np.float64)
  if subsample == 0:
    return np.ones_like(counts)
  threshold = subsample * counts.sum()
  ratio = counts / threshold
  with np.errstate(divide='ignore'):
    keep = (np.sqrt(ratio) + 1.0) / ratio
  return np.where(counts > 0, np.minimum(keep, 1.0), 1.0)


class Subsampler:
  """The tokens of a training split kept in each epoch."""

  def __init__(self, ids: np.ndarray, subsample: float):
    if len(ids) >= 2 ** 31:
      raise ConfigError(f'subsampling sums keep probabilities of at most 2^31 tokens; the '
                        f'training split has {len(ids):,}')
    self.ids = np.asarray(ids, np.int32)
    counts = np.bincount(self.ids)
    self.keep = keep_probabilities(counts, subsample)
    self.fixed_keep = np.round(self.keep * _ONE).astype(np.int64)
    self.subsampled = bool(np.any(self.fixed_keep < _ONE))
    # The number kept is ⌊(Σ p + u)⌋ for an offset u in [0, 1): at most ⌈Σ p⌉.
    self.max_kept = -(-int(self.fixed_keep[self.ids].sum()) // _ONE)

  def keep_mask(self, rng: np.random.Generator) -> np.ndarray:
    """Which tokens of the split are kept this epoch, [N] bool."""
    if not self.subsampled:
      return np.ones(len(self.ids), bool)
    order = rng.permutation(len(self.ids))
    stretches = self.fixed_keep[self.ids[order]]
    ends = np.cumsum(stretches) + rng.integers(_ONE)
    crossed = (ends // _ONE) > ((ends - stretches) // _ONE)  # An integer in (end - p, end].
    keep = np.empty(len(self.ids), bool)
    keep[order] = crossed
    return keep


def padded_stream(ids: np.ndarray, window: int, length: int) -> np.ndarray:
  """ABSENT × c, the ids, then ABSENT up to `length` + 2c in all: position t's word is at
  t + c, and a window never reads past the split's ends."""
  stream = np.full(length + 2 * window, ABSENT, np.int32)
  stream[window:window + len(ids)] = ids
  return stream


def window_radii(rng, batch: int, window: int) -> jnp.ndarray:
  """b per position, uniform in 1 … c (Mikolov et al. 2013a, section 3.2)."""
  return jax.random.randint(rng, (batch,), 1, window + 1)


def context_windows(stream, positions, radii, window: int):
  """The words at offsets -c … -1, 1 … c of each position [B, 2c], ABSENT beyond the
  position's radius or the split's ends; and the words at the positions [B]."""
  offsets = np.concatenate([np.arange(-window, 0), np.arange(1, window + 1)])
  centers = positions + window  # Into the padded stream.
  words = stream[centers[:, None] + offsets]
  in_radius = np.abs(offsets) <= radii[:, None]
  return jnp.where(in_radius, words, ABSENT), stream[centers]
