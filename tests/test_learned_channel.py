"""The channel learned from misspellings (nplm.use.learned_channel) against brute force: every
edit of a word built one by one with its name, rates by hand, the two-slip sum over all of
E(w)."""

import collections
import math
import signal

import pytest

from nplm import stop_requests
from nplm.errors import ConfigError
from nplm.use import learned_channel as learned_channel_module
from nplm.use.learned_channel import (EditRates, LearnedChannel, edits_made, learned_channel,
                                      usable)
from nplm.use.spelling_channel import Channel, edits

ALPHABET = 'abcdeghilnorstuyT'
PAIRS = [('recieve', 'receive'), ('beleive', 'believe'), ('acheive', 'achieve'),
         ('teh', 'the'), ('hte', 'the'), ('adress', 'address'), ('untill', 'until'),
         ('tommorow', 'tomorrow'), ('seperate', 'separate'), ('definately', 'definitely'),
         ('greatful', 'grateful'), ('occured', 'occurred'), ('thier', 'their')]


def every_edit(word: str, alphabet: str) -> list[tuple[tuple[str, str, str], str]]:
  """(the edit's name, the string it makes) for every edit of the word, one at a time."""
  made = []
  for p, c in enumerate(word):
    made.append((('del', word[p - 1:p], c), word[:p] + word[p + 1:]))
    made += [(('sub', c, t), word[:p] + t + word[p + 1:]) for t in alphabet if t != c]
    if p + 1 < len(word) and word[p + 1] != c:
      made.append((('rev', c, word[p + 1]), word[:p] + word[p + 1] + c + word[p + 2:]))
  for p in range(len(word) + 1):
    made += [(('ins', word[p - 1:p], t), word[:p] + t + word[p:]) for t in alphabet]
  return made


@pytest.fixture(scope='module')
def rates():
  return EditRates.learned(usable(PAIRS, ALPHABET), ALPHABET)


def test_the_edits_that_make_a_string_are_those_that_make_it_one_by_one():
  for word in ('the', 'hello', 'address', 'a', 'aab', 'tomorrow'):
    by_string = collections.defaultdict(list)
    for name, string in every_edit(word, ALPHABET + 'mw'):
      by_string[string].append(name)
    for string, names in by_string.items():
      assert sorted(edits_made(word, string)) == sorted(names), (word, string)
    assert edits_made(word, word) == [] and edits_made(word, word + 'xy') == []
  assert edits_made('hello', 'helo') == [('del', 'e', 'l'), ('del', 'l', 'l')]


def test_a_slip_is_a_distribution_over_the_strings_one_edit_away(rates):
  """Σ over E(w) of P(x | one slip of w) is 1; its total is every edit's rate summed; a
  character outside the alphabet stays in the word ('ü') but no slip puts one in."""
  for word in ('the', 'receive', 'address', 'a', 'Tea', 'Zürich', 'aab'):
    named = every_edit(word, ALPHABET)
    assert rates.total(word) == pytest.approx(sum(rates.rate(name) for name, _ in named))
    assert math.fsum(rates.slip(x, word) for x in edits(word, ALPHABET)) == pytest.approx(1)
  assert rates.slip('thz', 'the') == 0 and rates.slip('the', 'the') == 0


def test_a_rate_is_its_count_drawn_toward_its_kinds_mean_by_the_prior_weight():
  """One pair, 'teh' for 'the': the swap of h and e made once where it could be once."""
  one = EditRates.learned([('teh', 'the')], ALPHABET, prior_weight=4.0)
  assert one.counts == {('rev', 'h', 'e'): 1.0}
  mean_rev = (1 + 1) / (2 + 1)  # One swap made, of 'th' and 'he' that could be: (1 + 1)/(2 + 1).
  assert one.rate(('rev', 'h', 'e')) == pytest.approx((1 + 4 * mean_rev) / (1 + 4))
  assert one.rate(('rev', 't', 'h')) == pytest.approx(4 * mean_rev / (1 + 4))
  mean_sub = 1 / (3 * (len(ALPHABET) - 1) + 1)  # None made, of 3 letters by 16 others.
  assert one.rate(('sub', 'e', 'a')) == pytest.approx(4 * mean_sub / (1 + 4))
  assert one.rate(('sub', 'o', 'a')) == pytest.approx(mean_sub)  # 'o' never seen: the mean.


def test_expectation_maximization_shares_a_pair_among_the_edits_that_make_it():
  """'helo' for 'hello' is either l left out: half each at first; then by their rates.
  'greatful' for 'grateful' is two edits: its counts sum to 2 over the ways."""
  first = EditRates.learned([('helo', 'hello')], ALPHABET, rounds=1)
  assert first.counts == {('del', 'e', 'l'): 0.5, ('del', 'l', 'l'): 0.5}
  two = EditRates.learned([('greatful', 'grateful'), ('teh', 'the')], ALPHABET + 'f',
                          rounds=3)
  assert math.fsum(two.counts.values()) == pytest.approx(3)
  assert two.counts[('rev', 'h', 'e')] == pytest.approx(1)
  twice = EditRates.learned([('teh', 'the'), ('teh', 'the')], ALPHABET)  # Seen twice.
  assert twice.counts == {('rev', 'h', 'e'): 2.0}


