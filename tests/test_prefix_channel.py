"""The channel of a word being typed (nplm.use.prefix_channel): P(t | w) against the max over
every prefix of w of P(t | prefix), each summed over every path of slips
(tests/test_spelling_channel.py's count) within the edits t's length allows."""

import functools
import math

import numpy as np
import pytest

from nplm.use.prefix_channel import PrefixChannel
from nplm.use.spelling_channel import Channel
from tests.test_spelling_channel import distance, slips, strings_up_to

ALPHABET = 'abc-'
WORDS = ('<unk>', 'cab', 'abba', 'abcabc', 'bacca', 'a-b', 'ccc', '</p>')


def allowed_edits(typed: str) -> int:
  return 0 if len(typed) < 3 else 1 if len(typed) < 6 else 2


@functools.lru_cache(None)
def paths(prefix: str, alpha: float, second: float) -> dict[str, float]:
  return slips(prefix, alpha, second, ALPHABET)


def within(typed: str, prefix: str) -> bool:
  """Whether edits in any order, as many as typed's length allows, make typed of prefix:
  the strings that two slips reach, for two."""
  edits = allowed_edits(typed)
  return (typed == prefix if edits == 0 else distance(typed, prefix) <= 1 if edits == 1
          else typed in paths(prefix, 0.5, 0.5))


def brute_force(typed: str, alpha: float, second: float, words=WORDS) -> np.ndarray:
  """ln max over the prefixes u of each word (<unk> and '</p>' none) of P(typed | u), u
  within the edits typed's length allows and its '-' where typed's are."""
  best = np.full(len(words), -math.inf)
  for i, word in enumerate(words[1:-1], 1):
    for end in range(1, len(word) + 1):
      prefix = word[:end]
      p = paths(prefix, alpha, second).get(typed)
      if (within(typed, prefix) and p
          and [c for c in prefix if c == '-'] == [c for c in typed if c == '-']):
        best[i] = max(best[i], math.log(p))
  return best


@pytest.mark.parametrize('second', [0.0, 0.3])
def test_each_word_gets_its_likeliest_prefix_within_the_edits_its_length_allows(second):
  channel = Channel(ALPHABET, 0.9, second)
  typable = np.array([w not in ('<unk>', '</p>') for w in WORDS])
  prefixes = PrefixChannel(channel, WORDS, typable)
  reached = 0
  for typed in strings_up_to(6, 'abc') + ['a-', 'a-c', 'ab-', 'bca-b', 'zab', 'cabz']:
    want = brute_force(typed, 0.9, second)
    got = prefixes.log_probs(typed)
    assert np.array_equal(np.isinf(got), np.isinf(want)), typed
    np.testing.assert_allclose(got[np.isfinite(want)], want[np.isfinite(want)], rtol=1e-12,
                               err_msg=typed)
    assert prefixes.reaches(typed) == bool(np.isfinite(want).any())
    reached += np.isfinite(want).any()
  assert reached > 100  # Most typed strings reach a word: the comparison is not empty.
  begun = prefixes.log_probs('ab')  # Too short for an edit: the words it begins, at P(t | t).
  assert np.flatnonzero(np.isfinite(begun)).tolist() == [2, 3]
  np.testing.assert_allclose(begun[[2, 3]], math.log(slips('ab', 0.9, second, ALPHABET)['ab']))


def test_a_word_typed_in_capitals_is_compared_in_its_letters_alone():
  """'CA' may begin 'cab' and 'Cab' alike, at P(ca | ca): capitals say nothing of the case
  meant; a word typed with one capital is compared as written ('Ca' begins 'Cab' alone)."""
  words = ('<unk>', 'cab', 'Cab', 'ABba', 'abcabc', 'Bacca', 'a-b', '</p>')
  channel = Channel(ALPHABET, 0.9, 0.3)
  prefixes = PrefixChannel(channel, words, np.array([w not in ('<unk>', '</p>') for w in words]))
  lowered = tuple(w.lower() for w in words)
  typed_strings = [t.upper() for t in strings_up_to(5, 'abc') if len(t) >= 2] + ['A-B', 'CABZ']
  for typed in typed_strings:
    want = brute_force(typed.lower(), 0.9, 0.3, lowered)
    got = prefixes.log_probs(typed)
    assert np.array_equal(np.isinf(got), np.isinf(want)), typed
    np.testing.assert_allclose(got[np.isfinite(want)], want[np.isfinite(want)], rtol=1e-12,
                               err_msg=typed)
  assert np.flatnonzero(np.isfinite(prefixes.log_probs('CA'))).tolist() == [1, 2]
  assert np.flatnonzero(np.isfinite(prefixes.log_probs('Ca'))).tolist() == [2]
  # One capital after text in capitals (in_letters): compared in its letters too.
  assert np.flatnonzero(np.isfinite(prefixes.log_probs('C'))).tolist() == [2]
  np.testing.assert_array_equal(prefixes.log_probs('C', True), brute_force('c', 0.9, 0.3, lowered))
  assert prefixes.reaches('C', True) and not prefixes.reaches('A-', False)
  assert np.flatnonzero(np.isfinite(prefixes.log_probs('AB'))).tolist() == [3, 4]
