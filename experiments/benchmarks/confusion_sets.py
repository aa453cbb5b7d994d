r"""Choosing between words in context: context-sensitive spelling correction [Golding & Roth
1999] on Brown's test split, for any models nplm reads (trained runs, `nplm ngram` DIRs).

  python -m experiments.benchmarks.confusion_sets --workdirs=runs/kn5,runs/lstm --out=DIR

Brown's test split (the paper's: every token after the first 1,000,000) is cut into sentences
after '.', '!' or '?' (with any closing '' or further '.', '!', '?' after it) and at </p> and
</text>, which are left out. Each occurrence of a confusion set's member, as listed or with its
first letter capitalised, gives the sentence once per member, the word replaced (capitalised
where the original was). Each model scores every such sentence (`Model.rank`) and picks the most
probable, the member listed first on a tie (two members both read as <unk>); accuracy is the
share of occurrences where it picks the original. The baseline picks the member most frequent
in Brown's training split, whatever the context [Golding & Roth 1999].

The sentences are typed text, Brown's tokens joined by spaces, read by each model's tokenizer.
Brown's tokenizer reads 98.4% of the test sentences back as Brown's tokens; the rest hold
tokens it splits ("goin'", "Charles'", "R.'s"): their occurrences (185, 2%) are left out, so
that a model trained on Brown's words scores exactly Brown's tokens, and every model the same
occurrences.
"""

import collections
import dataclasses
import logging
import time
from collections.abc import Sequence

from absl import flags

from experiments.benchmarks import brown_sentences
from experiments.benchmarks.brown_sentences import (benchmark_main, brown_splits,
                                                     capitalised, define_flags, reads_back,
                                                     report_text, sentences_of)
from nplm import display
from nplm.cli import run_experiment
from nplm.errors import ConfigError

# Words commonly confused, after Golding & Roth's (1999) list; a set is named by its members.
CONFUSION_SETS = tuple(tuple(name.split('/')) for name in (
    "their/there/they're", 'then/than', "its/it's", 'to/too/two', 'affect/effect',
    'principal/principle', "your/you're", "whose/who's", 'lose/loose', 'passed/past',
    'quiet/quite', 'weather/whether', 'accept/except', 'peace/piece', 'lead/led', 'hear/here',
    'brake/break', 'cite/sight/site', 'country/county', 'desert/dessert', 'among/between',
    'fewer/less', 'I/me', 'amount/number', 'begin/being', 'later/latter', 'raise/rise',
    'sit/set'))
CHUNK_SENTENCES = 2048  # Sentences per rank call: each a progress step, all compiled shapes shared.

log = logging.getLogger('nplm.confusion_sets')


def set_name(members: Sequence[str]) -> str:
  return '/'.join(members)


def chosen_sets(names: Sequence[str]) -> list[tuple[str, ...]]:
  """The sets holding the named members, in the order named (every set if none)."""
  if not names:
    return list(CONFUSION_SETS)
  set_of = {member: members for members in CONFUSION_SETS for member in members}
  unknown = [name for name in names if name not in set_of]
  if unknown:
    raise ConfigError(f'--sets: no confusion set holds {unknown[0]!r}; the sets are '
                      f'{", ".join(map(set_name, CONFUSION_SETS))}')
  return list(dict.fromkeys(set_of[name] for name in names))


def spellings(sets: Sequence[tuple[str, ...]]) -> dict[str, tuple[tuple[str, ...], str, bool]]:
  """Each way a member is written -> (its set, the member, whether capitalised): as listed,
  and with a capital first letter (a sentence's first word). "I" is as listed: "me", not
  "Me", replaces it."""
  forms = {capitalised(member): (members, member, True) for members in sets for member in members}
  forms |= {member: (members, member, False) for members in sets for member in members}
  return forms


@dataclasses.dataclass(frozen=True)
class Occurrence:
  members: tuple[str, ...]  # Its confusion set.
  original: str  # The member the sentence holds.
  texts: tuple[str, ...]  # The sentence with each member in the word's place, as listed.


def occurrences(sentences: Sequence[Sequence[str]], sets: Sequence[tuple[str, ...]],
                limit: int = 0) -> list[Occurrence]:
  """Every occurrence of a member in the sentences, set by set in the order of `sets`, each
  set's in corpus order, the first `limit` of each set (0: all)."""
  forms = spellings(sets)
  found = {members: [] for members in sets}
  for sentence in sentences:
    for position, token in enumerate(sentence):
      if token not in forms:
        continue
      members, original, capital = forms[token]
      if limit and len(found[members]) >= limit:
        continue
      words = [capitalised(member) if capital else member for member in members]
      texts = tuple(' '.join([*sentence[:position], word, *sentence[position + 1:]])
                    for word in words)
      found[members].append(Occurrence(members, original, texts))
  return [occurrence for members in sets for occurrence in found[members]]


def frequency_choices(train_tokens: Sequence[str],
                      sets: Sequence[tuple[str, ...]]) -> dict[tuple[str, ...], str]:
  """Each set's member most frequent in the training tokens, in either spelling; the first
  listed on a tie."""
  forms = spellings(sets)
  counts = collections.Counter(forms[token][1] for token in train_tokens if token in forms)
  return {members: max(members, key=lambda member: counts[member]) for members in sets}


