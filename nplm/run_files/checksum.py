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


def _words(leaf: jax.Array) -> jax.Array:
  """The leaf's bits as uint32 words (narrower types widened, wider ones split)."""
  if leaf.dtype == jnp.bool_ or leaf.dtype.itemsize == 1:
    return leaf.astype(jnp.uint8).astype(jnp.uint32).reshape(-1)
  if leaf.dtype.itemsize == 2:
    return jax.lax.bitcast_convert_type(leaf, jnp.uint16).astype(jnp.uint32).reshape(-1)
  return jax.lax.bitcast_convert_type(leaf, jnp.uint32).reshape(-1)


def _leaf_sums(leaf: jax.Array) -> jax.Array:
  words = _words(leaf)
  index = jnp.arange(words.size, dtype=jnp.uint32)
  first = index * _GOLDEN * np.uint32(2) + np.uint32(1)
  second = (index ^ (index >> 13)) * _MIX | np.uint32(1)
  return jnp.stack([jnp.sum(words * first, dtype=jnp.uint32),
                    jnp.sum(words * second, dtype=jnp.uint32)])


@jax.jit
def _summed_leaves(leaves: list) -> jax.Array:
  """Both sums of every leaf, added modulo 2^32 (uint32 addition wraps): one program per
  state's shapes, where a program per leaf cost a compile each (most of a small run's
  checkpoint time)."""
  return sum((_leaf_sums(leaf) for leaf in leaves), jnp.zeros(2, jnp.uint32))


def state_digest(tree) -> str:
  """16 hex digits from every array of `tree`; the same however the tree is laid out or
  nested (a state restored without a template has other containers), so leaves are summed."""
  low, high = parallel.fetch(_summed_leaves(jax.tree.leaves(tree)))
  return f'{int(low):08x}{int(high):08x}'


def checkpoint_checksum(state, progress: dict) -> str:
  """SHA-256 of the progress record (as canonical JSON) and of the state's digest."""
  record = json.dumps(progress, sort_keys=True, separators=(',', ':'))
  return hashlib.sha256(f'{record}\n{state_digest(state)}'.encode()).hexdigest()
