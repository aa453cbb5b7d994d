"""A spelling channel learned from a list of misspellings, (typed, meant) pairs: how often
each slip is made where it can be, as Kernighan, Church and Gale (1990) learn theirs.

An edit of a meant word w, in its place's context (w_{p-1} is '' at the word's start):

    ('del', w_{p-1}, w_p)    w_p left out after w_{p-1}
    ('ins', w_{p-1}, t)      t put in after w_{p-1}
    ('sub', w_p, t)          w_p typed as t
    ('rev', w_p, w_{p+1})    two unlike neighbours swapped

Its rate is how often the list makes it over how often its context (the edit less what it puts
in) occurs in the list's meant words, KCG's del[x, y] / chars[x, y] and the like, drawn toward
its kind's mean rate where the list saw the context seldom (a Dirichlet prior of weight m):

    rate(e) = (n(e) + m · r̄_kind) / (chars(context of e) + m)

and a slip of w is one of its edits, drawn in proportion to its rate (a uniform draw over the
edits where the rates are equal):

    P(x | one slip of w) = Σ_{e(w) = x} rate(e) / Σ_{every edit e of w} rate(e)

The spelling_channel.Channel built on it keeps α and γ: P(x | w) = α [x = w] + (1 - α) ·
((1 - γ) P(x | one slip of w) + γ Σ_y P(y | one slip of w) P(x | one slip of y)). The counts
n(e) are expected ones (expectation maximization, from equal rates): a pair one edit apart
counts each edit that makes it, a pair two apart each pair of edits (through each y), in
proportion to its probability under the rates of the round before.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import logging
import time
from collections.abc import Iterable, Sequence

from rapidfuzz.distance import DamerauLevenshtein

from nplm import stop_requests
from nplm.use import channel_cache
from nplm.errors import ConfigError
from nplm.use.spelling_channel import SECOND_EDIT, Channel

PRIOR_WEIGHT = 20.0  # m: the best held-out ln P(x | w), experiments/results/misspellings/channel.
ROUNDS = 3  # Of expectation maximization: the held-out likelihood is flat after three.
# α where none is given: the slips are likelier than uniform ones, so a word typed as meant
# must be likelier too for the same false alarms (experiments/results/misspellings, α sweep).
LEARNED_ALPHA = 0.999
KINDS = ('del', 'ins', 'sub', 'rev')

Edit = tuple[str, str, str]

log = logging.getLogger(__name__)


def edits_made(meant: str, typed: str) -> list[Edit]:
  """Every edit of `meant` that makes `typed` (none where they are not one edit apart; two
  where a doubled letter loses either of its halves)."""
  n, k = len(meant), len(typed)
  if k == n - 1:
    return [('del', meant[p - 1:p], meant[p]) for p in range(n)
            if meant[:p] + meant[p + 1:] == typed]
  if k == n + 1:
    return [('ins', meant[p - 1:p], typed[p]) for p in range(k)
            if typed[:p] + typed[p + 1:] == meant]
  differ = [p for p in range(n) if k == n and meant[p] != typed[p]]
  if len(differ) == 1:
    return [('sub', meant[differ[0]], typed[differ[0]])]
  if (len(differ) == 2 and differ[1] == differ[0] + 1
      and meant[differ[0]] == typed[differ[1]] and meant[differ[1]] == typed[differ[0]]):
    return [('rev', meant[differ[0]], meant[differ[1]])]
  return []


def _context(edit: Edit) -> tuple[str, ...]:
  return edit if edit[0] in ('del', 'rev') else edit[:2]


def _contexts(word: str) -> Iterable[tuple[str, ...]]:
  """The context of every edit the word can take (an insertion's: each place)."""
  for p, c in enumerate(word):
    yield 'del', word[p - 1:p], c
    yield ('sub', c)
  for p in range(len(word) + 1):
    yield 'ins', word[p - 1:p]
  for c, d in zip(word, word[1:]):
    if c != d:
      yield 'rev', c, d


@dataclasses.dataclass(frozen=True, eq=False)
class EditRates:
  """rate(e) of the module docstring, over an alphabet, from expected counts of edits."""
  alphabet: str
  counts: dict[Edit, float]  # n(e).
  contexts: collections.Counter  # chars(context): in the list's meant words.
  prior_weight: float = PRIOR_WEIGHT

  def content(self) -> dict:
    """The rates as JSON's types (nplm.use.channel_cache keeps them)."""
    return {'alphabet': self.alphabet, 'prior_weight': self.prior_weight,
            'counts': [[*edit, count] for edit, count in self.counts.items()],
            'contexts': [[*context, count] for context, count in self.contexts.items()]}

  @classmethod
  def of_content(cls, content: dict) -> EditRates:
    return cls(content['alphabet'], {tuple(row[:3]): row[3] for row in content['counts']},
               collections.Counter({tuple(row[:-1]): row[-1] for row in content['contexts']}),
               content['prior_weight'])

  @functools.cached_property
  def mean(self) -> dict[str, float]:
    """r̄_kind: the kind's edits made over the edits of that kind the meant words could take
    (one more of each, so that a kind the list never makes stays possible)."""
    size = len(self.alphabet)
    branching = {'del': 1, 'rev': 1, 'sub': size - 1, 'ins': size}
    made, could = collections.Counter(), collections.Counter()
    for edit, count in self.counts.items():
      made[edit[0]] += count
    for context, count in self.contexts.items():
      could[context[0]] += count * branching[context[0]]
    return {kind: (made[kind] + 1) / (could[kind] + 1) for kind in KINDS}

  def rate(self, edit: Edit) -> float:
    m = self.prior_weight
    return ((self.counts.get(edit, 0.0) + m * self.mean[edit[0]])
            / (self.contexts.get(_context(edit), 0) + m))

  @functools.cached_property
  def _made_from(self) -> dict[tuple[str, str], float]:
    """Σ_t n(e) over the alphabet's t, for each insertion's and replacement's context."""
    letters, made = set(self.alphabet), collections.defaultdict(float)
    for edit, count in self.counts.items():
      if edit[0] == 'ins' or edit[0] == 'sub' and edit[2] != edit[1]:
        if edit[2] in letters:
          made[edit[:2]] += count
    return made

  def _puts_in(self, context: tuple[str, str]) -> float:
    """Σ_t rate(context + (t,)) over the t of the alphabet an edit of that context can put
    in (a letter is not replaced by itself)."""
    kind, c = context
    choices = len(self.alphabet) - (kind == 'sub' and c in self.alphabet)
    m = self.prior_weight
    return ((self._made_from.get(context, 0.0) + m * self.mean[kind] * choices)
            / (self.contexts.get(context, 0) + m))

  def total(self, word: str) -> float:
    """Σ rate(e) over every edit e of the word: the insertions at its start, then for each
    character c after prev ('' first) what the edits of c's place sum to (_place)."""
    places, total = self._places, self._first_place
    for prev, c in zip(itertools.chain([''], word), word):
      rates = places.get((prev, c))
      if rates is None:
        rates = places[prev, c] = self._place(prev, c)
      total += rates
    return total

  @functools.cached_property
  def _first_place(self) -> float:
    return self._puts_in(('ins', ''))  # The insertions before the word's first character.

  @functools.cached_property
  def _places(self) -> dict[tuple[str, str], float]:
    return {}  # _place's, as found (a few thousand character pairs).

  def _place(self, prev: str, c: str) -> float:
    """The rates of c deleted after prev, replaced, an insertion after it, and prev and c
    swapped (_contexts, place by place)."""
    rates = (self.rate(('del', prev, c)) + self._puts_in(('sub', c))
             + self._puts_in(('ins', c)))
    return rates + self.rate(('rev', prev, c)) if prev and prev != c else rates

  def slip(self, typed: str, meant: str) -> float:
    """P(typed | one slip of meant): what an edit puts in is of the alphabet."""
    made = [edit for edit in edits_made(meant, typed)
            if edit[0] not in ('ins', 'sub') or edit[2] in self.alphabet]
    return sum(map(self.rate, made)) / self.total(meant) if made else 0.0

  @classmethod
  def learned(cls, pairs: Sequence[tuple[str, str]], alphabet: str,
              prior_weight: float = PRIOR_WEIGHT, rounds: int = ROUNDS) -> EditRates:
    """The rates of `pairs` (each one or two edits apart, over the alphabet: usable())."""
    contexts = collections.Counter(c for _, meant in pairs for c in _contexts(meant))
    uniform = Channel(alphabet, second_edit=SECOND_EDIT)
    paths = {}
    for pair in set(pairs):  # Seconds for a list of 50,000: a stop request heard between.
      stop_requests.check_interrupted()
      paths[pair] = _paths(*pair, uniform)
    rates = None
    for _ in range(rounds):
      stop_requests.check_interrupted()
      counts = collections.defaultdict(float)
      for pair in pairs:  # A pair listed twice (seen twice) counts twice.
        ways = paths[pair]
        weights = [_path_prob(rates, way) for way in ways]
        whole = sum(weights)
        for way, weight in zip(ways, weights):
          for _, edit in way:
            counts[edit] += weight / whole
      rates = cls(alphabet, dict(counts), contexts, prior_weight)
    return rates


def _paths(typed: str, meant: str, uniform: Channel) -> list[tuple[tuple[str, Edit], ...]]:
  """Every way of edits that makes typed of meant: one edit, or two through each y; each
  edit with the string it is made in."""
  one = [((meant, edit),) for edit in edits_made(meant, typed)]
  if one:
    return one
  return [((meant, first), (y, second)) for y in uniform.between(typed, meant)
          for first in edits_made(meant, y) for second in edits_made(y, typed)]


def _path_prob(rates: EditRates | None, way) -> float:
  """The probability of that way of edits under the rates (1 before any are learned)."""
  if rates is None:
    return 1.0
  prob = 1.0
  for word, edit in way:
    prob *= rates.rate(edit) / rates.total(word)
  return prob


def usable(pairs: Iterable[tuple[str, str]], alphabet: str) -> list[tuple[str, str]]:
  """The pairs one or two edits apart whose characters are of the alphabet."""
  letters = set(alphabet)
  return [(typed, meant) for typed, meant in pairs
          if set(typed) | set(meant) <= letters
          and 0 < DamerauLevenshtein.distance(typed, meant) <= 2]


@dataclasses.dataclass(frozen=True)
class LearnedChannel(Channel):
  """Channel with a slip drawn by the learned rates, not uniformly (the module docstring)."""
  rates: EditRates | None = None

  def slip(self, typed: str, meant: str) -> float:
    return self.rates.slip(typed, meant)

  def two_slips(self, typed: str, meant: str) -> float:
    return sum(self.slip(y, meant) * self.slip(typed, y) for y in self.between(typed, meant))


def learned_channel(pairs: tuple[tuple[str, str], ...], alphabet: str,
                    alpha: float = LEARNED_ALPHA,
                    second_edit: float = SECOND_EDIT) -> LearnedChannel:
  """The channel of the rates learned from `pairs` (those usable()), refused where none are."""
  return LearnedChannel(alphabet, alpha, second_edit, learned_rates(pairs, alphabet))


@functools.lru_cache(maxsize=4)  # nplm serve learns once for requests of other α or γ.
def learned_rates(pairs: tuple[tuple[str, str], ...], alphabet: str) -> EditRates:
  kept = usable(pairs, alphabet)
  if not kept:
    raise ConfigError(f'none of the {len(pairs):,} misspellings is one or two edits from its '
                      'word in the vocabulary\'s characters: give (typed, meant) pairs of '
                      'words')
  key = channel_cache.key_of(kept, alphabet, {'prior_weight': PRIOR_WEIGHT, 'rounds': ROUNDS})
  content = channel_cache.read(key)
  left_out = (f'{len(pairs) - len(kept):,} left out: more than two edits, or characters '
              'outside the vocabulary\'s')
  if content is not None:
    log.info('the channel learned from %s misspellings, read from %s (%s)', f'{len(kept):,}',
             channel_cache.path_of(key), left_out)
    return EditRates.of_content(content)
  started = time.perf_counter()
  rates = EditRates.learned(kept, alphabet)
  log.info('learned the channel from %s misspellings in %.1f s (%s)', f'{len(kept):,}',
           time.perf_counter() - started, left_out)
  channel_cache.write(key, rates.content())
  return rates
