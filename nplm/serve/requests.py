"""What each endpoint of `nplm serve` accepts: its JSON fields, their types, defaults and
bounds (Limits), and the one-line refusal of anything else (RequestError, a 4xx)."""

import dataclasses
import json
import math
from typing import Any, Callable

from nplm.use.completion import DEFAULT_MAX_WORDS, MOST_WORDS
from nplm.use.correction import MAX_CHANGES
from nplm.use.spelling_channel import ALPHA, SECOND_EDIT


@dataclasses.dataclass(frozen=True)
class Limits:
  """What one request may ask for; beyond, it is refused naming the limit."""
  body_bytes: int = 64 * 1024  # A request's JSON body.
  text_chars: int = 2_000  # One text, prefix or prompt.
  texts: int = 64  # Sentences in one /score, /rank or /correct request.
  k: int = 100  # Predictions or completions listed.
  max_words: int = MOST_WORDS  # Words a completion adds.
  length: int = 200  # Tokens a sample draws.
  samples: int = 8  # Samples in one /generate request.
  changes: int = 4  # Words /correct may change in a sentence (its "max_changes").
  pending: int = 64  # Requests waiting for the model or in it; beyond: 503, retry later.
  read_seconds: float = 10.0  # A client's time to send its body.


class RequestError(Exception):
  """A request refused: `status` (4xx or 503) and a one-line message."""

  def __init__(self, status: int, message: str):
    super().__init__(message)
    self.status = status


def _refuse(message: str) -> RequestError:
  return RequestError(400, message)


def text(limits: Limits, default: str | None = None, empty: bool = True) -> Callable:
  def read(name, value):
    if not isinstance(value, str):
      raise _refuse(f'"{name}" must be a string, not {_kind(value)}')
    if not empty and not value.strip():
      raise _refuse(f'"{name}" is empty: give the text to read')
    if len(value) > limits.text_chars:
      raise RequestError(413, f'"{name}" holds {len(value):,} characters; the limit is '
                              f'{limits.text_chars:,} (nplm serve --max_text_chars)')
    return value
  read.default = default
  return read


def texts(limits: Limits, fewest: int = 1) -> Callable:
  one = text(limits, empty=False)

  def read(name, value):
    if not isinstance(value, list) or not value:
      raise _refuse(f'"{name}" must be a non-empty list of strings, not {_kind(value)}')
    if len(value) < fewest:
      raise _refuse(f'"{name}" holds {len(value)} text; give {fewest} or more to compare')
    if len(value) > limits.texts:
      raise RequestError(413, f'"{name}" holds {len(value):,} texts; the limit is '
                              f'{limits.texts:,} a request (nplm serve --max_texts)')
    return [one(f'{name}[{i}]', item) for i, item in enumerate(value)]
  read.default = None
  return read


def integer(default: int, lowest: int, highest: int | None = None,
            flag: str | None = None) -> Callable:
  def read(name, value):
    if isinstance(value, bool) or not isinstance(value, int):
      raise _refuse(f'"{name}" must be an integer, not {_kind(value)}')
    if value < lowest:
      raise _refuse(f'"{name}" must be at least {lowest}, not {value}')
    if highest is not None and value > highest:
      beyond = f' (nplm serve --{flag})' if flag else ''
      raise _refuse(f'"{name}" is {value:,}; the limit is {highest:,}{beyond}')
    return value
  read.default = default
  return read


def number(default: float, lowest: float, highest: float | None = None,
           above_lowest: bool = False, below_highest: bool = False,
           meaning: str = '') -> Callable:
  """A finite number from `lowest` (or above it) to `highest` (or below it); `meaning` says
  what the bounds mean in the refusal."""
  def read(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
        value):
      raise _refuse(f'"{name}" must be a finite number, not {_kind(value)}')
    if (value <= lowest if above_lowest else value < lowest) or (highest is not None and (
        value >= highest if below_highest else value > highest)):
      low = f'above {lowest:g}' if above_lowest else f'at least {lowest:g}'
      high = '' if highest is None else (f' and below {highest:g}' if below_highest
                                         else f' and at most {highest:g}')
      raise _refuse(f'"{name}" must be {low}{high}{meaning}, not {value:g}')
    return float(value)
  read.default = default
  return read


def boolean(default: bool) -> Callable:
  def read(name, value):
    if not isinstance(value, bool):
      raise _refuse(f'"{name}" must be true or false, not {_kind(value)}')
    return value
  read.default = default
  return read


def fields_of(limits: Limits, alpha: float = ALPHA) -> dict[str, dict[str, Callable]]:
  """Each endpoint's fields: name -> reader (its `default`; None: required); `alpha`:
  /correct's where none is given (the channel's, correction.default_alpha)."""
  k = integer(10, 1, limits.k, 'max_k')
  return {
      'score': {'texts': texts(limits), 'tokens': boolean(False)},
      'rank': {'texts': texts(limits, fewest=2)},
      'predict': {'prefix': text(limits, ''), 'k': k, 'typos': boolean(False)},
      'complete': {'prefix': text(limits, ''), 'k': k,
                   'max_words': integer(min(DEFAULT_MAX_WORDS, limits.max_words), 1,
                                        limits.max_words, 'max_completion_words'),
                   'typos': boolean(True)},
      'generate': {'prompt': text(limits, ''),
                   'length': integer(min(50, limits.length), 1, limits.length, 'max_length'),
                   'temperature': number(1.0, 0.0, meaning=' (0: greedy)'),
                   'top_k': integer(0, 0),
                   'top_p': number(1.0, 0.0, 1.0, above_lowest=True, meaning=' (1: all tokens)'),
                   'seed': integer(0, 0), 'samples': integer(1, 1, limits.samples,
                                                             'max_samples'),
                   'sentences': integer(0, 0), 'no_unk': boolean(False),
                   'spell_unk': boolean(True), 'typos': boolean(False)},
      'correct': {'texts': texts(limits),
                  'alpha': number(alpha, 0.0, 1.0, above_lowest=True, below_highest=True,
                                  meaning=' (P(a word is typed as meant))'),
                  'second_edit': number(SECOND_EDIT, 0.0, 1.0, below_highest=True,
                                        meaning=' (P(a misspelt word has a second edit))'),
                  'max_changes': integer(min(MAX_CHANGES, limits.changes), 1, limits.changes,
                                         'max_corrected_words')},
  }


def parsed(body: bytes, fields: dict[str, Callable]) -> dict[str, Any]:
  """The request's fields, each read and bounded, the defaults filled in; a RequestError
  for malformed JSON, a body that is not an object, an unknown or missing field."""
  try:
    request = json.loads(body.decode('utf-8')) if body.strip() else {}
  except (UnicodeDecodeError, json.JSONDecodeError) as error:
    raise _refuse(f'the body is not JSON: {error}') from None
  if not isinstance(request, dict):
    raise _refuse(f'the body must be a JSON object of fields, not {_kind(request)}')
  unknown = sorted(set(request) - set(fields))
  if unknown:
    raise _refuse(f'unknown field "{unknown[0]}": this endpoint reads '
                  f'{", ".join(fields)}')
  values = {}
  for name, read in fields.items():
    if name in request:
      values[name] = read(name, request[name])
    elif read.default is None:
      raise _refuse(f'"{name}" is missing')
    else:
      values[name] = read.default
  return values


def _kind(value) -> str:
  return {dict: 'an object', list: 'a list', str: 'a string', bool: 'a boolean',
          type(None): 'null', int: 'a number', float: 'a number'}.get(type(value),
                                                                       type(value).__name__)
