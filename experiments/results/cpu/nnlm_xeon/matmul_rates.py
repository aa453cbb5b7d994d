"""XLA's and PyTorch's [2048, 2048]·[2048, 2048] products on this machine, float32 and
bfloat16, each the median of 10 timed calls after two untimed ones: what each library's
kernels reach here (MKL's float32 and, on a CPU with AMX, oneDNN's bfloat16 against XLA's).

  PYTHONPATH=. python experiments/results/cpu/nnlm_xeon/matmul_rates.py
"""

import jax
import jax.numpy as jnp
import numpy as np
import torch

from experiments.benchmarks import harness

SIZE = 2048


def median_gflops(product) -> float:
  product()
  product()
  seconds, _ = harness.timed_runs(product, 10)
  return 2 * SIZE ** 3 / float(np.median(seconds)) / 1e9


def main() -> None:
  print(harness.machine_line(harness.machine_info()))
  print(f'PyTorch {torch.__version__}, torch.set_num_threads({harness.use_all_cores()})')
  for name, jax_type, torch_type in (('float32', jnp.float32, torch.float32),
                                     ('bfloat16', jnp.bfloat16, torch.bfloat16)):
    a, b = (jnp.asarray(np.random.default_rng(seed).standard_normal((SIZE, SIZE)), jax_type)
            for seed in (0, 1))
    dot = jax.jit(jnp.dot)
    xla = median_gflops(lambda: jax.block_until_ready(dot(a, b)))
    c, d = (torch.tensor(np.asarray(x, np.float32)).to(torch_type) for x in (a, b))
    peer = median_gflops(lambda: torch.matmul(c, d))
    print(f'{name}: XLA {xla:,.0f} GFLOP/s, PyTorch {peer:,.0f} GFLOP/s, '
          f'PyTorch / XLA {peer / xla:.2f}')


if __name__ == '__main__':
  main()
