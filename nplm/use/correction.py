"""Spelling correction with a language model: the noisy channel of Mays, Damerau and Mercer
(1991), over the open vocabulary.

A typed sentence x = x_1 … x_n was meant as some w = w_1 … w_n, and the correction is

    ŵ = argmax_w  P(w) · Π_i P(x_i | w_i)

with P(w) the model's probability of the sentence (open: an unknown word w_i costs
p(<unk> | h) · q(w_i), so a name typed right can stay) and P(x | w) the channel of
nplm.use.spelling_channel: a word typed as meant with probability α, else with one edit
(Damerau 1964: a letter inserted, deleted, replaced, or two adjacent letters swapped), and
with probability γ a second (Mays, Damerau and Mercer's channel is γ = 0); each edit drawn
uniformly, or as often as a list of misspellings makes it (nplm.use.learned_channel, as
Kernighan, Church and Gale 1990). The candidates
for x_i are x_i itself and the vocabulary's words one edit from it, and two edits for an x_i
outside the vocabulary; so a non-word ("hom") and a real word that the context rejects
("minuets" in "about 15 minuets from") are corrected alike. The search is greedy, as one
error a sentence is Mays et al.'s case: each round scores every sentence that changes one
more word (all of them at once, only the tokens a change reaches, those no change has reached
since not again; a recurrent model's read a few tokens on and screened, the best read whole:
nplm.use.variants) and keeps the best while it gains, at most
`max_changes` rounds, `max_changes` more for each SENTENCE_TOKENS tokens begun after the
first (text without end marks, a transcript or a chat, is one long sentence). Only words
(tokens with a letter in them) are changed, and only in their letters: punctuation, digits
and end marks stay as typed. Text of several sentences ("It was recieved. He has no
monney.") is corrected a sentence at a time, each read alone from a sentence's start, with
`max_changes` of its own: ln P(w) is then the sum of the sentences' own, as nplm score would
score each.

A sentence typed in capitals ("THE GOVERMENT SAID": caps lock, a headline; no small letter
in it) says nothing of the case of the words meant: each word's channel compares letters
alone, P(x | w) = P(lower(x) | lower(w)), so its candidates are the vocabulary's words in any
case one or two edits from it ("government", "Government"), and before the search each word
is read as the form of it in the vocabulary that makes the sentence likeliest ("THE" as "The"
or "the", each tried in turn, a word at a time: the truecasing of Lita et al. 2003). Such a
reading is no change: the corrected text is written in capitals as typed ("THE GOVERNMENT
SAID"). In a sentence with small letters, capitals are the writer's ("the FBI", "it was VERY
late"), as a capital first letter is.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import numpy as np

from nplm.data.tokenizers import Tokenization, token_kind
from nplm.data.vocab import SPECIAL_TOKENS
from nplm.errors import ConfigError
from nplm.use.generation import closing, end_ids
from nplm.use.learned_channel import LEARNED_ALPHA, learned_channel
from nplm.use.prefix_channel import PrefixChannel
from nplm.use.prompts import Typing, prompt_of, read_typing
from nplm.use.spelling_channel import ALPHA, SECOND_EDIT, Channel, in_capitals, near_words
from nplm.use.variants import VariantSearch, variant_log_probs

MAX_CHANGES = 2  # Words changed per sentence at most, by default.
# Sentences whose corrections are kept: a search box's finished ones, a file's repeated ones.
SENTENCES_KEPT = 256
WORDS_KEPT = 1 << 16  # Typed words whose candidates are kept.
# A sentence of more tokens (text without end marks: a transcript, a chat) has max_changes
# for each SENTENCE_TOKENS begun. Brown's test sentences average 16 tokens; a quarter have
# more than 20, and their corrections are the same as under max_changes alone
# (experiments/results/misspellings/README.md).
SENTENCE_TOKENS = 20
_SENTENCE_MARKS = frozenset('.!?')
# The Corrector's settings when none is given (nplm serve keeps a corrector of these); α
# None: default_alpha's.
DEFAULT_SETTINGS = {'alpha': None, 'max_changes': MAX_CHANGES, 'second_edit': SECOND_EDIT}


def default_alpha(learned: bool) -> float:
  """α where none is given: the uniform channel's, or the learned one's."""
  return LEARNED_ALPHA if learned else ALPHA


def model_channel(model, alpha: float | None = None, second_edit: float = SECOND_EDIT,
                  misspellings: Sequence[tuple[str, str]] = ()) -> Channel:
  """The channel over the alphabet of the model's words: uniform, or learned from
  `misspellings` (nplm.use.learned_channel); α None: default_alpha's."""
  alphabet = ''.join(sorted({c for w in model.vocab.words if w not in SPECIAL_TOKENS
                             for c in w}))
  alpha = default_alpha(bool(misspellings)) if alpha is None else alpha
  return (learned_channel(tuple(misspellings), alphabet, alpha, second_edit)
          if misspellings else Channel(alphabet, alpha, second_edit))


