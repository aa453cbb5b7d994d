"""The confusion-set benchmark (experiments/benchmarks/confusion_sets.py): its sentences and
alternatives by hand, its accuracy against each alternative scored alone, its frequency
baseline against hand counts."""

import collections
import subprocess
import sys
from pathlib import Path

import pytest

import nplm
from experiments.benchmarks import brown_sentences, confusion_sets as benchmark
from nplm.config import ConfigError
from nplm.data import brown, brown_source
from nplm.use.trained import NoTrainedModelError
from tests.conftest import FIXTURE_DIR, FIXTURE_FILES, FIXTURE_WORDS, TINY_SPLIT

ROOT = Path(__file__).resolve().parents[1]
THEIR, TO, I_ME = ('their', 'there', "they're"), ('to', 'too', 'two'), ('I', 'me')


@pytest.fixture(scope='module')
def tiny_splits(tiny_corpus, tiny_data_dir):
  """The tiny corpus's tokens per split, words as written (tiny_corpus prepared them)."""
  texts = brown.load_texts(tiny_data_dir, FIXTURE_DIR, FIXTURE_WORDS, FIXTURE_FILES)
  return brown_source.split_tokens(brown_source.tokens_from_texts(texts), **TINY_SPLIT)


@pytest.fixture(scope='module')
def kn3(tiny_corpus, tiny_data_dir, tmp_path_factory):
  """A KN3 of the tiny corpus, fitted by `nplm ngram` (the tiny corpus standing for Brown)."""
  where = tmp_path_factory.mktemp('confusion') / 'kn3'
  fitted = subprocess.run(
      [sys.executable, '-m', 'tests.readme_substitutions', 'nplm', 'ngram', '--dataset=brown',
       f'--data_dir={tiny_data_dir}', '--unk_max_count=1', '--order=3', f'--out={where}'],
      cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
  assert fitted.returncode == 0, fitted.stderr
  return where


def test_sentences_and_their_alternatives_by_hand():
  tokens = ['Their', 'dog', 'ran', 'to', 'me', '.', "''", 'I', 'saw', 'it', '!', '!', '</p>',
            'Its', 'tail', '</text>']
  sentences = benchmark.sentences_of(tokens)
  assert sentences == [['Their', 'dog', 'ran', 'to', 'me', '.', "''"],
                       ['I', 'saw', 'it', '!', '!'], ['Its', 'tail']]
  found = benchmark.occurrences(sentences, benchmark.CONFUSION_SETS)
  first = "dog ran to me . ''"
  assert [(o.original, o.texts) for o in found] == [
      ('their', (f'Their {first}', f'There {first}', f"They're {first}")),
      ('its', ('Its tail', "It's tail")),
      ('to', (f'Their {first}', "Their dog ran too me . ''", "Their dog ran two me . ''")),
      ('me', ("Their dog ran to I . ''", f'Their {first}')),
      ('I', ('I saw it ! !', 'me saw it ! !'))]
  assert [o.members for o in found] == [THEIR, ('its', "it's"), TO, I_ME, I_ME]
  limited = benchmark.occurrences(sentences, [I_ME, THEIR], limit=1)
  assert [o.original for o in limited] == ['me', 'their']


def test_sets_are_named_by_any_member_and_unknown_names_refused():
  assert benchmark.chosen_sets(['than', 'their', 'there']) == [('then', 'than'), THEIR]
  assert benchmark.chosen_sets([]) == list(benchmark.CONFUSION_SETS)
  with pytest.raises(ConfigError, match="^--sets: no confusion set holds 'thier'; the sets"):
    benchmark.chosen_sets(['their', 'thier'])


def test_a_workdir_without_a_model_is_refused_in_one_line(tmp_path):
  with pytest.raises(NoTrainedModelError, match='holds no training run') as refused:
    brown_sentences.loaded(tmp_path)
  assert '\n' not in str(refused.value)


def test_sentences_that_brown_s_tokenizer_splits_are_told_apart():
  assert benchmark.reads_back(['With', 'your', 'beard', ',', '``', 'dear', "''", '!'])
  assert not benchmark.reads_back(['a', "ladies'", 'man'])


def test_the_frequency_baseline_against_a_hand_count():
  train = ['there', 'There', 'their', "they're", 'then', 'Than', 'than', 'me', 'Me', 'I',
           'THEIR']
  # there 2 (THEIR, all capitals, is neither spelling), than 2 to then 1, me 2 to I 1, none of
  # to/too/two: the first listed.
  assert benchmark.frequency_choices(train, [THEIR, ('then', 'than'), I_ME, TO]) == {
      THEIR: 'there', ('then', 'than'): 'than', I_ME: 'me', TO: 'to'}


def test_the_accuracy_equals_each_alternative_scored_alone(tiny_splits, kn3):
  model = nplm.load(kn3)
  result = benchmark.benchmark({'kn3': model}, tiny_splits, benchmark.CONFUSION_SETS)
  # The test split's 3 sentences; the first holds "ladies'" (and no member).
  assert (result['sentences'], result['sentences_left_out'],
          result['occurrences_left_out']) == (3, 1, 0)
  readable = [s for s in benchmark.sentences_of(tiny_splits['test']) if benchmark.reads_back(s)]
  found = benchmark.occurrences(readable, benchmark.CONFUSION_SETS)
  assert [o.original for o in found] == ['than', 'to', 'to', 'to', 'your', 'less', 'later']
  correct, total = collections.Counter(), collections.Counter()
  for occurrence in found:
    log_probs = [model.score(text).log_prob for text in occurrence.texts]
    best = log_probs.index(max(log_probs))  # The first listed on a tie.
    name = benchmark.set_name(occurrence.members)
    correct[name] += occurrence.members[best] == occurrence.original
    total[name] += 1
  accuracy = result['models']['kn3']['accuracy']
  assert accuracy['all']['correct'] == sum(correct.values())
  assert accuracy['all']['accuracy'] == pytest.approx(sum(correct.values()) / len(found))
  for name in result['sets']:
    assert (accuracy[name]['occurrences'], accuracy[name]['correct']) == (total[name],
                                                                         correct[name])
  # Tiny train: to 6, two 1, and none of your, than, less, later: the first listed wins.
  baseline = result['baseline']
  assert [baseline['choices'][name] for name in
          ('to/too/two', "your/you're", 'then/than', 'fewer/less', 'later/latter')] == [
              'to', 'your', 'then', 'fewer', 'later']
  assert baseline['accuracy']['all']['correct'] == 5  # Not than, not less.
  assert 'kn3' in benchmark.formatted(result, markdown=True)
