"""The same model, loss and optimizer written plainly in PyTorch: the benchmark's baseline.

Written the way one would without speed tricks (dense nn.Embedding gradients, nn.Linear,
F.cross_entropy, torch.optim.AdamW), so the JAX/PyTorch ratio compares like with like: as
with optax.adamw, every step updates the whole feature matrix C and the whole output layer.
Initialization differs from Flax's; it does not change what a step costs.

Optional: `pip install torch==2.13.0` (a CPU wheel). Importing this module without PyTorch
raises ImportError, which the benchmark reports as a skipped comparison.
"""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from experiments.benchmarks import harness

# The GPU if there is one (the JAX side then runs on it too), else the CPU.
DEVICE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')


class TorchNNLM(nn.Module):
  """Logits y = b + [W U] · concat(x, tanh(d + H x)) (or tanh(d + H x) alone, or x alone)."""

  def __init__(self, vocab_size: int, order: int, feature_size: int, hidden_size: int,
               direct: bool):
    super().__init__()
    features = (order - 1) * feature_size
    self.direct = direct
    self.C = nn.Embedding(vocab_size, feature_size)
    self.H = nn.Linear(features, hidden_size) if hidden_size else None
    self.output = nn.Linear(hidden_size + (features if direct else 0), vocab_size)

  def forward(self, context: torch.Tensor) -> torch.Tensor:
    x = self.C(context).flatten(1)  # x = (C(w_{t-1}), …, C(w_{t-n+1}))
    if self.H is None:
      return self.output(x)
    tanh_hidden = torch.tanh(self.H(x))
    return self.output(torch.cat([x, tanh_hidden], -1) if self.direct else tanh_hidden)


def make_optimizer(model: nn.Module, config) -> torch.optim.Optimizer:
  """AdamW as nplm's: same lr and decoupled decay on weights and C, none on biases.

  nplm's lr_decay schedule is left out: with the flagfiles' lr_decay=0 it is a constant.
  """
  decayed = [p for name, p in model.named_parameters() if not name.endswith('bias')]
  biases = [p for name, p in model.named_parameters() if name.endswith('bias')]
  return torch.optim.AdamW([{'params': decayed, 'weight_decay': config.weight_decay},
                            {'params': biases, 'weight_decay': 0.0}],
                           lr=config.learning_rate, betas=(0.9, 0.999), eps=1e-8)


def make_runner(config, vocab_size: int, padded_split: np.ndarray, seed: int = 0,
                compile_backend: str = ''):
  """run_steps(batches) -> last loss: one update per (positions, mask), as nplm's train_step.

  Windows are gathered from the padded split inside the step, as nplm's step does. With
  `compile_backend` the model's forward runs as torch.compile(model, backend=...) ('inductor':
  torch.compile's own default), compiled at its first step; the loss and AdamW stay eager.
  """
  torch.manual_seed(seed)
  model = TorchNNLM(vocab_size, config.order, config.feature_size, config.hidden_size,
                    config.direct).to(DEVICE)
  optimizer = make_optimizer(model, config)
  forward = torch.compile(model, backend=compile_backend) if compile_backend else model
  padded = torch.from_numpy(np.asarray(padded_split, np.int64)).to(DEVICE)
  # w_{t-1} first, as Eq. 1's x
  context_offsets = torch.arange(config.order - 2, -1, -1, device=DEVICE)

  def train_step(positions: np.ndarray, mask: np.ndarray) -> torch.Tensor:
    positions = torch.from_numpy(positions).long().to(DEVICE)
    mask = torch.from_numpy(mask).to(DEVICE)
    context = padded[positions[:, None] + context_offsets]
    targets = padded[positions + config.order - 1]
    losses = F.cross_entropy(forward(context), targets, reduction='none')
    loss = (losses * mask).sum() / mask.sum().clamp(min=1.0)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss

  def run_steps(batches) -> float:
    loss = None
    for positions, mask in batches:
      loss = train_step(positions, mask)
    return loss.item()  # Waits for the GPU, if any: the steps are done.

  return run_steps


def matmul_gflops(rows: int, inner: int, cols: int, repeats: int,
                  dtype=torch.float32) -> float:
  """Median GFLOP/s of a [rows, inner]·[inner, cols] torch.matmul on DEVICE (float32 unless
  `dtype`): what the peer's own matmul library reaches here (harness.matmul_gflops is XLA's),
  so that a ratio is read beside the two libraries' kernels (MKL ran 2048² 18-37% faster
  than XLA on a 2-core Intel Xeon: experiments/results/cpu/nnlm_xeon/)."""
  generator = torch.Generator(device=DEVICE).manual_seed(0)
  a, b = (torch.randn(shape, generator=generator, device=DEVICE, dtype=dtype)
          for shape in ((rows, inner), (inner, cols)))

  def product() -> None:
    torch.matmul(a, b)
    if DEVICE.type == 'cuda':
      torch.cuda.synchronize()

  product()
  product()  # Warms (allocations, caches) untimed, as harness.matmul_flops_per_second.
  seconds, _ = harness.timed_runs(product, max(repeats, 10))
  return 2 * rows * inner * cols / float(np.median(seconds)) / 1e9