def test_the_channel_is_the_formula_with_the_two_slips_summed_over_all_of_e_w(rates):
  """P(x | w) = α [x = w] + (1 - α)((1 - γ) s(x, w) + γ Σ_{y ∈ E(w)} s(y, w) s(x, y)),
  the sum over every y one edit from w, built."""
  channel = LearnedChannel(ALPHABET, 0.9, 0.3, rates)
  for typed, meant in (('recieve', 'receive'), ('greatful', 'grateful'), ('the', 'the'),
                       ('teh', 'the'), ('hte', 'the'), ('tea', 'the'), ('tha', 'the')):
    twice = math.fsum(rates.slip(y, meant) * rates.slip(typed, y)
                      for y in edits(meant, ALPHABET))
    want = (0.9 * (typed == meant)
            + 0.1 * (0.7 * rates.slip(typed, meant) + 0.3 * twice))
    assert channel.log_prob(typed, meant) == pytest.approx(math.log(want), rel=1e-12)
  assert channel.log_prob('thezz', 'the') == -math.inf


def test_the_list_makes_its_slips_likelier_than_a_uniform_channel_does():
  """Learned from i and e swapped, 'recieve' is likelier than a uniform draw makes it; the
  'i' and 'e' of the list's words swap more often than other neighbours."""
  channel = learned_channel(tuple(PAIRS), ALPHABET, alpha=0.99)  # Uniform's α.
  uniform = Channel(ALPHABET)
  assert channel.log_prob('recieve', 'receive') > uniform.log_prob('recieve', 'receive') + 1
  assert channel.rates.rate(('rev', 'e', 'i')) > channel.rates.rate(('rev', 'c', 'e'))
  with pytest.raises(ConfigError, match='none of the 1 misspellings'):
    learned_channel((('qqqqq', 'the'),), ALPHABET)


def test_learning_heeds_a_stop_request_that_python_dropped(monkeypatch):
  """A Ctrl-C while a long list is learned (nplm correct --misspellings=codespell) whose
  exception Python dropped (it landed in a garbage collector's callback) stops the learning at
  its next pair, not after it."""
  learned = []
  reached = []
  monkeypatch.setattr(learned_channel_module, '_paths',
                      lambda *args: learned.append(args[:2]) or [])
  with pytest.raises(stop_requests.Interrupted, match='Interrupted \\(SIGINT\\) while learning'):
    with stop_requests.interrupting('learning'):
      stop_requests._interrupting[-1].signum = signal.SIGINT  # What the dropped one left.
      EditRates.learned([('teh', 'the'), ('thier', 'their')], 'abcdefghijklmnopqrstuvwxyz')
      reached.append('the end of the learning')
  assert not learned and not reached


def test_a_learned_channel_is_kept_on_disk_read_back_the_same_and_never_used_damaged(
    tmp_path, monkeypatch, caplog):
  """The rates learned once are read back from $NPLM_CACHE_DIR at the next start (the
  same values to the last bit); a damaged or unreadable file is said and learned again; a
  cache that cannot be written is said, and the channel is learned all the same."""
  monkeypatch.setenv('NPLM_CACHE_DIR', str(tmp_path / 'cache'))
  caplog.set_level('INFO')
  typed = [('recieve', 'receive'), ('teh', 'the'), ('thier', 'their'), ('ahcieve', 'achieve')]

  def channel():
    learned_channel_module.learned_rates.cache_clear()  # As a new process starts.
    caplog.clear()
    made = learned_channel(tuple(PAIRS), ALPHABET)
    return [made.log_prob(x, w) for x, w in typed], caplog.text

  first, said = channel()
  assert 'learned the channel from 6 misspellings' in said
  [kept] = (tmp_path / 'cache' / 'channels').iterdir()
  again, said = channel()
  assert again == first and f'read from {kept}' in said
  fresh = EditRates.learned(usable(PAIRS, ALPHABET), ALPHABET)
  assert [LearnedChannel(ALPHABET, 0.999, 0.1, fresh).log_prob(x, w) for x, w in typed] == first
  text = kept.read_text()
  for damage, phrase in ((text.replace('"del"', '"ins"', 1), 'is damaged'),
                         (text[:len(text) // 2], 'cannot be read')):
    kept.write_text(damage)
    again, said = channel()
    assert again == first and phrase in said and 'learned the channel from 6' in said
    assert kept.read_text() == text  # Rewritten whole.
  other = learned_channel(tuple(PAIRS[:5]), ALPHABET)  # Another list: a file of its own.
  assert other.log_prob('teh', 'the') != learned_channel(tuple(PAIRS), ALPHABET).log_prob(
      'teh', 'the') and len(list(kept.parent.iterdir())) == 2
  monkeypatch.setenv('NPLM_CACHE_DIR', str(kept))  # A file where the directory should be.
  again, said = channel()
  assert again == first and 'is not kept in' in said and 'learned the channel from 6' in said
