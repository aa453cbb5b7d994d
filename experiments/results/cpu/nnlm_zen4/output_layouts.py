# The output layer's three matmuls with the rows stored as [D, |V|] (a Dense kernel) against [|V|, D].
from nplm import host_memory; host_memory.keep_freed_blocks()
import time, jax, jax.numpy as jnp, numpy as np
r = np.random.default_rng(0)
for D in (100, 290):
  B, V = 256, 14039
  h = jnp.asarray(r.normal(size=(B, D)).astype(np.float32)); g = jnp.asarray(r.normal(size=(B, V)).astype(np.float32))
  W = jnp.asarray(r.normal(size=(V, D)).astype(np.float32)); K = jnp.asarray(np.asarray(W).T.copy())
  fl = 2 * B * V * D
  cases = {'[V,D] fwd h@W.T': (lambda h, W: h @ W.T, (h, W)), '[D,V] fwd h@K': (lambda h, K: h @ K, (h, K)),
           '[V,D] wgrad g.T@h': (lambda g, h: g.T @ h, (g, h)), '[D,V] wgrad h.T@g': (lambda g, h: h.T @ g, (g, h)),
           '[V,D] hgrad g@W': (lambda g, W: g @ W, (g, W)), '[D,V] hgrad g@K.T': (lambda g, K: g @ K.T, (g, K))}
  for name, (f, a) in cases.items():
    j = jax.jit(f); jax.block_until_ready(j(*a)); ts = []
    for _ in range(7):
      t = time.perf_counter(); [jax.block_until_ready(j(*a)) for _ in range(10)]; ts.append((time.perf_counter() - t) / 10)
    m = sorted(ts)[3]; print(D, name, '%.2f ms %.1f GFLOP/s' % (m * 1e3, fl / m / 1e9))
