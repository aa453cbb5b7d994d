"""The noisy channel of a word being typed, as a search box reads it: P(t | w), for t what has
been typed so far of the word w meant (nplm complete's typos: "the jury recie" is completed
"the jury received ...").

Someone meaning w who has typed part of it meant a prefix u of w, and typed u through the
channel of nplm.use.spelling_channel (as meant with probability α; else a slip of an edit
or two, each drawn uniformly or as often as a list of misspellings makes it). Which prefix is
not known, and the channel takes the likeliest:

    P(t | w) = max_{u a prefix of w} P(t | u)

the prefix edit distance of Chaudhuri and Kaushik (2009), the fewest edits from t to a
prefix of w, weighed by the channel. A max, not a sum: t is one typing of one prefix, and
a sum would count a long word once for each of its prefixes near t. A t that begins w
has P(t | t) (α and a little more, the slips that come back to t).

How far t may be from u grows with its length, as Elasticsearch's fuzziness "AUTO": no edit
under 3 characters (two edits reach nearly every short prefix), one to 5, two from 6 (as
far as the channel reaches). t keeps its characters that are not letters, as nplm correct's
words do. A t in capitals ("RECIE", or "R" after "THE JURY") is compared in its letters
alone, P(t | w) = P(lower(t) | lower(w)), as nplm correct compares the words of a sentence
in capitals: it says nothing of the case of w.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import DamerauLevenshtein

from nplm.use.spelling_channel import Channel, in_capitals, non_letters

# Typed strings whose P(t | w) over the vocabulary is kept: a completion reads one, and at
# 8 bytes a word each, many would weigh on a vocabulary of a million words.
PREFIXES_KEPT = 8
_LAST = chr(0x10FFFF)  # After every character: prefix + _LAST is after every word it begins.


def most_edits(typed: str, channel: Channel) -> int:
  """How many edits from `typed` a prefix it was meant as may be (the module docstring's)."""
  allowed = 0 if len(typed) < 3 else 1 if len(typed) < 6 else 2
  return min(allowed, channel.most_edits)


class PrefixChannel:
  """ln P(t | w) of the module docstring for every word of a vocabulary."""

  def __init__(self, channel: Channel, words: Sequence[str], typable: np.ndarray):
    """`words`: the vocabulary's, by id; `typable`: bool [|V|], the words one types (no
    end mark, no <unk>)."""
    self.channel, self.size, self._words = channel, len(words), words
    self._typed_ids = np.flatnonzero(typable)
    self.as_written = _Beginnings(words, self._typed_ids, str)
    self.log_probs = functools.lru_cache(PREFIXES_KEPT)(self._log_probs)

  @functools.cached_property
  def in_letters(self) -> _Beginnings:
    """The words in lower case, for a t in capitals: sorted when one first comes."""
    return _Beginnings(self._words, self._typed_ids, str.lower)

  def _log_probs(self, typed: str, in_letters: bool = False) -> np.ndarray:
    """ln P(typed | w) of each word w, float64 [|V|], -inf where no prefix of w is within
    reach, compared in letters where `typed` is in capitals or `in_letters` (the text before
    it is); not to be written to."""
    log_probs = np.full(self.size, -np.inf)
    words = self.in_letters if in_letters or in_capitals(typed) else self.as_written
    typed = words.key(typed)
    for prefix in self.meant_prefixes(typed, words):
      ids = words.beginning(prefix)
      log_probs[ids] = np.maximum(log_probs[ids], self.channel.log_prob(typed, prefix))
    return log_probs

  def meant_prefixes(self, typed: str, words: _Beginnings) -> list[str]:
    """The prefixes of the `words` that `typed` may have been meant as: within most_edits
    of it (rapidfuzz, over the prefixes of each length within reach, in C), its characters
    that are not letters unchanged, the channel reaching it."""
    edits = most_edits(typed, self.channel) if any(c.isalpha() for c in typed) else 0
    near = [prefix for length in range(max(1, len(typed) - edits), len(typed) + edits + 1)
            for prefix, _, _ in process.extract(
                typed, words.prefixes_of_length(length), scorer=DamerauLevenshtein.distance,
                score_cutoff=edits, limit=None)]
    return [prefix for prefix in near
            if non_letters(prefix) == non_letters(typed)
            and self.channel.log_prob(typed, prefix) > -np.inf]

  def reaches(self, typed: str, in_letters: bool = False) -> bool:
    """Whether some word may be the one `typed` begins (log_probs' `in_letters`)."""
    return bool(np.isfinite(self.log_probs(typed, in_letters)).any())


class _Beginnings:
  """The words that each prefix begins, the words compared by `key` (as written, or in
  lower case): sorted by it, the words a prefix begins are a run, found by bisection, with no
  table of every prefix (millions for a vocabulary of a million words)."""

  def __init__(self, words: Sequence[str], ids: np.ndarray, key):
    self.key = key
    self.ids = np.array(sorted(ids, key=lambda i: key(words[i])), np.int64)
    self.sorted_keys = [key(words[i]) for i in self.ids]
    self.prefixes_of_length = functools.lru_cache(None)(self._prefixes_of_length)

  def _prefixes_of_length(self, length: int) -> tuple[str, ...]:
    """The distinct prefixes of that many characters of the words, built when first asked."""
    return tuple(dict.fromkeys(w[:length] for w in self.sorted_keys if len(w) >= length))

  def beginning(self, prefix: str) -> np.ndarray:
    """The ids of the words that `prefix` begins."""
    first = bisect.bisect_left(self.sorted_keys, prefix)
    return self.ids[first:bisect.bisect_left(self.sorted_keys, prefix + _LAST, first)]
