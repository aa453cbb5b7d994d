"""The benchmark of a misspelt word completed while it is typed
(experiments/benchmarks/typo_completion.py): the prefixes it types against hand-made ones, and
its tallies against `nplm complete --json` run as a user types it."""

import json

import pytest

import nplm
from experiments.benchmarks import misspellings
from experiments.benchmarks import typo_completion as benchmark
from experiments.benchmarks.brown_sentences import reads_back, sentences_of
from tests import cli, test_confusion_sets, test_misspellings

tiny_splits, kn3 = test_confusion_sets.tiny_splits, test_confusion_sets.kn3  # Their fixtures.


def test_the_prefixes_typed_by_hand():
  assert benchmark.first_slip('recieved', 'received') == 'reci'
  assert benchmark.first_slip('thier', 'their') == 'thi'
  assert benchmark.first_slip('untill', 'until') == 'untill'  # Goes on past the word.
  assert benchmark.first_slip('wich', 'which') == 'wi'
  occurrence = misspellings.Occurrence(('The', 'jury', 'received', 'it'), 2, 'recieved')
  assert benchmark.prefixes(occurrence) == {
      ('misspelt', 'whole'): 'The jury recieved', ('typed right', 'whole'): 'The jury receive',
      ('misspelt', 'first slip'): 'The jury reci', ('typed right', 'first slip'): 'The jury rece',
      ('misspelt', 'next word'): 'The jury recieved ',
      ('typed right', 'next word'): 'The jury received '}
  assert [benchmark.place(occurrence, cut) for cut in benchmark.CUTS] == [2, 2, 3]
  first = misspellings.Occurrence(('Until', 'then'), 0, 'Untill')
  assert benchmark.prefixes(first)[('typed right', 'whole')] == 'Unti'
  last = misspellings.Occurrence(('It', 'was', 'recieved'), 2, 'recieved')
  assert ('misspelt', 'next word') not in benchmark.prefixes(last)  # No word follows.


@pytest.mark.slow
def test_the_tallies_are_the_commands_completions(tiny_splits, kn3, tmp_path):
  """A model's tallies against `nplm complete --json --max_words=1`, with typos read and
  with --notypos, as a user runs it in another directory: the word in the wanted place of
  each completion's text."""
  listed = test_misspellings.LISTED
  result = benchmark.benchmark({'kn3': nplm.load(kn3)}, tiny_splits, listed, k=3)
  by_word, _ = misspellings.misspellings_by_word(listed)
  readable = [s for s in sentences_of(tiny_splits['test']) if reads_back(s)]
  found = misspellings.occurrences(readable, by_word)
  assert result['occurrences'] == len(found) == 2
  typed = [benchmark.prefixes(o) for o in found]
  (tmp_path / 'typed.txt').write_text(''.join(f'{p}\n' for each in typed for p in each.values()))
  assert any(prefix.endswith(' ') for each in typed for prefix in each.values())
  for way, flags in (('as typed', ['--notypos']), ('typos, uniform channel', [])):
    done = cli.run('complete', f'--workdir={kn3}', '--json', '--k=3', '--max_words=1',
                   '--file=typed.txt', *flags, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = iter(json.loads(line) for line in done.stdout.splitlines())
    counts = {f'{kind}, {cut}': {'first': 0, 'among_k': 0, 'prefixes': 0}
              for kind in benchmark.TYPED for cut in benchmark.CUTS}
    for o, each in zip(found, typed):
      for (kind, cut), prefix in each.items():
        line = next(lines)
        assert line['prefix'] == prefix
        at = o.position + (cut == 'next word')
        words = [c['text'].split()[at] for c in line['completions']]
        want = o.sentence[at]
        counts[f'{kind}, {cut}']['first'] += words[:1] == [want]
        counts[f'{kind}, {cut}']['among_k'] += want in words
        counts[f'{kind}, {cut}']['prefixes'] += 1
    assert result['models']['kn3']['ways'][way]['counts'] == counts, way
  assert 'kn3, typos, uniform channel' in benchmark.formatted(result, markdown=True)
