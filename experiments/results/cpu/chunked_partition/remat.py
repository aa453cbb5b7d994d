"""The full softmax's chunked normalizer (nplm.heads.output_layer.chunked_log_partition)
differentiated as it is, against its loop body under jax.checkpoint: XLA's temporaries
(memory_analysis) and the loss-and-gradients call's time (median of 5, alternated).

  PYTHONPATH=. python experiments/results/cpu/chunked_partition/remat.py
"""
import time

import jax
import jax.numpy as jnp
import numpy as np

from nplm import host_memory
from nplm.heads import output_layer as ol

host_memory.keep_freed_blocks()
KEPT = jax.lax.fori_loop


def recomputed(lower, upper, body, init):
  """fori_loop with its body under jax.checkpoint: each chunk recomputed in the backward."""
  return KEPT(lower, upper, jax.checkpoint(body), init)


def loss_and_grads(remat: bool, units: int, chunk: int):
  """The jitted mean log Z and its gradients, the library's loop kept or recomputed (the
  loop is looked up as the function is traced)."""
  def loss(h, e, b):
    jax.lax.fori_loop = recomputed if remat else KEPT
    try:
      return jnp.mean(ol.chunked_log_partition(h, e, b, units, chunk))
    finally:
      jax.lax.fori_loop = KEPT
  return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))


for batch, units, dim in [(256, 300_000, 100), (8192, 14039, 100), (2048, 50_000, 128)]:
  chunk = ol.chunk_rows(batch, units)
  rng = np.random.default_rng(0)
  h = jnp.asarray(rng.normal(size=(batch, dim)), jnp.float32)
  e = jnp.asarray(rng.normal(size=(units, dim)) * 0.1, jnp.float32)
  b = jnp.zeros(units, jnp.float32)
  results, fns = {}, {}
  for remat in (False, True):
    g = loss_and_grads(remat, units, chunk)
    temp = g.lower(h, e, b).compile().memory_analysis().temp_size_in_bytes
    results[remat] = jax.block_until_ready(g(h, e, b))
    fns[remat] = (g, temp)
  d = max(float(jnp.max(jnp.abs(x - y)))
          for x, y in zip(jax.tree.leaves(results[False]), jax.tree.leaves(results[True])))
  times = {False: [], True: []}
  for rep in range(5):
    for remat in (False, True):
      g = fns[remat][0]
      t = time.perf_counter()
      jax.block_until_ready(g(h, e, b))
      times[remat].append(time.perf_counter() - t)
  print(f'B={batch} |V|={units} D={dim} chunk={chunk}: temp MiB {fns[False][1]/2**20:.0f} -> '
        f'{fns[True][1]/2**20:.0f}; median ms {1e3*np.median(times[False]):.1f} -> '
        f'{1e3*np.median(times[True]):.1f}; max diff {d:.2e}', flush=True)
