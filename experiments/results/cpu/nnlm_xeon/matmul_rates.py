"""XLA's and PyTorch's [2048, 2048]·[2048, 2048] products on this machine, float32 and
bfloat16, each the median of 10 timed calls after two untimed ones (the NNLM benchmark's own
timers, harness.matmul_gflops and torch_nnlm.matmul_gflops): what each library's kernels
reach here (MKL's float32 and, on a CPU with AMX, oneDNN's bfloat16 against XLA's).

  PYTHONPATH=. python experiments/results/cpu/nnlm_xeon/matmul_rates.py
"""

import jax.numpy as jnp
import torch

from experiments.benchmarks import harness, torch_nnlm

SIZE = 2048


def main() -> None:
  print(harness.machine_line(harness.machine_info()))
  print(f'PyTorch {torch.__version__}, torch.set_num_threads({harness.use_all_cores()})')
  for name, jax_type, torch_type in (('float32', jnp.float32, torch.float32),
                                     ('bfloat16', jnp.bfloat16, torch.bfloat16)):
    xla = harness.matmul_gflops(SIZE, SIZE, SIZE, 10, jax_type)
    peer = torch_nnlm.matmul_gflops(SIZE, SIZE, SIZE, 10, torch_type)
    print(f'{name}: XLA {xla:,.0f} GFLOP/s, PyTorch {peer:,.0f} GFLOP/s, '
          f'PyTorch / XLA {peer / xla:.2f}')


if __name__ == '__main__':
  main()
