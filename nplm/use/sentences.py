"""Typed sentences scored by a trained model: log p of each word given the words before it.

Each sentence is read as the start of a split (nplm.use.trained.TrainedModel.split_log_probs), as
if a text (Brown) or a line (text datasets) had just ended: a feed-forward model's first
context is n-1 copies of the boundary token, a recurrent model starts from h_0 = 0 with it as
its first input. A sentence is tokenized as the model's dataset was (nplm.data.tokenize:
Brown's punctuation is a token of its own, "said." is "said ."); a word outside the
vocabulary is scored as `<unk>`, the class it was trained as.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from nplm.data.tokenize import words_of
from nplm.errors import ConfigError
from nplm.use.trained import TrainedModel


@dataclasses.dataclass(frozen=True)
class TokenScore:
  word: str  # As typed (after tokenization).
  token: str  # The vocabulary's word the model read: `word`, or <unk> outside the vocabulary.
  log_prob: float  # Natural log p(token | the earlier tokens of the sentence).


@dataclasses.dataclass(frozen=True)
class SentenceScore:
  text: str
  tokens: tuple[TokenScore, ...]

  @property
  def log_prob(self) -> float:
    """log p(w_1 … w_n) = Σ_t log p(w_t | w_1 … w_{t-1}) (chain rule)."""
    return math.fsum(t.log_prob for t in self.tokens)

  @property
  def perplexity(self) -> float:
    """exp(-mean log p) per token: the split perplexity's formula on this one sentence."""
    return math.exp(-self.log_prob / len(self.tokens))

  def as_dict(self) -> dict:
    return {'text': self.text, 'log_prob': self.log_prob, 'perplexity': self.perplexity,
            'tokens': [dataclasses.asdict(t) for t in self.tokens]}


def score_sentences(trained: TrainedModel, sentences: Sequence[str]) -> list[SentenceScore]:
  """Every sentence scored on its own, each from the start-of-split context."""
  scores = []
  for number, text in enumerate(sentences, 1):
    words = words_of(text, trained.config.dataset, trained.config.tokens)
    if not words:
      raise ConfigError(f'sentence {number} has no words to score')
    ids = trained.vocab.encode(words)
    # One batch (or segment) holds the whole sentence: no padding to compute.
    log_probs = trained.split_log_probs(ids, batch_size=len(ids))
    tokens = tuple(TokenScore(word, token, float(log_prob)) for word, token, log_prob
                   in zip(words, trained.vocab.decode(ids), log_probs))
    scores.append(SentenceScore(text, tokens))
  return scores
