"""The most probable next tokens after a typed prefix, with their exact probabilities.

The prefix is tokenized as the model's dataset was (`model.tokenizer`) and read after the
start-of-split context (nplm.use.next_words); an empty prefix asks for the first token of a
split. A token outside the vocabulary is read as `<unk>`, the class of every rare word.
The probabilities are the model's own exact, normalized distribution over the vocabulary
(every head's `log_probs`, n-gram models' too): they sum to 1 over all |V| tokens.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from nplm.data.vocab import UNK
from nplm.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Prompt:
  """Typed text as the model reads it."""
  text: str
  tokens: list[str]  # As typed, tokenized.
  ids: np.ndarray  # int32: each token's id, <unk>'s for a token outside the vocabulary.
  unknown: list[str]  # The typed tokens read as <unk>, each once, in order.
  only_unknown: bool  # Every token was read as <unk> (and there is one at least).


def read_prompt(model, text: str) -> Prompt:
  return prompt_of(model, text, model.tokenizer.tokens(text))


def prompt_of(model, text: str, tokens: list[str]) -> Prompt:
  """The prompt of `text` read as `tokens` (read_prompt's, or some of them)."""
  ids = model.vocab.encode(tokens)
  unknown = [t for t, i in zip(tokens, ids) if i == model.vocab.unk_id and t != UNK]
  return Prompt(text, tokens, ids, list(dict.fromkeys(unknown)),
                bool(unknown) and bool(np.all(ids == model.vocab.unk_id)))


def unknown_note(prompt: Prompt) -> str | None:
  """The line telling the user which typed tokens fell to <unk>, or None."""
  if not prompt.unknown:
    return None
  only = (' -- every token of it: the model sees no more than "rare words"'
          if prompt.only_unknown else '')
  return (f'{prompt.text!r}: read as {UNK} (not in the vocabulary): '
          f'{" ".join(prompt.unknown)}{only}')


@dataclasses.dataclass(frozen=True)
class Prediction:
  token: str
  probability: float
  log_prob: float  # Natural log.

  def as_dict(self) -> dict:
    return dataclasses.asdict(self)


def predict(model, prefix: str, k: int = 10) -> list[Prediction]:
  """The k most probable tokens after `prefix` (most probable first; ties: lowest id)."""
  if k < 1:
    raise ConfigError(f'--k must be at least 1, not {k}')
  return top_tokens(model, next_log_probs(model, read_prompt(model, prefix)), k)


def next_log_probs(model, prompt: Prompt) -> np.ndarray:
  """log p(· | the prompt) over the vocabulary, float32 [|V|]."""
  reader = model.next_words()
  log_probs, _ = reader.next(reader.start(prompt.ids[None]))
  return log_probs[0]


def top_tokens(model, log_probs: np.ndarray, k: int) -> list[Prediction]:
  best = np.argsort(-log_probs, kind='stable')[:k]
  return [Prediction(token, math.exp(float(log_probs[i])), float(log_probs[i]))
          for i, token in zip(best, model.vocab.decode(best))]