def typed_in_capitals(tokens: Sequence[str]) -> bool:
  """Whether a sentence is typed in capitals: a word in capitals and no small letter."""
  return any(map(in_capitals, tokens)) and not any(c.islower() for t in tokens for c in t)


def reads_words(model) -> bool:
  """Whether the model's tokens are typed words (whitespace's, NLTK's, Brown's; lowercased
  or not), the only ones a typo is corrected in."""
  tokenization = Tokenization.of(model.config)
  return tokenization.tokens == 'words' and not tokenization.learned


def sentence_spans(typed: Sequence[str]) -> list[tuple[int, int]]:
  """(first, stop) of each sentence of the typed tokens: one ends after a token of
  sentence marks alone ('.', '?!', '...'), with the closing quotes and brackets and the
  marks after it, where more follows. A word tokenizer cuts "said." into "said ." but keeps
  "Mr." and "3.5" whole: they end none."""
  spans, first, marked = [], 0, False
  for i, token in enumerate(typed):
    mark = bool(token) and set(token) <= _SENTENCE_MARKS
    if marked and not (mark or closing(token)):
      spans.append((first, i))
      first = i
    marked = mark or (marked and closing(token))
  return [*spans, (first, len(typed))]


@dataclasses.dataclass(frozen=True)
class Change:
  position: int  # Which token of the sentence.
  typed: str
  corrected: str


@dataclasses.dataclass(frozen=True)
class Correction:
  text: str  # As typed.
  tokens: tuple[str, ...]  # The corrected tokens.
  corrected: str  # `text` with only the changed words replaced (see Corrector._rewritten).
  changes: tuple[Change, ...]
  log_prob: float  # ln P(w) · Π P(x | w) of the correction.
  typed_log_prob: float  # The same for the sentence as typed (no change).

  def as_dict(self) -> dict:
    return {'text': self.text, 'corrected': self.corrected,
            'changes': [dataclasses.asdict(change) for change in self.changes],
            'log_prob': self.log_prob, 'typed_log_prob': self.typed_log_prob}


