"""Exact figures compute their matmuls in float32 on every backend.

JAX's default precision for float32 matmuls is the backend's: float32 on a CPU, TF32 (10
mantissa bits) on NVIDIA GPUs from Ampere on, bfloat16 passes on TPUs. Training may take
that speed, but an exact perplexity, log-prob or next-word distribution must be the model's
own, the same on any device: `exact` traces a function with every matmul in it at
Precision.HIGHEST.
"""

import functools

import jax


def exact(function):
  """`function` with every matmul it traces at float32 precision (Precision.HIGHEST)."""
  @functools.wraps(function)
  def in_float32(*args, **kwargs):
    with jax.default_matmul_precision('float32'):
      return function(*args, **kwargs)
  return in_float32
