"""The checkpoint checksum's digest: numpy's sums (arrays on this process's CPU) and the
devices' (everything else) both equal the definition summed with Python integers, so a
checkpoint written by one is verified by the other."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from nplm.run_files import checksum

MOD = 2 ** 32


def python_digest(leaves) -> str:
  """checksum's docstring with Python integers: each leaf's 32-bit words w_i (narrower
  types widened), Σ w_i·a_i and Σ w_i·b_i modulo 2^32 over every leaf, a_i = 2·i·φ + 1,
  b_i = (i xor i >> 13)·m | 1."""
  low = high = 0
  for leaf in leaves:
    leaf = np.asarray(leaf)
    width = max(leaf.dtype.itemsize, 1)
    raw = leaf.astype(np.uint8).tobytes() if leaf.dtype == np.bool_ else leaf.tobytes()
    words = [int.from_bytes(raw[i:i + width], 'little') for i in range(0, len(raw), width)]
    for i, word in enumerate(words):
      low += word * ((2 * i * 0x9E3779B9 + 1) % MOD)
      high += word * ((((i ^ (i >> 13)) * 0x85EBCA6B) % MOD) | 1)
  return f'{low % MOD:08x}{high % MOD:08x}'


def devices_digest(leaves) -> str:
  low, high = np.asarray(checksum._summed_leaves(leaves))  # pylint: disable=protected-access
  return f'{int(low):08x}{int(high):08x}'


def leaves_of_every_width():
  rng = np.random.default_rng(0)
  return [rng.normal(size=(7, 5)).astype(np.float32), np.float32(-2.5),
          rng.integers(-2**31, 2**31 - 1, 11, dtype=np.int32),
          rng.integers(0, 2**32 - 1, 4, dtype=np.uint32),
          rng.normal(size=9).astype(ml_dtypes.bfloat16), rng.normal(size=3).astype(np.float16),
          rng.integers(-128, 127, 6, dtype=np.int8), rng.random(5) < 0.5,
          np.zeros((0, 3), np.float32)]


@pytest.mark.parametrize('on', ['numpy arrays', 'jax arrays'])
def test_the_host_and_device_sums_are_the_definition(on, monkeypatch):
  leaves = leaves_of_every_width()
  if on == 'jax arrays':
    leaves = [jnp.asarray(leaf) for leaf in leaves]
  monkeypatch.setattr(checksum, '_HOST_CHUNK', 4)  # Chunks end inside the leaves.
  assert all(map(checksum._summed_on_the_host, leaves))  # pylint: disable=protected-access
  want = python_digest(leaves)
  assert checksum.state_digest(leaves) == want
  assert devices_digest(leaves) == want


def test_leaves_numpy_would_widen_are_summed_on_the_devices():
  """A Python number, or a float64 numpy array, becomes 32 bits on the devices."""
  leaves = [np.arange(3, dtype=np.float32), 7, np.linspace(0, 1, 4)]
  assert checksum.state_digest(leaves) == devices_digest(leaves)
  assert checksum.state_digest(leaves) == python_digest(
      [leaves[0], np.int32(7), leaves[2].astype(np.float32)])


def test_a_sharded_state_has_the_digest_of_its_whole_arrays():
  devices = np.array(jax.devices())
  mesh = jax.sharding.Mesh(devices, ('data',))
  rows = jax.device_put(np.arange(8 * len(devices), dtype=np.float32).reshape(-1, 2),
                        jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec('data')))
  assert checksum.state_digest([rows]) == python_digest([np.asarray(rows)])


def test_one_flipped_bit_changes_both_sums():
  leaf = np.ones(64, np.float32)
  flipped = leaf.copy()
  flipped.view(np.uint32)[37] ^= 1 << 9
  before, after = checksum.state_digest([leaf]), checksum.state_digest([flipped])
  assert before[:8] != after[:8] and before[8:] != after[8:]
