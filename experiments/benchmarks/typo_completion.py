r"""Completing a misspelt word while it is typed, as a search box does: `nplm complete`'s
typos (nplm.use.prefix_channel) on Wikipedia's common misspellings put into Brown's test
sentences, for any word-level models nplm reads (trained runs, `nplm ngram` DIRs).

  python -m experiments.benchmarks.typo_completion --workdirs=runs/kn5,runs/mlp9 --out=DIR

The sentences and their misspelt words are experiments/benchmarks/misspellings.py's draw
(one misspelt word a sentence; --limit, --seed). Each sentence is typed up to that word as
Brown wrote it, then the misspelling in part, no space after it, cut two ways:
- whole: all of it typed ("The jury recieved");
- first slip: to its first character that differs from the word meant, the earliest the
  slip shows ("The jury recie"; the whole misspelling where it only goes on past the word);
- next word: all of it and a space ("The jury recieved "), where a word follows in the
  sentence: the one to suggest is that next word (typos: the misspelt one corrected first).
The same sentences typed right, the word meant to the same length but one letter short of
it at least ("The jury receiv", "The jury recei": until 2026-12-07 a word typed whole was
read as whole, and the cut is kept so that the figures compare), or whole with the space,
measure what reading typos costs where there are none.

Each model suggests the --k most probable next words (nplm complete --max_words=1, the
next word alone): as typed (--notypos), with typos read through the uniform channel (nplm
complete's default), and, with --learn_from=FILE, through the channel learned from FILE's
pairs whose meant word the list does not hold (nplm complete --misspellings; the
misspellings benchmark's --learn_from). The report gives how often the word wanted (the one
meant, or the next) stands in its place in the first completion's text, the prefix as read
(corrected, with typos) and the word suggested, and how often in one of the k; and how many
meant words each model's vocabulary lacks (those it can never suggest).
"""

import time
from collections.abc import Sequence

from absl import flags

from experiments.benchmarks.brown_sentences import (benchmark_main, brown_splits,
                                                     reads_back, report_text, sentences_of)
from experiments.benchmarks import misspellings
from experiments.benchmarks.misspellings import (Occurrence, define_draw_flags,
                                                 listed_misspellings, misspellings_by_word,
                                                 occurrences, unlisted_pairs)
from nplm import display
from nplm.cli import run_experiment
from nplm.errors import ConfigError
from nplm.use.completion import Completer
from nplm.use.misspelling_lists import read_pairs

CUTS = ('whole', 'first slip', 'next word')
TYPED = ('misspelt', 'typed right')
K = 5


def first_slip(typed: str, meant: str) -> str:
  """`typed` to its first character that differs from `meant`'s (all of it where it only
  goes on past meant, or ends first)."""
  differs = next((i for i, (a, b) in enumerate(zip(typed, meant)) if a != b), None)
  return typed if differs is None else typed[:differs + 1]


def prefixes(occurrence: Occurrence) -> dict[tuple[str, str], str]:
  """(typed, cut) -> the prefix typed: the sentence to the word, then the word in part (or
  whole and a space, where a word follows)."""
  before = occurrence.sentence[:occurrence.position]
  meant = occurrence.sentence[occurrence.position]
  slips = {'whole': occurrence.typed, 'first slip': first_slip(occurrence.typed, meant)}
  typed = {}
  for cut, misspelt in slips.items():
    typed[('misspelt', cut)] = ' '.join([*before, misspelt])
    typed[('typed right', cut)] = ' '.join([*before, meant[:min(len(misspelt),
                                                                 len(meant) - 1)]])
  if occurrence.position + 1 < len(occurrence.sentence):
    typed[('misspelt', 'next word')] = ' '.join([*before, occurrence.typed, ''])
    typed[('typed right', 'next word')] = ' '.join([*before, meant, ''])
  return typed


def place(occurrence: Occurrence, cut: str) -> int:
  """Where the word wanted is in the sentence: the one meant, or for 'next word' the one
  after it."""
  return occurrence.position + (cut == 'next word')


def suggested(completer: Completer, occurrence: Occurrence, k: int
              ) -> dict[tuple[str, str], list[str]]:
  """For each prefix typed, the word in the wanted place of each of the k completions the
  completer gives it (of the text it shows: the prefix as read, corrected with typos, then
  the next word), where its text reaches that place."""
  found = {}
  for key, prefix in prefixes(occurrence).items():
    at, texts = place(occurrence, key[1]), [c.text.split() for c in completer.complete(
        prefix, k, max_words=1)]
    found[key] = [words[at] for words in texts if len(words) > at]
  return found


def tally(found: Sequence[Occurrence], suggestions: Sequence[dict], seconds: float) -> dict:
  """How often the word wanted is first, and among the suggestions, per (typed, cut), of
  how many prefixes."""
  counts = {}
  for typed in TYPED:
    for cut in CUTS:
      key = (typed, cut)
      pairs = [(s[key], o.sentence[place(o, cut)]) for o, s in zip(found, suggestions)
               if key in s]
      counts[f'{typed}, {cut}'] = {'first': sum(words[:1] == [w] for words, w in pairs),
                                   'among_k': sum(w in words for words, w in pairs),
                                   'prefixes': len(pairs)}
  prefixes = sum(map(len, suggestions))
  return {'counts': counts, 'seconds': seconds,
          'prefixes_per_second': prefixes / seconds if seconds else 0.0}


