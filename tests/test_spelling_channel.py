"""The channel of spelling correction (nplm.use.spelling_channel): the edits against a
brute-force edit distance, their closed-form count against the strings themselves, P(typed |
meant) against a sum over every path of slips, counted here, and the words near a typed one
against the strings two edits reach."""

import itertools
import math

import numpy as np
import pytest

from nplm.errors import ConfigError
from nplm.use.spelling_channel import Channel, edit_count, edits, near_words


def distance(a: str, b: str) -> int:
  """The optimal string alignment distance (Damerau 1964: insert, delete, replace, swap two
  adjacent letters), by dynamic programming."""
  d = np.zeros((len(a) + 1, len(b) + 1), int)
  d[:, 0], d[0, :] = range(len(a) + 1), range(len(b) + 1)
  for i, j in itertools.product(range(1, len(a) + 1), range(1, len(b) + 1)):
    d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + (a[i - 1] != b[j - 1]))
    if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
      d[i, j] = min(d[i, j], d[i - 2, j - 2] + 1)
  return int(d[-1, -1])


def strings_up_to(length: int, alphabet: str) -> list[str]:
  return [''.join(s) for n in range(length + 1) for s in itertools.product(alphabet, repeat=n)]


@pytest.mark.parametrize('word', ['', 'a', 'ab', 'aba', 'cab'])
def test_the_edits_are_every_string_at_distance_one(word):
  alphabet = 'abc'
  assert edits(word, alphabet) == {s for s in strings_up_to(len(word) + 1, alphabet)
                                   if distance(word, s) == 1}


def test_the_count_of_edits_is_the_number_of_strings():
  for alphabet in ('a', 'ab', 'abc'):
    for word in strings_up_to(5, alphabet + 'z'):  # z: a character outside the alphabet.
      assert edit_count(word, alphabet) == len(edits(word, alphabet)), (word, alphabet)
  for word in ('mississippi', 'committee', "o'clock", 'aaaa', 'Zürich'):
    alphabet = 'abcdefghijklmnopqrstuvwxyz\'-'
    assert edit_count(word, alphabet) == len(edits(word, alphabet)), word


def slips(meant: str, alpha: float, second: float, alphabet: str) -> dict[str, float]:
  """P(x | meant) for every x, summed over the typist's paths: as meant (alpha); else one
  edit, each of E(meant) alike; then, with probability `second`, one more from there."""
  p = {meant: alpha}
  first = edits(meant, alphabet)
  for y in first:
    p[y] = p.get(y, 0.0) + (1 - alpha) * (1 - second) / len(first)
    further = edits(y, alphabet)
    for x in further:
      p[x] = p.get(x, 0.0) + (1 - alpha) * second / len(first) / len(further)
  return p


@pytest.mark.parametrize('second', [0.0, 0.3])
@pytest.mark.parametrize('meant', ['', 'a', 'ab', 'aab', 'abc', 'abca', 'azb'])
def test_the_channel_is_the_sum_over_every_path_of_slips_and_sums_to_one(meant, second):
  alphabet, alpha = 'abc', 0.9
  channel = Channel(alphabet, alpha, second)
  paths = slips(meant, alpha, second, alphabet)
  assert math.fsum(paths.values()) == pytest.approx(1.0, abs=1e-12)
  for x in strings_up_to(len(meant) + 3, alphabet + 'z'):  # z: outside the alphabet.
    want = paths.get(x, 0.0)
    got = channel.log_prob(x, meant)
    assert (got == -math.inf if want == 0 else got == pytest.approx(math.log(want), abs=1e-12)
            ), (x, meant)
  if not second:  # Mays, Damerau and Mercer's channel.
    assert all(channel.log_prob(x, meant) == pytest.approx(
        math.log(0.1 / len(edits(meant, alphabet)))) for x in edits(meant, alphabet))


@pytest.mark.parametrize('meant', ['ab', 'aab', 'cab', 'abcd'])
def test_the_strings_between_typed_and_meant_are_every_one_edit_from_both(meant):
  """Channel.between against E(meant) built, each y kept whose E(y) holds typed: over five
  letters, so that a y of a letter neither typed nor meant holds would be seen."""
  alphabet = 'abcde'
  channel = Channel(alphabet, 0.9, 0.3)
  reached = {y: edits(y, alphabet) for y in edits(meant, alphabet)}
  for typed in strings_up_to(len(meant) + 2, alphabet + 'z'):
    if typed != meant and distance(typed, meant) <= 2:
      assert set(channel.between(typed, meant)) == {
          y for y, further in reached.items() if typed in further}, (typed, meant)


def test_the_words_near_a_typed_one_are_those_one_or_two_edits_reach():
  alphabet = 'abcd'
  words = strings_up_to(4, alphabet)[1:]
  for typed in ('abc', 'dcba', 'ca', 'bbbb', 'e', 'Acd', 'ab-c'):
    once = edits(typed, alphabet + typed)
    twice = once | {x for y in once for x in edits(y, alphabet + typed)}
    for most_edits, reach in ((1, once), (2, twice)):
      want = (set(words) & reach) - {typed}
      if typed[0].isupper():  # The capital is the writer's: the lower-case form not offered.
        want -= {typed.lower()}
      if '-' in typed:  # Not letters: no word reached keeps the hyphen, so none is offered.
        want = set()
      assert near_words(typed, words, most_edits) == tuple(sorted(want)), typed
  assert 'abc' in near_words('ca', words, 2)  # 'ca' -> 'ac' -> 'abc': edits in any order.


def test_settings_outside_the_channel_are_refused_by_name():
  for alpha, second, says in ((0, 0.1, r'--alpha must be in \(0, 1\)'),
                              (1, 0.1, r'--alpha must be in \(0, 1\)'),
                              (0.9, 1, r'--second_edit must be in \[0, 1\)'),
                              (0.9, -0.1, r'--second_edit must be in \[0, 1\)')):
    with pytest.raises(ConfigError, match=says):
      Channel('ab', alpha, second)
