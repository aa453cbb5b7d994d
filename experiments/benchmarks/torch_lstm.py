"""nplm's recurrent LSTM language model written plainly in PyTorch: the RNN benchmark's baseline.

Written the way one would without speed tricks (nn.Embedding, nn.LSTM, nn.Linear with its
weight tied to the embedding, F.cross_entropy, the recipe's torch.optim.AdamW or SGD,
clip_grad_norm_), and trained as nplm trains it: B contiguous streams, one T-word segment
per update, the state carried from segment to segment and detached between them (truncated
BPTT). Dropout sits where nplm's does (embeddings, between layers, last layer's output).

Two differences leave the cost of a step as it is: initialization is PyTorch's (as in its
word_language_model example; nplm has orthogonal recurrent weights and a forget bias of 1),
and nn.LSTM adds two bias vectors (bias_ih + bias_hh) where nplm has one. Gates are
[i, f, g, o] here, [f, i, o, c̃] in nplm.

Optional: `pip install torch==2.13.0` (a CPU wheel). Importing this module without PyTorch
raises ImportError, which the benchmark reports as a skipped comparison.
"""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# The GPU if there is one (cuDNN's LSTM; the JAX side then runs on it too), else the CPU.
DEVICE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')


__all__ = ['OPTIMIZERS', 'TorchLSTMLM', 'make_optimizer', 'make_runner']


class TorchLSTMLM(nn.Module):
  """words [B, T] and (h, c), each [layers, B, H] -> logits [B, T, |V|] and (h, c) after."""

  def __init__(self, vocab_size: int, feature_size: int, hidden_size: int, num_layers: int,
               dropout: float, tie_embeddings: bool):
    super().__init__()
    self.embedding = nn.Embedding(vocab_size, feature_size)
    self.drop = nn.Dropout(dropout)
    # nn.LSTM's own dropout acts between layers, not after the last: self.drop does that.
    self.lstm = nn.LSTM(feature_size, hidden_size, num_layers, batch_first=True,
                        dropout=dropout if num_layers > 1 else 0.0)
    self.output = nn.Linear(hidden_size, vocab_size)
    if tie_embeddings:
      self.output.weight = self.embedding.weight
    # As PyTorch's word_language_model example: nn.Embedding's N(0, 1) rows, tied as the
    # output layer, would start the loss far above log |V|.
    nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
    nn.init.zeros_(self.output.bias)

  def forward(self, words: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
    hidden, state = self.lstm(self.drop(self.embedding(words)), state)
    return self.output(self.drop(hidden)), state


OPTIMIZERS = ('sgd', 'adamw')  # The recipes' optimizers that the peer has.


def make_optimizer(model: nn.Module, config):
  """(the recipe's AdamW or SGD, its schedule) as nplm's: ε_t = ε0 / (1 + r·t), decay on
  weights and C only (a recipe's step schedule, constant over a benchmark's steps, is
  this one at r = 0)."""
  def is_bias(name: str) -> bool:
    return name.rsplit('.', 1)[-1].startswith('bias')  # nn.LSTM's are bias_ih_l0, bias_hh_l0.
  named = list(model.named_parameters())  # A tied weight is listed once.
  groups = [{'params': [p for n, p in named if not is_bias(n)],
             'weight_decay': config.weight_decay},
            {'params': [p for n, p in named if is_bias(n)], 'weight_decay': 0.0}]
  if config.optimizer == 'sgd':  # Zaremba et al.'s recipes.
    optimizer = torch.optim.SGD(groups, lr=config.learning_rate)
  elif config.optimizer == 'adamw':
    optimizer = torch.optim.AdamW(groups, lr=config.learning_rate, betas=(0.9, 0.999),
                                  eps=1e-8)
  else:
    raise ValueError(f'the PyTorch LSTM has {" and ".join(OPTIMIZERS)}, not '
                     f'--optimizer={config.optimizer}')
  schedule = torch.optim.lr_scheduler.LambdaLR(
      optimizer, lambda t: 1.0 / (1.0 + config.lr_decay * t))
  return optimizer, schedule


def initial_state(config, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
  shape = (config.num_layers, batch_size, config.hidden_size)
  return torch.zeros(shape, device=DEVICE), torch.zeros(shape, device=DEVICE)


def segment_losses(model, words, targets, state):
  """Per-word negative log-likelihood [B, T] of one segment, and the state after it."""
  logits, state = model(words, state)
  losses = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction='none')
  return losses.view(targets.shape), state


def make_runner(config, vocab_size: int, words: np.ndarray, targets: np.ndarray,
                mask: np.ndarray, seed: int = 0, compile_backend: str = ''):
  """run_steps(batches) -> last loss: one update per (segment index, its mask), as nplm's
  stream train_step on the same [B, S·T] streams. With `compile_backend` the model's forward
  runs as torch.compile(model, backend=...) ('inductor': torch.compile's own default),
  compiled at its first step; the loss, clipping and AdamW stay eager."""
  torch.manual_seed(seed)
  model = TorchLSTMLM(vocab_size, config.feature_size, config.hidden_size, config.num_layers,
                      config.dropout, config.tie_embeddings).to(DEVICE)
  model.train()
  optimizer, schedule = make_optimizer(model, config)
  forward = torch.compile(model, backend=compile_backend) if compile_backend else model
  words, targets = (torch.from_numpy(np.asarray(a)).long().to(DEVICE) for a in (words, targets))
  mask = torch.from_numpy(np.asarray(mask, np.float32)).to(DEVICE)
  length = config.bptt_length
  loop = {'state': initial_state(config, words.shape[0])}

  def train_step(index: int) -> torch.Tensor:
    columns = slice(index * length, (index + 1) * length)
    # Detached: gradients stop at the segment's start, as nplm's constant carry does.
    state = tuple(s.detach() for s in loop['state'])
    losses, loop['state'] = segment_losses(forward, words[:, columns], targets[:, columns],
                                           state)
    segment_mask = mask[:, columns]
    loss = (losses * segment_mask).sum() / segment_mask.sum().clamp(min=1.0)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if config.clip_norm:
      nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
    optimizer.step()
    schedule.step()
    return loss

  def run_steps(batches) -> float:
    loss = None
    for index, _ in batches:
      loss = train_step(index)
    return loss.item()  # Waits for the GPU, if any: the steps are done.

  return run_steps
