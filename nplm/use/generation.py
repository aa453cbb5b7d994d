"""Text sampled from a trained model, one word at a time from its exact distribution.

Every head offers `log_probs(hidden)`, the full distribution over the vocabulary normalized
whatever objective trained it (sampled heads included), so sampling is the same for all:
w_t ~ p(· | w_1 … w_{t-1}), read after the same start-of-split context that scoring uses
(`</text>` padding for a feed-forward model, h_0 = 0 and `</text>` first for a recurrent one),
then the prompt. Two knobs reshape p before each draw:
  temperature T: p_T(w) ∝ p(w)^(1/T); T = 1 is the model, T → 0 its most probable word,
    T > 1 flatter;
  top-k: only the k most probable words keep their mass (renormalized); 0 keeps all.
`<unk>` stands for every rare word at once; `no_unk` takes it out of the draw.

Sample i's word t is drawn with the key fold_in(fold_in(key(seed), i), t): a seed gives the
same text every time, and sample i does not depend on how many are drawn beside it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nplm.data.vocab import END_OF_SENTENCE, PARAGRAPH_END
from nplm.errors import ConfigError
from nplm.use.trained import TrainedModel


@dataclasses.dataclass(frozen=True)
class Sampling:
  length: int = 50  # At most this many words per sample; fewer if `</text>` comes first.
  temperature: float = 1.0  # T in p(w)^(1/T).
  top_k: int = 0  # Draw from the k most probable words only; 0 = all.
  no_unk: bool = False  # Never draw `<unk>`.
  samples: int = 1  # Independent samples, drawn side by side as one batch.

  def validate(self) -> Sampling:
    if self.length < 1:
      raise ConfigError(f'--length must be at least 1, not {self.length}')
    if not self.temperature > 0:
      raise ConfigError(f'--temperature must be positive, not {self.temperature}')
    if self.top_k < 0:
      raise ConfigError(f'--top_k must be 0 (all words) or positive, not {self.top_k}')
    if self.samples < 1:
      raise ConfigError(f'--samples must be at least 1, not {self.samples}')
    return self


def sampling_logits(log_probs: jnp.ndarray, temperature: float, top_k: int = 0,
                    banned: int | None = None) -> jnp.ndarray:
  """Unnormalized log p_T over the allowed words, [..., |V|]: a categorical draw from them
  gives p(w)^(1/T) renormalized over the top k (ties at the k-th value are all kept).

  The ban comes first and the best allowed word is shifted to 0 before dividing by T: a tiny
  T then sends every other word to -inf (or a huge negative) while the best keeps 0, the
  greedy limit, where dividing first would turn every word into -inf (or NaN) alike."""
  logits = log_probs
  if banned is not None:
    logits = logits.at[..., banned].set(-jnp.inf)
  shifted = logits - jnp.max(logits, axis=-1, keepdims=True)
  # 0 / T stays 0 even where T underflows to 0 (a subnormal T flushed on the device).
  logits = jnp.where(shifted < 0, shifted / temperature, 0.0)
  if 0 < top_k < logits.shape[-1]:
    kth_best = jax.lax.top_k(logits, top_k)[0][..., -1:]
    logits = jnp.where(logits < kth_best, -jnp.inf, logits)
  return logits


# --- reading one word: the window of a feed-forward model, the state of a recurrent one ----

def _window_start(lm, variables, history: np.ndarray):
  """The last n-1 words of the padded history [S, ≥ n-1], w_{t-1} first (Eq. 1's x)."""
  del variables  # Reading the words needs no model.
  return jnp.asarray(history[:, ::-1][:, :lm.model.order - 1])


def _window_next(lm, variables, window):
  return lm.apply(variables, window, method=lm.log_probs), window


def _window_push(window, words):
  return jnp.concatenate([words[:, None], window[:, :-1]], axis=1)


@functools.partial(jax.jit, static_argnames='lm')
def _recurrent_start(lm, variables, history: np.ndarray):
  """The state after every word but the last, and the last word, its next input."""
  state = lm.model.initial_state(history.shape[0])
  if history.shape[1] > 1:
    _, state = lm.apply(variables, history[:, :-1], state, method=lambda m, w, s: m.model(w, s))
  return state, history[:, -1]


def _recurrent_next(lm, variables, reader):
  state, word = reader
  log_probs, state = lm.apply(variables, word[:, None], state, method=lm.log_probs)
  return log_probs[:, 0], (state, word)


def _recurrent_push(reader, words):
  return reader[0], words


class _Reader(NamedTuple):
  """How a family's model reads the history and then one word at a time."""
  start: Callable  # (lm, variables, padded history [S, ≥ padding]) -> reader
  next: Callable  # (lm, variables, reader) -> (log p of the next word [S, |V|], reader)
  push: Callable  # (reader, words [S]) -> the reader with the words read next
  padding: Callable  # model -> boundary tokens before the prompt


READERS = {'windows': _Reader(_window_start, _window_next, _window_push,
                              lambda model: model.order - 1),
           'streams': _Reader(_recurrent_start, _recurrent_next, _recurrent_push,
                              lambda model: 1)}


@functools.partial(jax.jit, static_argnames=('lm', 'top_k', 'banned'))
def _draw(lm, variables, reader, seed, t, temperature, top_k, banned):
  """Word t of every sample, and the reader after it; compiled once per model and settings
  (seed, t and the temperature are traced)."""
  reading = READERS[lm.model.family]
  log_probs, reader = reading.next(lm, variables, reader)
  logits = sampling_logits(log_probs, temperature, top_k, banned)
  sample_keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(seed), i))
  keys = jax.vmap(lambda key: jax.random.fold_in(key, t))(sample_keys(jnp.arange(len(logits))))
  words = jax.vmap(jax.random.categorical)(keys, logits).astype(jnp.int32)
  return words, reading.push(reader, words)


