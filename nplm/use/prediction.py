"""The most probable next tokens after a typed prefix, with their exact probabilities.

The prefix is tokenized as the model's dataset was (`model.tokenizer`) and read after the
start-of-split context (nplm.use.next_words); an empty prefix asks for the first token of a
split. A token outside the vocabulary is read as `<unk>`, the class of every rare word, but
for the word being typed: where each token is a word, a last word with no space after it
that the vocabulary lacks but begins words of ("the old m") is read as the next word's
beginning (`read_typing`), and the predictions are the words it begins ("man", "men"), each
with its probability after the prefix before it.
The probabilities are the model's own exact, normalized distribution over the vocabulary
(every head's `log_probs`, n-gram models' too): they sum to 1 over all |V| tokens.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from nplm.data.tokenizers import Tokenization
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


def read_typing(model, text: str) -> tuple[Prompt, str]:
  """(`text` as the model reads it, the word being typed or ''): the module docstring's
  rule, the prompt then without that word."""
  prompt = read_prompt(model, text)
  tokenization = Tokenization.of(model.config)
  if (tokenization.tokens == 'words' and not tokenization.learned and prompt.unknown
      and prompt.tokens[-1] in prompt.unknown and not text[-1].isspace()
      and words_begun(model, prompt.tokens[-1]).any()):
    return prompt_of(model, text, prompt.tokens[:-1]), prompt.tokens[-1]
  return prompt, ''


def words_begun(model, typed: str) -> np.ndarray:
  """Which vocabulary tokens begin with `typed`, bool [|V|] (<unk>, no word, not)."""
  begun = np.char.startswith(np.asarray(model.vocab.words), typed)
  begun[model.vocab.unk_id] = False
  return begun


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
  return predictions(model, prefix, k)[1]


def predictions(model, prefix: str, k: int) -> tuple[Prompt, list[Prediction]]:
  """(the prompt read, the k most probable next tokens, or words that the word being typed
  begins: fewer if it begins fewer)."""
  if k < 1:
    raise ConfigError(f'--k must be at least 1, not {k}')
  prompt, typed = read_typing(model, prefix)
  log_probs = next_log_probs(model, prompt)
  if typed:
    log_probs = np.where(words_begun(model, typed), log_probs, -np.inf)
  return prompt, top_tokens(model, log_probs, k)


def next_log_probs(model, prompt: Prompt) -> np.ndarray:
  """log p(· | the prompt) over the vocabulary, float32 [|V|]."""
  reader = model.next_words()
  log_probs, _ = reader.next(reader.start(prompt.ids[None]))
  return log_probs[0]


def top_tokens(model, log_probs: np.ndarray, k: int) -> list[Prediction]:
  best = np.argsort(-log_probs, kind='stable')[:k]
  best = best[np.isfinite(log_probs[best])]
  return [Prediction(token, math.exp(float(log_probs[i])), float(log_probs[i]))
          for i, token in zip(best, model.vocab.decode(best))]
