# XLA's exp, exp2, tanh and row reductions on [256, 14039] against torch's exp and log_softmax (2 threads).
from nplm import host_memory; host_memory.keep_freed_blocks()
import time, jax, jax.numpy as jnp, numpy as np, torch
torch.set_num_threads(2)
x = np.random.default_rng(0).normal(size=(256, 14039)).astype(np.float32) - 5
s = jnp.asarray(x); t = torch.from_numpy(x)
def tm(fn, *a):
  fn(*a); ts=[]
  for _ in range(5):
    t0=time.perf_counter(); [fn(*a) for _ in range(20)]; ts.append((time.perf_counter()-t0)/20*1e3)
  return sorted(ts)[2]
for name, f in [('exp', jnp.exp), ('exp2', jnp.exp2), ('tanh', jnp.tanh), ('sum exp', lambda s: jnp.sum(jnp.exp(s), axis=1)), ('sum', lambda s: jnp.sum(s, axis=1)), ('max', lambda s: jnp.max(s, axis=1))]:
  j = jax.jit(f); print('jax', name, tm(lambda s: jax.block_until_ready(j(s)), s))
print('torch exp', tm(torch.exp, t)); print('torch sum exp', tm(lambda t: torch.exp(t).sum(1), t))
print('torch logsumexp', tm(lambda t: torch.logsumexp(t, 1), t))
print('torch log_softmax', tm(lambda t: torch.log_softmax(t, 1), t))