def completed_by_model(model, label: str, found: Sequence[Occurrence], k: int,
                       learned: tuple[tuple[str, str], ...]) -> dict:
  """Each way of reading the word being typed: its tallies."""
  completers = {'as typed': Completer(model.read, typos=False),
                'typos, uniform channel': Completer(model.read)}
  if learned:
    completers['typos, learned channel'] = Completer(model.read, misspellings=learned)
  vocabulary = set(model.read.vocab.words)
  result = {'name': model.read.name, 'dataset': model.config.dataset,
            'meant_outside_vocabulary': sum(o.sentence[o.position] not in vocabulary
                                            for o in found), 'ways': {}}
  for way, completer in completers.items():
    started = time.perf_counter()
    suggestions = [suggested(completer, o, k)
                   for o in display.progress(found, len(found), f'{label}, {way}',
                                             'sentence')]
    result['ways'][way] = tally(found, suggestions, time.perf_counter() - started)
  return result


def benchmark(models: dict, splits: dict[str, Sequence[str]], listed: dict[str, list[str]],
              limit: int = 0, seed: int = 0, k: int = K, learn_from: str = '') -> dict:
  """The results of the `models` (label -> nplm.load's Model) on the test split's drawn
  sentences."""
  by_word, _ = misspellings_by_word(listed)
  readable = [s for s in sentences_of(splits['test']) if reads_back(s)]
  found = occurrences(readable, by_word, limit, seed)
  learned = unlisted_pairs(listed, read_pairs(learn_from)) if learn_from else ()
  result = {'occurrences': len(found), 'limit': limit, 'seed': seed, 'k': k,
            'learned_from': learn_from and f'{learn_from}: {len(learned):,} pairs of words '
                                           'the list does not hold', 'models': {}}
  for label, model in models.items():
    result['models'][label] = completed_by_model(model, label, found, k, learned)
  return result


def formatted(result: dict, markdown: bool = False) -> str:
  """A row per (typed, cut) and figure; a column per model and way of reading."""
  total, k = result['occurrences'], result['k']
  columns = {f'{label}, {way}': entry for label, model in result['models'].items()
             for way, entry in model['ways'].items()}
  rows = [['', *columns]]
  for typed in TYPED:
    for cut in CUTS:
      counted = next(iter(columns.values()))['counts'][f'{typed}, {cut}']['prefixes']
      for figure, name in (('first', 'first'), ('among_k', f'among the {k}')):
        rows.append([f'{typed}, {cut} ({counted:,}): {"next" if cut == "next word" else "meant"}'
                     f' word {name}', *[_share(entry['counts'][f'{typed}, {cut}'], figure)
                                       for entry in columns.values()]])
  rows.append(['prefixes per second',
               *[f'{entry["prefixes_per_second"]:,.0f}' for entry in columns.values()]])
  header = [
      f'{total:,} of Brown\'s test sentences, each with one of Wikipedia\'s common '
      f'misspellings (the misspellings benchmark\'s draw, --seed={result["seed"]}), typed '
      'to the misspelt word, then that word in part, no space after it: whole, or to its '
      'first slip; or whole and a space (next word: the word after it wanted); typed right: '
      'the word meant, to the same length, one letter short of it at least, or whole and a '
      'space. The --k='
      f'{k} most probable next words (nplm complete --max_words=1), the word being typed as '
      'typed (--notypos), or read as possibly misspelt.'
      + (f' The learned channel: {result["learned_from"]}.' if result['learned_from']
         else '')]
  notes = [f'{label}: {model["name"]} on {model["dataset"]}, '
           f'{model["meant_outside_vocabulary"]:,} meant words outside its vocabulary '
           f'({100 * model["meant_outside_vocabulary"] / total:.1f}%: never suggested)'
           for label, model in result['models'].items()]
  return report_text('A misspelt word completed while it is typed', header, rows, notes,
                     markdown)


def _share(counts: dict, figure: str) -> str:
  return f'{100 * counts[figure] / counts["prefixes"]:.1f}%' if counts['prefixes'] else 'n/a'


def result_of(options, models) -> dict:
  if not 1 <= options.k <= 100:
    raise ConfigError(f'--k must be from 1 to 100, not {options.k}')
  listed = listed_misspellings(options.list)  # Refused before the models are read.
  if options.learn_from:
    read_pairs(options.learn_from)
  read = models()
  for model in read.values():
    Completer(model.read)  # A model that does not complete is refused now.
  return benchmark(read, brown_splits(options.data_dir), listed, options.limit,
                   options.seed, options.k, options.learn_from)


if __name__ == '__main__':
  define_draw_flags()
  flags.adopt_module_key_flags(misspellings)
  flags.DEFINE_integer('k', K, 'Next words suggested per prefix (1 to 100).')
  flags.DEFINE_string('learn_from', '', 'Also read typos through the channel learned from '
                      'this list (any form nplm complete --misspellings reads, or codespell), '
                      'its pairs of words the benchmark\'s list does not hold.')
  run_experiment(benchmark_main(result_of, formatted))
