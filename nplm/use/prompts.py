"""Typed text as a model reads it: its tokens and ids, the ones it reads as <unk>, and the word
being typed at its end.

Typed text is tokenized as the model's dataset was (`model.tokenizer`); a token outside the
vocabulary is read as `<unk>`, the class of every rare word, and named to the user
(`unknown_note`).

A prefix may end inside a word, as a search box's does while the word is typed
(`read_typing`). nplm predict, complete and generate (and nplm serve's answers) then read the
prefix without that word, and what follows it spells the word out first (`Spelling`), so that
its probability is the word's, what was typed of it included:
  where each token is a word, a last word with no space after it that the vocabulary lacks
    but begins words of ("the old m"): the next word is one of those ("man", "men");
    nplm predict lists them, nplm generate draws one; nplm complete also reads one that may
    be a misspelt beginning ("the jury recie": nplm.use.prefix_channel), and, as a search
    box does, a word of the vocabulary ("the off": "off" itself, "office", "officer"; the
    other two read it as a whole word, whose next word is asked for);
  for learned subwords, the last word with no space after it (token healing, Lundberg
    2023): its pieces as typed ("▁chur" may be "▁ch" "ur") are seldom the ones the model saw
    that word cut into ("▁church"), so what follows spells out what was typed in any pieces
    ("▁church", or "▁J" "ury" for "▁Ju"), then goes on as any text does (nplm complete's
    search weighs each spelling by its probability; what reads one token at a time weighs
    each by nplm.use.spelling_weights);
  for characters nothing is read back: typed characters are the model's own tokens.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np

from nplm.data.tokenizers import Tokenization
from nplm.data.vocab import UNK

SPELLINGS_KEPT = 64  # Spelling's masks kept: one per rest of a typed word, a few per prefix.


@dataclasses.dataclass(frozen=True)
class Prompt:
  """Typed text as the model reads it."""
  text: str
  tokens: list[str]  # As typed, tokenized.
  ids: np.ndarray  # int32: each token's id, <unk>'s for a token outside the vocabulary.
  unknown: list[str]  # The typed tokens read as <unk>, each once, in order.
  only_unknown: bool  # Every token was read as <unk> (and there is one at least).
  # Where typos were read (nplm.use.correction's Corrector.read): its changes to the typed
  # tokens (each a Change: position, typed, corrected) and the text as read, the typed
  # text with only the changed words replaced (a text in capitals: the tokens as read).
  changes: tuple = ()
  read_as: str | None = None


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


def correction_note(prompt: Prompt) -> str | None:
  """The line telling the user how typos (and capitals) in the text were read, or None
  where it was read as typed."""
  if prompt.read_as is None:
    return None
  changed = ', '.join(f'{change.typed} -> {change.corrected}' for change in prompt.changes)
  return f'{prompt.text!r}: read as {prompt.read_as!r}' + (f' ({changed})' if changed else '')


@dataclasses.dataclass(frozen=True)
class Typing:
  """A prefix read with the word being typed at its end apart."""
  prompt: Prompt  # The prefix as the model reads it, without that word.
  tokens: list[str]  # That word's tokens as typed; [] where the prefix ends in none.

  @property
  def spelling(self) -> str:
    """What follows spells out first, in its tokens' text (a subword's '▁' included)."""
    return ''.join(self.tokens)


def read_typing(model, text: str, reaches: Callable[[str], bool] | None = None,
                search_box: bool = False) -> Typing:
  """`text` read with the word being typed at its end apart (the module docstring's rule);
  where each token is a word, also a last word that no word begins but `reaches` takes
  (nplm complete's typos: one it may be a misspelt beginning of). A `search_box` (nplm
  complete) reads a last word of the vocabulary with no space after it as typed too: "the
  off" may be on its way to "office", or be "off"."""
  prompt = read_prompt(model, text)
  tokenization = Tokenization.of(model.config)
  if not prompt.tokens or text[-1].isspace():
    return Typing(prompt, [])
  if tokenization.learned:
    cut = _last_word_start(model.tokenizer, prompt.tokens)
    if (prompt.ids[cut:] == model.vocab.unk_id).any():  # No pieces spell it.
      return Typing(prompt, [])
  elif tokenization.tokens == 'words':
    typed, cut = prompt.tokens[-1], len(prompt.tokens) - 1
    known = typed not in prompt.unknown
    if known and not (search_box and any(c.isalnum() for c in typed)):
      return Typing(prompt, [])  # A whole word, or punctuation: read as typed.
    if not (known or Spelling(model).allowed(typed).any()
            or reaches is not None and reaches(typed)):
      return Typing(prompt, [])
  else:
    return Typing(prompt, [])
  return Typing(prompt_of(model, text, prompt.tokens[:cut]), prompt.tokens[cut:])


def _last_word_start(tokenizer, tokens: list[str]) -> int:
  """Where the last whitespace word of the tokens' text begins: the first of the last
  tokens whose text is one word."""
  cut = len(tokens) - 1
  while cut and len(tokenizer.detokenize(tokens[cut - 1:]).split()) == 1:
    cut -= 1
  return cut


class Spelling:
  """What may follow a prefix while the word being typed is spelt out, token by token."""

  def __init__(self, model):
    tokenization = Tokenization.of(model.config)
    self.whole_words = tokenization.tokens == 'words' and not tokenization.learned
    self.vocab, self.texts = model.vocab, np.asarray(model.vocab.words)
    self.taking_all = functools.lru_cache(SPELLINGS_KEPT)(self._taking_all)
    self.allowed = functools.lru_cache(SPELLINGS_KEPT)(self._allowed)

  def _taking_all(self, rest: str) -> np.ndarray:
    """Which tokens take all of `rest` ("▁church", or "rch" after "▁chu"), bool [|V|], not
    to be written to; <unk> never."""
    taking = np.char.startswith(self.texts, rest)
    taking[self.vocab.unk_id] = False
    return taking

  def pieces(self, rest: str) -> np.ndarray:
    """The subword tokens that spell a proper beginning of `rest` ("▁" or "▁c" of "▁chu"),
    ids; none for words."""
    if self.whole_words:
      return np.zeros(0, np.int32)
    ids = self.vocab.encode([rest[:i] for i in range(1, len(rest))])
    return ids[ids != self.vocab.unk_id]

  def _allowed(self, rest: str) -> np.ndarray:
    """Which tokens may come next while `rest` is left to spell, bool [|V|], not to be
    written to: one that takes all of it or spells a beginning of it."""
    allowed = self.taking_all(rest).copy()
    allowed[self.pieces(rest)] = True
    return allowed

  def rest_after(self, rest: str, token: int) -> str:
    """What is left to spell after `token`, one that `allowed(rest)` takes."""
    text = self.texts[token]
    return '' if text.startswith(rest) else rest[len(text):]