def generate(trained: TrainedModel, prompt: Sequence[int] = (), sampling: Sampling = Sampling(),
             seed: int = 0) -> list[np.ndarray]:
  """`sampling.samples` continuations of the prompt's word ids, each up to `sampling.length`
  ids in [0, |V|) and ending early with the dataset's boundary token, `</text>` or `<eos>`
  (kept as its last word)."""
  sampling.validate()
  trained.require_language_model()
  lm, vocab = trained.lm, trained.vocab
  variables = lm.variables_of(trained.params)
  boundary = trained.boundary_id
  reading = READERS[lm.model.family]
  padding = np.full(reading.padding(lm.model), boundary)
  history = np.concatenate([padding, np.asarray(prompt, int)]).astype(np.int32)
  history = np.tile(history, (sampling.samples, 1))
  reader = reading.start(lm, variables, history)
  banned = vocab.unk_id if sampling.no_unk else None
  drawn, ended = [], np.zeros(sampling.samples, bool)
  for t in range(sampling.length):
    words, reader = _draw(lm, variables, reader, seed, t, sampling.temperature, sampling.top_k,
                          banned)
    drawn.append(np.asarray(words))
    ended |= drawn[-1] == boundary
    if ended.all():
      break
  return [row[:_text_end(row, boundary)] for row in np.stack(drawn, axis=1)]


def _text_end(ids: np.ndarray, boundary: int) -> int:
  """The length of a sample: up to its first boundary token, included."""
  ends = np.flatnonzero(ids == boundary)
  return int(ends[0]) + 1 if len(ends) else len(ids)


def as_text(tokens: Sequence[str], tokenization: str = 'words') -> str:
  """Words joined by spaces (characters by nothing), each line end (`</p>`, `<eos>`) a line
  break."""
  lines, line = [], []
  for token in tokens:
    if token in (PARAGRAPH_END, END_OF_SENTENCE):
      lines.append(line)
      line = []
    else:
      line.append(token)
  separator = ' ' if tokenization == 'words' else ''
  return '\n'.join(separator.join(words) for words in [*lines, line])