def model_picks(model, found: Sequence[Occurrence], label: str) -> list[str]:
  """The member that `model` finds most probable in each occurrence's sentence: every
  distinct sentence scored once, CHUNK_SENTENCES to a call."""
  texts = list(dict.fromkeys(text for occurrence in found for text in occurrence.texts))
  chunks = [texts[start:start + CHUNK_SENTENCES]
            for start in range(0, len(texts), CHUNK_SENTENCES)]
  log.info('%s: scoring %s', label, display.counted(len(texts), 'sentence'))
  log_probs = {}
  for chunk in display.progress(chunks, len(chunks), label, 'chunk'):
    log_probs |= {score.text: score.log_prob for score in model.rank(chunk)}
  return [most_probable(occurrence, log_probs) for occurrence in found]


def most_probable(occurrence: Occurrence, log_probs: dict[str, float]) -> str:
  """The member whose sentence has the highest log p; the first listed on a tie."""
  scores = [log_probs[text] for text in occurrence.texts]
  return occurrence.members[scores.index(max(scores))]


def tally(found: Sequence[Occurrence], picks: Sequence[str],
          sets: Sequence[tuple[str, ...]]) -> dict[str, dict]:
  """Occurrences, picks of the original and accuracy, per set name and for 'all'."""
  correct = collections.Counter(occurrence.members for occurrence, pick
                                in zip(found, picks) if pick == occurrence.original)
  total = collections.Counter(occurrence.members for occurrence in found)
  rows = {set_name(members): (total[members], correct[members]) for members in sets}
  rows['all'] = (len(found), sum(correct.values()))
  return {name: {'occurrences': n, 'correct': k, 'accuracy': k / n if n else None}
          for name, (n, k) in rows.items()}


def benchmark(models: dict, splits: dict[str, Sequence[str]], sets: Sequence[tuple[str, ...]],
              limit: int = 0) -> dict:
  """The results of the `models` (label -> nplm.load's Model) and of the frequency baseline
  on the test split's occurrences; `splits`: Brown's tokens per split."""
  sentences = sentences_of(splits['test'])
  read_back = {True: [], False: []}
  for sentence in sentences:
    read_back[reads_back(sentence)].append(sentence)
  readable, unreadable = read_back[True], read_back[False]
  found = occurrences(readable, sets, limit)
  choices = frequency_choices(splits['train'], sets)
  result = {'sentences': len(sentences), 'sentences_left_out': len(unreadable),
            'occurrences_left_out': len(occurrences(unreadable, sets)), 'limit': limit,
            'sets': [set_name(members) for members in sets],
            'baseline': {'choices': {set_name(members): choices[members] for members in sets},
                         'accuracy': tally(found, [choices[o.members] for o in found], sets)},
            'models': {}}
  for label, model in models.items():
    started = time.perf_counter()
    picks = model_picks(model, found, label)
    result['models'][label] = {'name': model.read.name, 'dataset': model.config.dataset,
                               'seconds': time.perf_counter() - started,
                               'accuracy': tally(found, picks, sets)}
  return result


def _percent(entry: dict) -> str:
  return 'n/a' if entry['accuracy'] is None else f'{100 * entry["accuracy"]:.1f}%'


def formatted(result: dict, markdown: bool = False) -> str:
  """The table (a row per set, 'all' first; a column per model) and what it was run on."""
  models, baseline = result['models'], result['baseline']
  rows = [['confusion set', 'occurrences', 'baseline (its pick)', *models]]
  for name in ['all', *result['sets']]:
    choice = f' ({baseline["choices"][name]})' if name != 'all' else ''
    rows.append([name, f'{baseline["accuracy"][name]["occurrences"]:,}',
                 _percent(baseline['accuracy'][name]) + choice,
                 *[_percent(entry['accuracy'][name]) for entry in models.values()]])
  limit = f'; at most {result["limit"]:,} occurrences per set' if result['limit'] else ''
  header = [f'Brown test split: {result["sentences"]:,} sentences; '
            f'{result["sentences_left_out"]:,} left out, which Brown\'s tokenizer does not '
            f'read back as Brown\'s tokens, with their {result["occurrences_left_out"]:,} '
            f'occurrences{limit}.',
            'Accuracy: the share of occurrences where the pick is the word written. A model '
            'picks the most probable sentence (a tie, such as two members read as <unk>, goes '
            'to the member listed first); the baseline, the set\'s member most frequent in '
            'the training split.']
  notes = [f'{label}: {entry["name"]} on {entry["dataset"]}, scored in '
           f'{display.duration(entry["seconds"])}' for label, entry in models.items()]
  return report_text('Confusion sets (Golding & Roth 1999) on Brown\'s test split', header,
                     rows, notes, markdown)


def result_of(options, models) -> dict:
  sets = chosen_sets(options.sets)
  return benchmark(models(), brown_splits(options.data_dir), sets, options.limit)


if __name__ == '__main__':
  define_flags(0, 'At most N occurrences per set, the first in the split (0: all).')
  flags.adopt_module_key_flags(brown_sentences)  # Shown in --help.
  flags.DEFINE_list('sets', [], 'Confusion sets named by a member, e.g. their,then (empty: '
                    'all).')
  run_experiment(benchmark_main(result_of, formatted))