class Corrector:
  """The corrections of sentences under one model (each typed word's candidates and the
  channel's values found once)."""

  def __init__(self, model, alpha: float | None = None, max_changes: int = MAX_CHANGES,
               second_edit: float = SECOND_EDIT, misspellings: Sequence[tuple[str, str]] = ()):
    if not reads_words(model):
      raise ConfigError('spelling correction reads words: this model reads '
                        f'{token_kind(model.config)}; use a word-level run')
    if max_changes < 1:
      raise ConfigError(f'--max_changes must be at least 1, not {max_changes}')
    self.channel = model_channel(model, alpha, second_edit, misspellings)
    words = sorted(w for w in model.vocab.words if w not in SPECIAL_TOKENS)
    self.model, self.max_changes = model, max_changes
    self.words, self._searched = frozenset(words), tuple(words)
    # Caches of this corrector's own: one of the class's would keep every corrector it
    # served alive (nplm serve builds one per request of other settings).
    self.candidates = functools.lru_cache(WORDS_KEPT)(self._candidates)
    self._corrected_sentence = functools.lru_cache(SENTENCES_KEPT)(self._searched_sentence)

  @functools.cached_property
  def prefix_channel(self) -> PrefixChannel:
    """P(typed | w) of a word being typed, the likeliest prefix of w typed through the
    channel (nplm.use.prefix_channel), for each word one types (no end mark, no <unk>)."""
    vocab = self.model.vocab
    typable = np.arange(vocab.size) != vocab.unk_id
    typable[end_ids(self.model)] = False
    return PrefixChannel(self.channel, vocab.words, typable)

  def typing(self, text: str, search_box: bool = False) -> Typing:
    """`text` read with the word being typed at its end apart (nplm.use.prompts.read_typing,
    with its `search_box`), an unknown last word that no word begins but the prefix channel
    reaches too, and the words before it corrected (`read`)."""
    reaches = functools.partial(self.prefix_channel.reaches, in_letters=self.in_letters(text))
    return self.read(read_typing(self.model, text, reaches, search_box))

  def in_letters(self, text: str) -> bool:
    """Whether the word being typed at the end of `text` is compared in its letters: the
    text is in capitals (typed_in_capitals), so one capital typed of it ('THE JURY R') says
    nothing of its case either."""
    return typed_in_capitals(self.model.tokenizer.tokens(text))

  @functools.cached_property
  def _forms(self) -> dict[str, tuple[str, ...]]:
    """A word in capitals -> the vocabulary's words it writes, the most frequent first:
    built when a text in capitals first comes, not for every corrector."""
    forms = {}
    for word in self.model.vocab.words:  # In id order: by training frequency.
      if word not in SPECIAL_TOKENS:
        forms.setdefault(word.upper(), []).append(word)
    return {capitals: tuple(found) for capitals, found in forms.items()}

  @functools.cached_property
  def _searched_in_capitals(self) -> tuple[str, ...]:
    return tuple(sorted(self._forms))

  def _candidates(self, typed: str, in_letters: bool = False) -> tuple[str, ...]:
    """The vocabulary's words one edit of a letter from `typed` (near_words); two edits for
    a word outside it where the channel reaches them. A word in the vocabulary is not
    searched two edits away: such a slip is seldom a real word, and a short word has
    hundreds of words two edits from it, each a sentence to score. Those the channel cannot
    have typed as `typed` (a character outside the vocabulary's, 'Zürich' for 'Zurich') are
    left out, and so is a word that differs from `typed` in its case alone where a capital
    was typed: the writer's ('The' is not 'the'); 'i' may be 'I'. `in_letters` (a word
    of a sentence in capitals): the words one edit (two) from it in letters, in any case;
    its own forms are read before the search (_read_in_capitals)."""
    if in_letters:
      most_edits = 1 if typed in self._forms else self.channel.most_edits
      near = near_words(typed, self._searched_in_capitals, most_edits)
      return tuple(word for capitals in near for word in self._forms[capitals]
                   if self._channel(typed, word, True) > -math.inf)
    most_edits = 1 if typed in self.words else self.channel.most_edits
    capitals = typed != typed.lower()
    return tuple(word for word in near_words(typed, self._searched, most_edits)
                 if not (capitals and word.casefold() == typed.casefold())
                 and self.channel.log_prob(typed, word) > -math.inf)

  def _channel(self, typed: str, meant: str, in_letters: bool) -> float:
    """ln P(typed | meant), `in_letters` (a word of a sentence in capitals) compared in its
    letters alone."""
    if in_letters:
      return self.channel.log_prob(typed.lower(), meant.lower())
    return self.channel.log_prob(typed, meant)

  def correct(self, text: str, ended: bool = True) -> Correction:
    """The correction of a sentence; not `ended`, of the beginning of one (a prefix being
    typed: no end mark scored after it)."""
    typed = tuple(self.model.tokenizer.tokens(text))
    if not typed:
      raise ConfigError(f'nothing to correct in {text!r}: it holds no words')
    tokens, changes, best, start = self.corrected_tokens(typed, ended)
    return Correction(text, tokens, self._rewritten(text, typed, tokens, changes), changes,
                      best, start)

  def corrected_tokens(self, typed: tuple[str, ...], ended: bool = True
                       ) -> tuple[tuple[str, ...], tuple[Change, ...], float, float]:
    """(the corrected tokens, the changes, ln P(w) P(typed | w) of the correction and of
    the tokens as typed): each sentence of `typed` (sentence_spans) corrected alone, all but
    the last ended. The tokens are what the model read: a word in capitals in the case the
    model knows it in, changed or not."""
    tokens, changes, best, start = (), (), 0.0, 0.0
    spans, marked = sentence_spans(typed), self.model.sentence_end is not None
    for number, (first, stop) in enumerate(spans):
      # Unmarked, a sentence is read alike ended or not: one correction kept for both.
      ends = marked and (ended or number < len(spans) - 1)
      got = self._corrected_sentence(typed[first:stop], ends)
      tokens += got[0]
      changes += tuple(dataclasses.replace(change, position=change.position + first)
                       for change in got[1])
      best, start = best + got[2], start + got[3]
    return tokens, changes, best, start

  def read(self, typing: Typing) -> Typing:
    """`typing` with typos read (nplm complete's, and predict's and generate's --typos): the
    tokens before the word being typed corrected as the beginning of a sentence is (no end
    scored after them), its prompt's tokens those, with the changes and the text as read;
    the word being typed stays as typed, what follows spells it out. A sentence in capitals
    is read in the vocabulary's case, changed or not: the text as read is then the tokens
    the model reads ("The jury said", not "THE JURY SAID")."""
    typed = tuple(typing.prompt.tokens)
    tokens, changes, _, _ = self.corrected_tokens(typed, ended=False) if typed else ((), (), 0, 0)
    if tokens == typed:
      return typing
    text, rest = typing.prompt.text, tuple(typing.tokens)
    changed = {change.position for change in changes}
    cased = any(t != x for i, (t, x) in enumerate(zip(tokens, typed)) if i not in changed)
    read_as = (self.model.tokenizer.detokenize(list(tokens + rest)) if cased
               else self._rewritten(text, typed + rest, tokens + rest, changes))
    prompt = dataclasses.replace(prompt_of(self.model, text, list(tokens)),
                                 changes=changes, read_as=read_as)
    return dataclasses.replace(typing, prompt=prompt)

  def _searched_sentence(self, typed: tuple[str, ...], ended: bool
                         ) -> tuple[tuple[str, ...], tuple[Change, ...], float, float]:
    """corrected_tokens of one sentence: the module docstring's search, from its words in
    capitals read."""
    # A sentence in capitals: its words read in their letters.
    lock = typed_in_capitals(typed)
    in_letters = [lock and x != x.lower() for x in typed]
    tokens, current = self._read_in_capitals(typed, in_letters, ended)
    changes, start = (), None  # current: ln p of each token of `tokens` (and of an end mark).
    read = tokens
    channel = sum(map(self._channel, typed, read, in_letters))
    search = VariantSearch(self.model, ended)
    for _ in range(self.max_changes * -(-len(typed) // SENTENCE_TOKENS)):
      changed = {change.position for change in changes}
      variants = [(i, word) for i, x in enumerate(typed) if i not in changed
                  for word in self.candidates(x, in_letters[i])]
      gains = [self._channel(typed[i], word, in_letters[i])
               - self._channel(typed[i], read[i], in_letters[i]) for i, word in variants]
      addends = [channel + gain for gain in gains]
      current, top, scored = search.best(tokens, current, variants, addends)
      if start is None:  # The sentence as typed, scored in the first round's call.
        best = start = current.sum() + channel
      if top is None:
        break
      total = scored.sum() + addends[top]
      if total <= best:
        break
      i, word = variants[top]
      tokens = tokens[:i] + (word,) + tokens[i + 1:]
      best, channel, current = total, channel + gains[top], scored
      changes = tuple(sorted((*changes, Change(i, typed[i], word)), key=lambda c: c.position))
      search.changed(i)
    return tokens, changes, float(best), float(start)

  def _read_in_capitals(self, typed: tuple[str, ...], in_letters: Sequence[bool],
                        ended: bool) -> tuple[tuple[str, ...], np.ndarray | None]:
    """The typed tokens with each word `in_letters` read as one of its forms, the
    vocabulary's words it writes (a word outside it: in lower case, or capitalized, an
    unknown word whose spelling the model weighs as such), the first, then each in turn
    (from the first) as whichever of them makes the sentence likeliest; and the ln p of each
    token so read (None where none has two forms)."""
    forms = [self._case_forms(x) if letters else () for x, letters in zip(typed, in_letters)]
    tokens = tuple(found[0] if found else x for x, found in zip(typed, forms))
    current = None
    for i, found in enumerate(forms):
      if len(found) < 2:
        continue
      others = [(i, word) for word in found if word != tokens[i]]
      current, scored = variant_log_probs(self.model, tokens, current, others, ended)
      totals = [log_probs.sum() for log_probs in scored]
      top = max(range(len(totals)), key=totals.__getitem__)
      if totals[top] > current.sum():
        tokens = tokens[:i] + (others[top][1],) + tokens[i + 1:]
        current = scored[top]
    return tokens, current

  def _case_forms(self, typed: str) -> tuple[str, ...]:
    """What a word typed in capitals may be read as (_read_in_capitals'), the likeliest a
    priori first."""
    return self._forms.get(typed, (typed.lower(), typed.capitalize()))

  def _rewritten(self, text: str, typed: Sequence[str], tokens: Sequence[str],
                 changes: Sequence[Change]) -> str:
    """`text` as typed with only the changed words replaced (its spacing, punctuation and
    case kept; a word typed capitalized stays so, one in capitals in capitals), where the
    typed tokens are found in it in order (case aside; a token the tokenizer rewrote, a
    quote as ``, is passed over); else the corrected tokens as the tokenizer writes them."""
    spans, cursor, folded = [], 0, text.casefold()
    for token in typed:
      start = folded.find(token.casefold(), cursor)
      spans.append(None if start < 0 else (start, start + len(token)))
      cursor = cursor if start < 0 else start + len(token)
    if any(spans[change.position] is None for change in changes):
      return self.model.tokenizer.detokenize(list(tokens))
    capitals = typed_in_capitals(text.split())  # 'A' too is then a word in capitals.
    for change in sorted(changes, key=lambda c: -c.position):
      start, end = spans[change.position]
      # The case the text has there (a --lowercase model's tokens have none).
      word, written = change.corrected, text[start:end]
      if in_capitals(written) or (capitals and written.isupper()):
        word = word.upper()
      elif written[:1].isupper() and word[:1].islower():
        word = word[:1].upper() + word[1:]
      text = text[:start] + word + text[end:]
    return text
