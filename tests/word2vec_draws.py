"""The draws of word2vec's compiled update (nplm/training/word2vec_update.cc), made again in
numpy: what the tests of the update compare it with, from the same key."""

import jax
import jax.numpy as jnp
import numpy as np


def splitmix64(z: np.ndarray) -> np.ndarray:
  """SplitMix64's output function (Steele, Lea & Flood 2014), on uint64 arrays."""
  z = z + np.uint64(0x9E3779B97F4A7C15)
  z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
  z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
  return z ^ (z >> np.uint64(31))


def compiled_draws(proposal, rng, examples: int, k: int) -> np.ndarray:
  """The C++ update's k draws for examples 0 … examples - 1, in numpy: the 64-bit number
  of draw d of example n is SplitMix64(seed ^ SplitMix64(n·k + d)), the seed two 32-bit
  words of the key; its high half picks a word by multiply-shift, its low half keeps it
  below the word's threshold, else takes its alias. -> [examples, k]."""
  high, low = np.asarray(jax.random.bits(rng, (2,), jnp.uint32)).astype(np.uint64)
  seed = (high << np.uint64(32)) | low
  place = (np.arange(examples, dtype=np.uint64)[:, None] * np.uint64(k)
           + np.arange(k, dtype=np.uint64))
  x = splitmix64(seed ^ splitmix64(place))
  threshold, alias = proposal.alias_table
  word = ((x >> np.uint64(32)) * np.uint64(len(alias))) >> np.uint64(32)
  kept = (x & np.uint64(0xFFFFFFFF)) < threshold[word].astype(np.uint64)
  return np.where(kept, word, alias[word]).astype(np.int32)
