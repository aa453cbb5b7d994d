"""Recurrent language models up to their output layer: Elman RNN, LSTM and GRU.

A recurrent model reads the words one at a time and carries a state: h_t summarizes the whole
history, where the NNLM sees n-1 words (Elman 1990; Mikolov et al. 2010, section 2). The cells
follow the seeds' equations (002 for the Elman RNN, 004 for the LSTM and the GRU).

The cells are written out rather than taken from flax (SimpleCell, LSTMCell, GRUCell) for
two reasons: the input term U x + b of every time step is one [B·T, E] x [E, gates·H] matmul
before the recurrence, leaving only the recurrent matmul inside the scan (2-3x fewer
sequential FLOPs per step); and the GRU here is the seed's (the reset gate applied to
h_{t-1} before W_h), which is not flax's.

The state of a model is one array [layers, parts, batch, H] (parts: 2 for the LSTM's h and
c, 1 otherwise), carried from segment to segment by truncated BPTT and saved in checkpoints.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from nplm import heads, sparse_rows
from nplm.knobs import OPTIMIZER, Knob

# Gate blocks of the fused input matmul, and state parts carried per layer.
_GATES = {'rnn': 1, 'lstm': 4, 'gru': 3}
_STATE_PARTS = {'rnn': 1, 'lstm': 2, 'gru': 1}


def elman_step(weights, state, input_term):
  """h_t = tanh(U h_{t-1} + W v_{w_{t-1}} + c) (Mikolov et al. 2010); input_term = W v + c."""
  (h,) = state
  h = jnp.tanh(h @ weights['recurrent'] + input_term)
  return (h,), h


def lstm_step(weights, state, input_term):
  """Hochreiter & Schmidhuber 1997, with Gers et al. 2000's forget gate:
  f, i, o = σ(W h_{t-1} + U x_t + b), c̃ = tanh(…), c_t = f·c_{t-1} + i·c̃,
  h_t = o·tanh(c_t). The gates are the four blocks [f, i, o, c̃] of one matmul."""
  h, c = state
  f, i, o, c_new = jnp.split(h @ weights['recurrent'] + input_term, 4, axis=-1)
  c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(c_new)
  h = jax.nn.sigmoid(o) * jnp.tanh(c)
  return (h, c), h


def gru_step(weights, state, input_term):
  """Cho et al. 2014, section 2.3: u, r = σ(W h_{t-1} + U x_t + b),
  h̃ = tanh(W_h (r·h_{t-1}) + U_h x_t + b_h),
  h_t = (1 - u)·h_{t-1} + u·h̃."""
  (h,) = state
  input_ur, input_h = jnp.split(input_term, [2 * h.shape[-1]], axis=-1)
  u, r = jnp.split(jax.nn.sigmoid(h @ weights['recurrent'] + input_ur), 2, axis=-1)
  h_tilde = jnp.tanh((r * h) @ weights['recurrent_candidate'] + input_h)
  h = (1.0 - u) * h + u * h_tilde
  return (h,), h


CELL_STEPS = {'rnn': elman_step, 'lstm': lstm_step, 'gru': gru_step}


def _forget_bias_one(key, shape, dtype=jnp.float32):
  """The LSTM's forget-gate bias starts at 1 (Jozefowicz et al. 2015): remember by default."""
  hidden = shape[0] // 4
  return jnp.zeros(shape, dtype).at[:hidden].set(1.0)


class RecurrentLayer(nn.Module):
  """One recurrent layer over a segment: inputs [B, T, E], state -> outputs [B, T, H], state."""
  cell: str
  hidden_size: int

  @nn.compact
  def __call__(self, inputs: jnp.ndarray, state: jnp.ndarray):
    hidden, gates = self.hidden_size, _GATES[self.cell]
    bias_init = _forget_bias_one if self.cell == 'lstm' else nn.initializers.zeros_init()
    # The input term of every step at once, outside the sequential loop.
    input_terms = nn.Dense(gates * hidden, bias_init=bias_init, name='input')(inputs)
    orthogonal = nn.initializers.orthogonal()
    recurrent_width = 2 * hidden if self.cell == 'gru' else gates * hidden
    weights = {'recurrent': self.param('recurrent', orthogonal, (hidden, recurrent_width))}
    if self.cell == 'gru':
      weights['recurrent_candidate'] = self.param('recurrent_candidate', orthogonal,
                                                  (hidden, hidden))
    step = CELL_STEPS[self.cell]
    final, outputs = jax.lax.scan(lambda carry, x: step(weights, carry, x), tuple(state),
                                  jnp.swapaxes(input_terms, 0, 1))  # Scanned over time.
    return jnp.swapaxes(outputs, 0, 1), jnp.stack(final)


