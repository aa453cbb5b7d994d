"""What each reading of a trained model answers, as JSON-ready dicts: what `nplm score`,
`rank`, `predict`, `complete` and `correct` print with --json, what `nplm generate` writes, and what
`nplm serve` returns for the same request (one function behind both, so the numbers agree).
"""

import dataclasses
from typing import Iterable, Sequence

from nplm.errors import ConfigError
from nplm.use.completion import Completer, Completion, check_bounds
from nplm.use.correction import Corrector
from nplm.use.generation import Sampling, text_pieces
from nplm.use.prediction import Prediction, predictions
from nplm.use.prompts import Prompt, Typing, read_typing, unknown_note
from nplm.use.sentences import SentenceScore, rank_sentences, scored


def scores(model, sentences: Iterable[str], tokens: bool = False) -> Iterable[dict]:
  """Each sentence's score (`nplm score --json`; `tokens`: with --details), in order."""
  return (score.as_dict(tokens=tokens) for score in scored(model, sentences))


def ranking(ranked: Sequence[SentenceScore]) -> list[dict]:
  """Scores ranked, the best first, each with its rank and its ln p's difference to the
  best's (`nplm rank --json`)."""
  best = ranked[0].log_prob
  return [{'rank': rank, **score.as_dict(tokens=False), 'difference': score.log_prob - best}
          for rank, score in enumerate(ranked, 1)]


def rank(model, sentences: Sequence[str]) -> list[dict]:
  if len(sentences) < 2:
    raise ConfigError('give two or more alternative sentences to rank')
  return ranking(rank_sentences(model, sentences))


def prediction(prefix: str, best: Sequence[Prediction]) -> dict:
  """`nplm predict --json`'s entry for one prefix."""
  return {'prefix': prefix, 'predictions': [p.as_dict() for p in best]}


def predict(model, prefix: str, k: int, corrector: Corrector | None = None) -> dict:
  if k < 1:
    raise ConfigError(f'k must be at least 1, not {k}')
  model.require_language_model()
  prompt, best = predictions(model, prefix, k, corrector)
  return with_note(prediction(prefix, best), prompt)


def completions(prefix: str, found: Sequence[Completion]) -> dict:
  """`nplm complete --json`'s line for one prefix."""
  return {'prefix': prefix, 'completions': [c.as_dict() for c in found]}


def complete(completer: Completer, prefix: str, k: int, max_words: int) -> dict:
  check_bounds(k, max_words)
  return with_note(completions(prefix, completer.complete(prefix, k, max_words)),
                   completer.typing(prefix).prompt)


def samples(model, prompt: str, sampling: Sampling, seed: int,
            corrector: Corrector | None = None) -> dict:
  """What `nplm generate` writes: each sample's text (the prompt as read, then what was
  drawn), its pieces joined."""
  model.require_language_model()
  sampling.validate()
  texts = [''.join(text_pieces(model, prompt, sampling, seed, sample, corrector=corrector))
           for sample in range(sampling.samples)]
  return with_note({'prompt': prompt, 'samples': texts}, read(model, prompt, corrector).prompt)


def correction(corrector: Corrector, text: str) -> dict:
  """`nplm correct --json`'s line for one sentence."""
  return corrector.correct(text).as_dict()


def corrections(corrector: Corrector, texts: Sequence[str]) -> dict:
  return {'corrections': [correction(corrector, text) for text in texts]}


def read(model, text: str, corrector: Corrector | None = None) -> Typing:
  """`text` as the model reads it (nplm.use.prompts), with a `corrector` its typos read
  (Corrector.typing)."""
  return read_typing(model, text) if corrector is None else corrector.typing(text)


def with_note(answer: dict, prompt: Prompt) -> dict:
  """The answer, with the text as read and the changes where its typos were corrected,
  and the commands' warning where typed tokens fell to <unk>."""
  if prompt.read_as is not None:
    answer = {**answer, 'read_as': prompt.read_as,
              'changes': [dataclasses.asdict(change) for change in prompt.changes]}
  note = unknown_note(prompt)
  return {**answer, 'warning': note} if note else answer
