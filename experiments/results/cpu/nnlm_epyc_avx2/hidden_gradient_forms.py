# The hidden vectors' gradient [B, |V|]·[|V|, D] in six forms, alone (jit, median of 7 blocks of 10).
from nplm import host_memory; host_memory.keep_freed_blocks()
import time, jax, jax.numpy as jnp, numpy as np
r = np.random.default_rng(0)
bar = jax.lax.optimization_barrier
for D in (100, 290):
  B, V = 256, 14039
  g = jnp.asarray(r.normal(size=(B, V)).astype(np.float32)); W = jnp.asarray(r.normal(size=(V, D)).astype(np.float32))
  Wt = W.T.copy()
  fl = 2 * B * V * D
  h2 = V // 2
  cases = {
    'a g@Wt.T': (lambda g, Wt: g @ Wt.T, (g, Wt)),
    'b (Wt@g.T).T': (lambda g, Wt: bar(Wt @ g.T).T, (g, Wt)),
    'c g@W': (lambda g, W: g @ W, (g, W)),
    'd halves': (lambda g, Wt: g[:, :h2] @ Wt[:, :h2].T + g[:, h2:] @ Wt[:, h2:].T, (g, Wt)),
    'e dot_general': (lambda g, Wt: jax.lax.dot_general(g, Wt, (((1,), (1,)), ((), ()))), (g, Wt)),
    'f (W.T@g.T).T from W': (lambda g, W: bar(jax.lax.dot_general(W, g, (((0,), (1,)), ((), ())))).T, (g, W)),
  }
  for name, (f, a) in cases.items():
    j = jax.jit(f); jax.block_until_ready(j(*a)); ts = []
    for _ in range(7):
      t = time.perf_counter(); [jax.block_until_ready(j(*a)) for _ in range(10)]; ts.append((time.perf_counter() - t) / 10)
    m = sorted(ts)[3]; print(D, name, '%.2f ms %.1f GFLOP/s' % (m * 1e3, fl / m / 1e9), flush=True)
