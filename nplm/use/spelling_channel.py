"""The noisy channel of spelling correction: P(typed | meant), and the words a typed string
may have meant (nplm.use.correction searches over them).

A word w is typed as meant with probability α. Otherwise it slips: one edit (Damerau 1964:
a letter inserted, deleted, replaced, or two adjacent letters swapped), drawn uniformly from
E(w), the strings one edit from w over the alphabet of the vocabulary's words; after that
slip, with probability γ, one more, drawn uniformly from E(y) of the string y it made. So

    P(x | w) = α [x = w] + (1 - α) / |E(w)| · ((1 - γ) [x ∈ E(w)]
                                               + γ Σ_{y ∈ E(w), x ∈ E(y)} 1 / |E(y)|)

(the y with x in E(y) are `sources` of x; E(x) itself where x and y are over the alphabet).
With γ = 0 it is the channel of Mays, Damerau and Mercer (1991); a typed character outside
the alphabet is no slip's. γ > 0 reaches the misspellings two edits away ("acommodate" for
"accommodate" is one edit, "greatful" for "grateful" two), as Norvig (2007) falls back to
them. The sum is exact: |E(y)| has a closed form (edit_count). Channel.slip is the one
edit's draw, P(x | one slip of w), here 1 / |E(w)|; nplm.use.learned_channel draws it by
rates learned from a list of misspellings.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Collection

from rapidfuzz import process
from rapidfuzz.distance import DamerauLevenshtein

from nplm.errors import ConfigError

ALPHA = 0.99  # P(a word is typed as meant): Mays et al. (1991) tried 0.9 to 0.9999.
SECOND_EDIT = 0.1  # γ: P(a slip has a second edit); experiments/results/misspellings.


def edits(word: str, alphabet: str) -> set[str]:
  """E(word): every string one edit from it, the word itself left out (Damerau 1964)."""
  splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
  deleted = {a + b[1:] for a, b in splits if b}
  swapped = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
  replaced = {a + c + b[1:] for a, b in splits if b for c in alphabet}
  inserted = {a + c + b for a, b in splits for c in alphabet}
  return (deleted | swapped | replaced | inserted) - {word}


def sources(typed: str, alphabet: str, others: str = '') -> set[str]:
  """Every string y with `typed` in E(y), y's characters in the alphabet and `others`: the
  reverse edits (a character of the alphabet deleted, any put in or replaced by one of the
  alphabet, two swapped). For a typed string and y over the alphabet alone it is E(typed)."""
  chars = alphabet + others
  splits = [(typed[:i], typed[i:]) for i in range(len(typed) + 1)]
  deleted = {a + b[1:] for a, b in splits if b and b[0] in alphabet}
  swapped = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
  replaced = {a + c + b[1:] for a, b in splits if b and b[0] in alphabet for c in chars}
  inserted = {a + c + b for a, b in splits for c in chars}
  return (deleted | swapped | replaced | inserted) - {typed}


def edit_count(word: str, alphabet: Collection[str]) -> int:
  """|E(word)| without building E: a deletion from a run of one character makes one string
  (r runs, r strings), a swap one per pair of unlike neighbours (r - 1), a replacement one per
  letter of the alphabet other than the one replaced, an insertion (n + 1) |alphabet| less
  one for each of the word's characters in the alphabet (it put beside itself makes one
  string); the four kinds never coincide (lengths, or the places changed, differ)."""
  if not word:
    return len(alphabet)
  runs = 1 + sum(map(operator.ne, word, word[1:]))
  n, known = len(word), sum(c in alphabet for c in word)
  replaced, inserted = n * len(alphabet) - known, (n + 1) * len(alphabet) - known
  return 2 * runs - 1 + replaced + inserted


def non_letters(word: str) -> list[str]:
  """Its characters that are not letters, in order: nplm correct and complete keep them as
  typed."""
  return [c for c in word if not c.isalpha()]


def near_words(typed: str, words: Collection[str], most_edits: int = 1) -> tuple[str, ...]:
  """The `words` at most `most_edits` edits of a letter from `typed`, sorted: its other
  characters stay as typed (a text cut at spaces keeps '"it' and 'fine".' as tokens, whose
  quotes are the writer's, not a misspelling of 'it' and 'fine.'), a word stays a word ('a.'
  is not '.'), and a capital first letter is the writer's ('Acquiring' is not 'acquiring': a
  sentence's first word; the corrected text keeps the capital, so the change would not
  show). rapidfuzz finds them: the Damerau-Levenshtein distance (edits in any order) over
  the words, in C."""
  if not any(c.isalpha() for c in typed):
    return ()
  lowered = typed[:1].lower() + typed[1:] if typed[:1].isupper() else None
  found = process.extract(typed, words, scorer=DamerauLevenshtein.distance,
                          score_cutoff=most_edits, limit=None)
  return tuple(sorted(w for w, _, _ in found
                      if w != typed and non_letters(w) == non_letters(typed)
                      and any(map(str.isalpha, w)) and w != lowered))


def in_capitals(token: str) -> bool:
  """Whether a token is typed in capitals: two cased letters or more, none small ('THE',
  'U.S.'; 'I' and 'A' are a word's usual case). Such a word says nothing of the case of the
  word meant."""
  return sum(c != c.lower() for c in token) >= 2 and token == token.upper()


@dataclasses.dataclass(frozen=True)
class Channel:
  """P(typed | meant) (the module docstring's) over one vocabulary's alphabet."""
  alphabet: str
  alpha: float = ALPHA
  second_edit: float = SECOND_EDIT

  def __post_init__(self):
    if not 0 < self.alpha < 1:
      raise ConfigError(f'--alpha must be in (0, 1), not {self.alpha}')
    if not 0 <= self.second_edit < 1:
      raise ConfigError(f'--second_edit must be in [0, 1), not {self.second_edit}')

  @property
  def most_edits(self) -> int:
    """How far a typed string can be from what was meant."""
    return 2 if self.second_edit else 1

  @functools.lru_cache(maxsize=1 << 16)
  def log_prob(self, typed: str, meant: str) -> float:
    """ln P(typed | meant); -inf beyond the channel's reach."""
    if typed == meant and not self.second_edit:
      return math.log(self.alpha)
    twice = self.two_slips(typed, meant) if self.second_edit else 0.0
    slipped = (1 - self.second_edit) * self.slip(typed, meant) + self.second_edit * twice
    p = self.alpha * (typed == meant) + (1 - self.alpha) * slipped
    return math.log(p) if p > 0 else -math.inf

  def two_slips(self, typed: str, meant: str) -> float:
    """P(a slip of a slip of `meant` makes `typed`) = Σ_y slip(y | meant) slip(typed | y) over
    the y between them, each drawn uniformly: 1/|E(meant)| · Σ_y 1/|E(y)|."""
    return sum(map(self._reciprocal_edits, self.between(typed, meant))) * (
        self._reciprocal_edits(meant))

  def slip(self, typed: str, meant: str) -> float:
    """P(one slip of `meant` makes `typed`): 1 / |E(meant)| for typed in E(meant)."""
    return self._one_edit(typed, meant) * self._reciprocal_edits(meant)

  @functools.lru_cache(maxsize=1 << 16)
  def _reciprocal_edits(self, word: str) -> float:
    """1 / |E(word)|: a typed prefix's second edits meet the same strings again and again."""
    return 1 / edit_count(word, self._letters)

  def _one_edit(self, typed: str, meant: str) -> bool:
    """typed ∈ E(meant): for a meant word over the alphabet, one edit apart and typed over it
    too (what an edit puts in is of the alphabet), found without building E."""
    if not set(meant) <= self._letters:
      return typed in self._edits(meant)
    return set(typed) <= self._letters and DamerauLevenshtein.distance(typed, meant) == 1

  def between(self, typed: str, meant: str) -> Collection[str]:
    """The y in E(meant) with typed in E(y). For a meant word over the alphabet, the sources
    of typed one edit from it and over the alphabet (rapidfuzz, in C); else E(meant) built."""
    letters = self._letters
    if typed == meant or not set(meant) <= letters:
      return self._edits(meant) & self._sources(typed, ''.join(sorted(set(meant) - letters)))
    chars = self.alphabet
    if DamerauLevenshtein.distance(typed, meant) == 2:
      # Each character of such a y is typed's or meant's: one that an edit put in and the
      # other took out would leave typed one edit from meant.
      chars = ''.join(c for c in self.alphabet if c in typed or c in meant)
    near = process.extract(meant, self._sources(typed, '', chars),
                           scorer=DamerauLevenshtein.distance, score_cutoff=1, limit=None)
    return [y for y, distance, _ in near if distance == 1 and set(y) <= letters]

  @functools.cached_property
  def _letters(self) -> frozenset[str]:
    return frozenset(self.alphabet)

  @functools.lru_cache(maxsize=256)  # Each about 1,500 strings: a few hundred kept.
  def _edits(self, word: str) -> frozenset[str]:
    return frozenset(edits(word, self.alphabet))

  @functools.lru_cache(maxsize=256)
  def _sources(self, typed: str, others: str, chars: str | None = None) -> frozenset[str]:
    """sources() over `chars` (a part of the alphabet; default all of it)."""
    return frozenset(sources(typed, self.alphabet if chars is None else chars, others))