class RecurrentModel(nn.Module):
  """Maps words [B, T] and the state to hidden vectors [B, T, H] (h_t predicts the word after
  input t) and the state after the segment; dropout (Zaremba et al. 2014) on the embeddings,
  between layers and on the output, never on the recurrent connections."""
  vocab_size: int
  cell: str  # 'rnn' (Elman), 'lstm' or 'gru'
  num_layers: int
  feature_size: int  # embedding size E
  hidden_size: int  # H
  dropout: float = 0.0

  language_model = True  # Gives p(w_t | the words before it).
  family = 'streams'  # Its feed (nplm.training.families).
  recurrent = True  # Carries its state h_t from one segment to the next (nplm.lm).
  knobs = {
      'feature_size': Knob(30, 'm: the size of each word feature vector C(w) (the embedding).'),
      'hidden_size': Knob(100, 'h: the state of each layer.'),
      'num_layers': Knob(1, 'Stacked recurrent layers.'),
      'dropout': Knob(0.0, 'Dropout rate in training, on the embeddings, between layers and '
                           'on the last layer (Zaremba et al. 2014).'),
      'tie_embeddings': Knob(False, 'The output rows are the input embedding C (needs the '
                             'hidden vector as wide as --feature_size).'),
      # Read by its feed (nplm.training.stream_feed): how the updates are computed.
      'bptt_length': Knob(35, 'T: words per segment of truncated BPTT.', group=OPTIMIZER),
  }

  @classmethod
  def config_errors(cls, config) -> list[str]:
    checks = [
        (config.hidden_size > 0, f'--model={config.model} needs --hidden_size of at least 1'),
        (config.num_layers >= 1, f'--num_layers must be positive, got {config.num_layers}'),
        (0 <= config.dropout < 1, f'--dropout must be within [0, 1), got {config.dropout}'),
        (config.bptt_length >= 1, f'--bptt_length must be positive, got {config.bptt_length}'),
    ]
    return [message for ok, message in checks if not ok]

  @classmethod
  def describe(cls, config) -> str:
    return (f'{config.model} ({config.num_layers} layer{"s" if config.num_layers > 1 else ""}, '
            f'm={config.feature_size}, h={config.hidden_size}, dropout {config.dropout}'
            f'{", tied" if config.tie_embeddings else ""})')

  @classmethod
  def from_config(cls, config, vocab_size: int) -> 'RecurrentModel':
    return cls(vocab_size=vocab_size, cell=config.model, num_layers=config.num_layers,
               feature_size=config.feature_size, hidden_size=config.hidden_size,
               dropout=config.dropout)

  @property
  def output_width(self) -> int:
    return self.hidden_size

  def activation_words(self, config, head, batch: int, evaluated: int,
                       shards: int) -> tuple[int, int]:
    """The activations in words (train step, evaluation step; nplm.training.memory), `batch`
    and `evaluated` examples per device: per word L·(m + (g+2)·h), g gates, twice in
    training for B streams × --bptt_length words; one stream of --eval_batch_size words on
    every device in evaluation."""
    del evaluated  # Evaluation reads one stream, whole on every device.
    head_train, head_eval = heads.step_scores(head, config.eval_batch_size, shards)
    per_word = self.num_layers * (self.feature_size + (_GATES[self.cell] + 2) * self.hidden_size)
    return (batch * config.bptt_length * (2 * per_word + head_train),
            config.eval_batch_size * (per_word + head_eval))

  def initial_state(self, batch_size: int) -> jnp.ndarray:
    """h_0 = 0 (and c_0 = 0): the state at the start of every epoch and of every split."""
    parts = _STATE_PARTS[self.cell]
    return jnp.zeros((self.num_layers, parts, batch_size, self.hidden_size), jnp.float32)

  @nn.compact
  def __call__(self, words: jnp.ndarray, state: jnp.ndarray, train: bool = False):
    drop = nn.Dropout(self.dropout, deterministic=not train or self.dropout == 0.0)
    x = drop(sparse_rows.Embed(self.vocab_size, self.feature_size, name='C')(words))
    final_states = []
    for layer in range(self.num_layers):
      x, final = RecurrentLayer(self.cell, self.hidden_size, name=f'layer{layer}')(x, state[layer])
      x = drop(x)
      final_states.append(final)
    return x, jnp.stack(final_states)
