"""The full softmax's chunked normalizer (nplm.heads.output_layer.chunked_log_partition)
differentiated as it is, against its loop body under jax.checkpoint: XLA's temporaries
(memory_analysis) and the loss-and-gradients call's time (median of 5, alternated).

  PYTHONPATH=. python experiments/results/cpu/chunked_partition/remat.py
"""
import time
import numpy as np, jax, jax.numpy as jnp
from nplm.heads import output_layer as ol
from nplm import host_memory
host_memory.keep_freed_blocks()

def variant(remat):
  def partition(hidden, embedding, bias, units, chunk):
    batch = hidden.shape[0]
    def add_chunk(index, carry):
      peak, total = carry
      first = index * chunk
      start = jnp.minimum(first, units - chunk)
      rows = jax.lax.dynamic_slice_in_dim(embedding, start, chunk)
      scores = ol._float32(ol.every_score(hidden, rows) + jax.lax.dynamic_slice_in_dim(bias, start, chunk))
      scores = jnp.where(start + jnp.arange(chunk) >= first, scores, -jnp.inf)
      raised = jnp.maximum(peak, jax.lax.stop_gradient(jnp.max(scores, axis=1)))
      total = total * jnp.exp(peak - raised) + jnp.sum(jnp.exp(scores - raised[:, None]), axis=1)
      return raised, total
    body = jax.checkpoint(add_chunk) if remat else add_chunk
    empty = (jnp.full(batch, -jnp.inf, jnp.float32), jnp.zeros(batch, jnp.float32))
    peak, total = jax.lax.fori_loop(0, -(-units // chunk), body, empty)
    return peak + jnp.log(total)
  return partition

for batch, units, dim in [(256, 300_000, 100), (8192, 14039, 100), (2048, 50_000, 128)]:
  chunk = ol.chunk_rows(batch, units)
  rng = np.random.default_rng(0)
  h = jnp.asarray(rng.normal(size=(batch, dim)), jnp.float32)
  e = jnp.asarray(rng.normal(size=(units, dim)) * 0.1, jnp.float32)
  b = jnp.zeros(units, jnp.float32)
  results = {}
  fns = {}
  for remat in (False, True):
    f = variant(remat)
    loss = lambda h, e, b: jnp.mean(f(h, e, b, units, chunk))
    g = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
    compiled = g.lower(h, e, b).compile()
    mem = compiled.memory_analysis()
    out = g(h, e, b); jax.block_until_ready(out)
    results[remat] = out
    fns[remat] = (g, mem.temp_size_in_bytes)
  d = max(float(jnp.max(jnp.abs(x - y))) for x, y in zip(jax.tree.leaves(results[False]), jax.tree.leaves(results[True])))
  times = {False: [], True: []}
  for rep in range(5):
    for remat in (False, True):
      g = fns[remat][0]
      t = time.perf_counter(); jax.block_until_ready(g(h, e, b)); times[remat].append(time.perf_counter() - t)
  print(f'B={batch} |V|={units} D={dim} chunk={chunk}: temp MiB {fns[False][1]/2**20:.0f} -> {fns[True][1]/2**20:.0f}; '
        f'median ms {1e3*np.median(times[False]):.1f} -> {1e3*np.median(times[True]):.1f}; max diff {d:.2e}', flush=True)
