"""The most probable next tokens after a typed prefix, with their exact probabilities.

The prefix is read as typed text is (nplm.use.prompts: the model's tokenizer; a token
outside the vocabulary as `<unk>`, the class of every rare word) after the start-of-split
context (nplm.use.next_words); an empty prefix asks for the first token of a split. Where it
ends in a word being typed (nplm.use.prompts), the prefix is read without it and the
predictions are the tokens that spell it out, each weighed by its probability of coming next
and spelling it out (nplm.use.spelling_weights): for words, the words it begins ("the old
m": "man", "men"), each with its p; for subwords, the pieces ("▁church" for "chur").
The probabilities are the model's own exact, normalized distribution over the vocabulary
(every head's `log_probs`, n-gram models' too): they sum to 1 over all |V| tokens. With
typos read (a Corrector), they are those after the prefix as it was read, corrected, and a
word-level model's word being typed may be misspelt (nplm.use.spelling_weights): the words it
may begin are listed with p(w | the prefix before it) and ln P(typed | w) apart, ranked by
their product, the posterior's order, as nplm complete ranks its continuations.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from nplm.errors import ConfigError
from nplm.use.prompts import Prompt
from nplm.use.spelling_weights import read_and_weigh


@dataclasses.dataclass(frozen=True)
class Prediction:
  token: str
  probability: float
  log_prob: float  # Natural log.
  # ln P(the word being typed | token), the typos' channel (nplm.use.prefix_channel); 0
  # where no word was being typed or typos are not read.
  channel_log_prob: float = 0.0

  def as_dict(self) -> dict:
    return dataclasses.asdict(self)


def predict(model, prefix: str, k: int = 10, corrector=None) -> list[Prediction]:
  """The k most probable tokens after `prefix` (most probable first; ties: lowest id)."""
  return predictions(model, prefix, k, corrector)[1]


def predictions(model, prefix: str, k: int, corrector=None
                ) -> tuple[Prompt, list[Prediction]]:
  """(the prompt read, the k most probable next tokens: of those that spell out the word
  being typed, if any, fewer if there are fewer); with a `corrector` (nplm.use.correction),
  after the prefix with its typos read."""
  if k < 1:
    raise ConfigError(f'--k must be at least 1, not {k}')
  typing, spelling = read_and_weigh(model, prefix, corrector)
  if spelling is None:
    return typing.prompt, top_tokens(model, next_log_probs(model, typing.prompt), k)
  log_probs = spelling.prompt_log_probs + spelling.log_weights[()]
  return typing.prompt, top_tokens(model, log_probs, k, spelling.channel_log_probs)


def next_log_probs(model, prompt: Prompt) -> np.ndarray:
  """log p(· | the prompt) over the vocabulary, float32 [|V|]."""
  reader = model.next_words()
  log_probs, _ = reader.next(reader.start(prompt.ids[None]))
  return log_probs[0]


def top_tokens(model, log_probs: np.ndarray, k: int,
               channel_log_probs: np.ndarray | None = None) -> list[Prediction]:
  """The k tokens of the highest log_probs (plus channel_log_probs: the posterior's order)."""
  channel = np.zeros(len(log_probs)) if channel_log_probs is None else channel_log_probs
  scores = log_probs + channel
  best = np.argsort(-scores, kind='stable')[:k]
  best = best[np.isfinite(scores[best])]
  return [Prediction(token, math.exp(float(log_probs[i])), float(log_probs[i]),
                     float(channel[i]))
          for i, token in zip(best, model.vocab.decode(best))]
