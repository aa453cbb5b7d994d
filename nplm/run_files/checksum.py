"""A checksum of a checkpoint's contents: its train state's arrays and its progress record.

Checkpoints are verified on restore against the checksum saved with them, so a flipped byte
or a truncated file is caught rather than trained on or reported. Orbax keeps no checksum of
its own, and a hash of its files would depend on the layout it writes, so the checksum is
taken of the arrays themselves, on the devices that hold them: every 32-bit word w_i of a
leaf (i its flat row-major index) enters two position-weighted sums modulo 2^32,
Σ w_i · a_i and Σ w_i · b_i with odd weights a_i, b_i, so any single flipped bit changes both.
Integer sums are exact in any order, so the checksum does not depend on how the state is
sharded; zero words add nothing, so the zero output rows that vocabulary-parallel runs pad
with (nplm.parallel) do not change it either, and a run resumed on another mesh verifies.
"""

import hashlib
import json

import jax
import jax.numpy as jnp
import numpy as np

from nplm import parallel

_GOLDEN = np.uint32(0x9E3779B9)  # Knuth's multiplicative-hash constants: they mix the bits.
_MIX = np.uint32(0x85EBCA6B)


_HOST_CHUNK = 1 << 22  # Words a host sum multiplies at a time: its temporaries stay small.


def _words(leaf: jax.Array) -> jax.Array:
  """The leaf's bits as uint32 words (narrower types widened, wider ones split)."""
  if leaf.dtype == jnp.bool_ or leaf.dtype.itemsize == 1:
    return leaf.astype(jnp.uint8).astype(jnp.uint32).reshape(-1)
  if leaf.dtype.itemsize == 2:
    return jax.lax.bitcast_convert_type(leaf, jnp.uint16).astype(jnp.uint32).reshape(-1)
  return jax.lax.bitcast_convert_type(leaf, jnp.uint32).reshape(-1)


def _position_weights(index):
  """The odd weights (a_i, b_i) of the words at flat positions `index` (uint32, numpy or
  jax: the same wrapping arithmetic)."""
  return (index * _GOLDEN * np.uint32(2) + np.uint32(1),
          (index ^ (index >> 13)) * _MIX | np.uint32(1))


def _leaf_sums(leaf: jax.Array) -> jax.Array:
  words = _words(leaf)
  first, second = _position_weights(jnp.arange(words.size, dtype=jnp.uint32))
  return jnp.stack([jnp.sum(words * first, dtype=jnp.uint32),
                    jnp.sum(words * second, dtype=jnp.uint32)])


@jax.jit
def _summed_leaves(leaves: list) -> jax.Array:
  """Both sums of every leaf, added modulo 2^32 (uint32 addition wraps): one program per
  state's shapes, where a program per leaf cost a compile each (most of a small run's
  checkpoint time)."""
  return sum((_leaf_sums(leaf) for leaf in leaves), jnp.zeros(2, jnp.uint32))


def _summed_on_the_host(leaf) -> bool:
  """Whether numpy sums the leaf to the same words as _summed_leaves: an array of this
  process on CPU devices (or numpy's), of at most 32 bits (a Python number, or a 64-bit
  numpy array, would be another width on the devices)."""
  return (isinstance(getattr(leaf, 'dtype', None), np.dtype) and leaf.dtype.itemsize <= 4
          and parallel.read_on_this_host(leaf))


def _host_sums(leaf) -> np.ndarray:
  """_leaf_sums in numpy, a chunk of words at a time: on a CPU, compiling _summed_leaves
  for a state's shapes took longer (1.1 s for an LSTM's) than summing it (15 ms), and every
  command that reads a model paid it."""
  leaf = np.asarray(leaf)
  if leaf.dtype == np.bool_ or leaf.dtype.itemsize == 1:
    words = leaf.astype(np.uint8).reshape(-1)
  else:
    words = leaf.reshape(-1).view(np.uint16 if leaf.dtype.itemsize == 2 else np.uint32)
  sums = np.zeros(2, np.uint32)
  for start in range(0, words.size, _HOST_CHUNK):
    chunk = words[start:start + _HOST_CHUNK].astype(np.uint32)
    index = np.arange(start, start + chunk.size, dtype=np.uint32)
    sums += np.array([np.sum(chunk * weights, dtype=np.uint32)
                      for weights in _position_weights(index)], np.uint32)
  return sums


def state_digest(tree) -> str:
  """16 hex digits from every array of `tree`; the same however the tree is laid out or
  nested (a state restored without a template has other containers), so leaves are summed.
  Summed by numpy where every leaf is on this process's CPU, else on the devices."""
  leaves = jax.tree.leaves(tree)
  if jax.process_count() == 1 and all(map(_summed_on_the_host, leaves)):
    low, high = sum(map(_host_sums, leaves), np.zeros(2, np.uint32))
  else:
    low, high = parallel.fetch(_summed_leaves(leaves))
  return f'{int(low):08x}{int(high):08x}'


def checkpoint_checksum(state, progress: dict) -> str:
  """SHA-256 of the progress record (as canonical JSON) and of the state's digest."""
  record = json.dumps(progress, sort_keys=True, separators=(',', ':'))
  return hashlib.sha256(f'{record}\n{state_digest(state)}'.encode()).hexdigest()
