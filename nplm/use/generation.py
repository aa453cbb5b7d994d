"""Text sampled from a trained model, one token at a time from its exact distribution.

Any read-back model (network or n-gram) gives the exact, normalized distribution of the next
token through its `next_words()` reader (nplm.use.next_words), after the same start-of-split
context that scoring uses, then the prompt: w_t ~ p(· | prompt, w_1 … w_{t-1}). The draw is
reshaped as Hugging Face's `generate` reshapes it, in this order:
  no_unk: `<unk>` stands for every rare word at once; it is taken out of the draw;
  temperature T: p_T(w) ∝ p(w)^(1/T); T = 1 is the model, larger flatter, T = 0 greedy (the
    most probable token; ties: the lowest id);
  top-k: only the k most probable tokens keep their mass; 0 keeps all;
  top-p (nucleus, [Holtzman et al. 2020]): only the smallest set of most probable tokens
    whose mass reaches p; 1 keeps all.
Both cuts keep every token tied with the last one kept, and the survivors are renormalized.

A sample runs on across sentence and text ends for `length` tokens, or stops after its
`sentences`-th sentence end when that comes first. A sentence end is the dataset's own mark
(`<eos>`, the model's `sentence_end`) or, for Brown, whose sentences carry none, the end of a
paragraph `</p>`; the boundary token (`</text>`, `<eos>`) ends one too. An end right after
another (Brown's `</text>` after its text's last `</p>`, a blank line) ends nothing new.

Sample i's token t is drawn with the key fold_in(fold_in(key(seed), i), t): a seed gives the
same text every time, and sample i does not depend on how many are drawn beside it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from nplm.data.vocab import PARAGRAPH_END
from nplm.errors import ConfigError
from nplm.use.prediction import read_prompt


@dataclasses.dataclass(frozen=True)
class Sampling:
  length: int = 50  # At most this many tokens per sample.
  temperature: float = 1.0  # T in p(w)^(1/T); 0 = greedy.
  top_k: int = 0  # Draw from the k most probable tokens only; 0 = all.
  top_p: float = 1.0  # Draw from the smallest set of mass ≥ p only; 1 = all.
  no_unk: bool = False  # Never draw `<unk>`.
  samples: int = 1  # Independent samples, drawn side by side as one batch.
  sentences: int = 0  # Stop a sample after this many sentence ends; 0 = at `length` only.

  def validate(self) -> Sampling:
    if self.length < 1:
      raise ConfigError(f'--length must be at least 1, not {self.length}')
    if not self.temperature >= 0:
      raise ConfigError(f'--temperature must be 0 (greedy) or positive, not '
                        f'{self.temperature}')
    if self.top_k < 0:
      raise ConfigError(f'--top_k must be 0 (all tokens) or positive, not {self.top_k}')
    if not 0 < self.top_p <= 1:
      raise ConfigError(f'--top_p must be in (0, 1] (1 = all tokens), not {self.top_p}')
    if self.samples < 1:
      raise ConfigError(f'--samples must be at least 1, not {self.samples}')
    if self.sentences < 0:
      raise ConfigError(f'--sentences must be 0 (no limit) or positive, not {self.sentences}')
    return self


def sampling_logits(log_probs: jnp.ndarray, temperature: float, top_k: int = 0,
                    banned: int | None = None, top_p: float = 1.0) -> jnp.ndarray:
  """Unnormalized log p_T over the allowed tokens, [..., |V|]: a categorical draw from them
  gives p(w)^(1/T) renormalized over the top k, then over the top-p nucleus.

  The ban comes first and the best allowed token is shifted to 0 before dividing by T: a
  tiny T then sends every other token to -inf (or a huge negative) while the best keeps 0,
  the greedy limit, where dividing first would turn every token into -inf (or NaN) alike."""
  logits = jnp.asarray(log_probs, jnp.float32)
  if banned is not None:
    logits = logits.at[..., banned].set(-jnp.inf)
  shifted = logits - jnp.max(logits, axis=-1, keepdims=True)
  # 0 / T stays 0 even where T underflows to 0 (a subnormal T flushed on the device).
  tempered = jnp.where(shifted < 0, shifted / temperature, 0.0)
  best = jnp.arange(logits.shape[-1]) == jnp.argmax(logits, axis=-1, keepdims=True)
  logits = jnp.where(temperature == 0, jnp.where(best, 0.0, -jnp.inf), tempered)
  if 0 < top_k < logits.shape[-1]:
    logits = _cut_below(logits, jax.lax.top_k(logits, top_k)[0][..., -1:])
  if top_p < 1:
    descending = -jnp.sort(-logits, axis=-1)
    probs = jax.nn.softmax(descending, axis=-1)
    mass_before = jnp.cumsum(probs, axis=-1) - probs
    kept = jnp.sum(mass_before < top_p, axis=-1, keepdims=True)  # At least the best one.
    logits = _cut_below(logits, jnp.take_along_axis(descending, kept - 1, axis=-1))
  return logits


def _cut_below(logits, lowest_kept):
  return jnp.where(logits < lowest_kept, -jnp.inf, logits)


@functools.partial(jax.jit, static_argnames=('top_k', 'top_p', 'banned'))
def _draw(log_probs, seed, t, temperature, top_k, top_p, banned):
  """Token t of every sample; compiled once per settings and batch (seed, t and the
  temperature are traced)."""
  logits = sampling_logits(log_probs, temperature, top_k, banned, top_p)
  sample_keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(seed), i))
  keys = jax.vmap(lambda key: jax.random.fold_in(key, t))(sample_keys(jnp.arange(len(logits))))
  return jax.vmap(jax.random.categorical)(keys, logits).astype(jnp.int32)


def end_ids(model) -> np.ndarray:
  """The ids of the tokens that end a sentence (the module docstring says which)."""
  ends = [model.sentence_end or PARAGRAPH_END, model.vocab.decode([model.boundary_id])[0]]
  return np.unique([model.vocab.id_of(token) for token in ends if token in model.vocab.words])


def generate(model, prompt: Sequence[int] = (), sampling: Sampling = Sampling(),
             seed: int = 0) -> list[np.ndarray]:
  """`sampling.samples` continuations of the prompt's token ids, each `sampling.length` ids
  in [0, |V|), or fewer, up to its `sampling.sentences`-th sentence end (included)."""
  sampling.validate()
  reader = model.next_words()
  prompt = np.asarray(prompt, np.int32).reshape(1, -1)
  state = reader.start(np.repeat(prompt, sampling.samples, axis=0))
  banned = model.vocab.unk_id if sampling.no_unk else None
  ends = end_ids(model)
  previous = np.full(sampling.samples, prompt[0, -1] if prompt.size else model.boundary_id)
  lengths = np.full(sampling.samples, sampling.length)
  counted, drawn = np.zeros(sampling.samples, int), []
  for t in range(sampling.length):
    log_probs, state = reader.next(state)
    words = np.asarray(_draw(log_probs, seed, t, sampling.temperature, sampling.top_k,
                             sampling.top_p, banned))
    drawn.append(words)
    if sampling.sentences:
      counted += np.isin(words, ends) & ~np.isin(previous, ends)
      lengths = np.where((counted == sampling.sentences) & (lengths > t), t + 1, lengths)
      if (lengths <= t + 1).all():
        break
    if t + 1 < sampling.length:
      state, previous = reader.push(state, words), words
  return [row[:length] for row, length in zip(np.stack(drawn, axis=1), lengths)]


def generate_text(model, prompt: str = '', sampling: Sampling = Sampling(),
                  seed: int = 0) -> list[str]:
  """The typed prompt and each sample's continuation as text, one line per sentence."""
  typed = read_prompt(model, prompt)
  return [as_text(model, [*typed.tokens, *model.vocab.decode(ids)])
          for ids in generate(model, typed.ids, sampling, seed)]


def as_text(model, tokens: Sequence[str]) -> str:
  """Tokens as text, each line through the model's tokenizer (words spaced, characters
  joined, subwords merged), a line break at each sentence end; an end token itself does not
  print (two in a row leave a blank line)."""
  ends = set(model.vocab.decode(end_ids(model)))
  lines, line = [], []
  for token in tokens:
    if token in ends:
      lines.append(line)
      line = []
    else:
      line.append(token)
  if line or not lines:
    lines.append(line)
  return '\n'.join(model.tokenizer.detokenize(words) for words in lines)
