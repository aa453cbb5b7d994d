"""The word2vec benchmark on the tiny corpus: gensim and nplm trained on the same words with
the translated settings, speeds as words × epochs ÷ seconds, the report written."""

import collections
import json

import pytest

from experiments.benchmarks import word2vec as benchmark
from nplm.config import Config, ConfigError
from tests.benchmark_clock import BenchmarkClock
from tests.conftest import TINY_SPLIT

TINY_CBOW = dict(model='cbow', feature_size=8, window=2, subsample=1e-2,
                 head='negative_sampling', num_samples=3, proposal_power=0.75, optimizer='sgd',
                 lr_schedule='linear', learning_rate=0.05, batch_size=16, epochs=2,
                 eval_batch_size=64, log_every=100, unk_max_count=1, **TINY_SPLIT)


def test_the_settings_are_translated_field_by_field():
  config = Config(workdir='unused', **TINY_CBOW).validate()
  assert benchmark.gensim_settings(config, workers=3) == {
      'sg': 0, 'hs': 0, 'negative': 3, 'ns_exponent': 0.75, 'vector_size': 8, 'window': 2,
      'sample': 1e-2, 'epochs': 2, 'alpha': 0.05 / 16, 'min_alpha': pytest.approx(0.05e-4 / 16),
      'min_count': 1, 'cbow_mean': 1, 'workers': 3, 'seed': 0}
  tree = config.replace(model='skipgram', head='tree', tree='huffman', num_samples=100,
                        proposal_power=1.0).validate()  # The tree reads neither: defaults.
  settings = benchmark.gensim_settings(tree, workers=1)
  assert (settings['sg'], settings['hs'], settings['negative']) == (1, 1, 0)
  # nplm's step is on the mean of 16 positions' pairs, 3 per position on average (radius 1, 2).
  assert settings['alpha'] == pytest.approx(0.05 / (16 * 3))
  for changes, phrase in [({'head': 'softmax'}, 'no gensim counterpart'),
                          ({'head': 'tree', 'tree': 'balanced'}, 'no gensim counterpart'),
                          ({'lr_schedule': 'inverse'}, '--lr_schedule=linear')]:
    with pytest.raises(ConfigError, match=phrase):
      benchmark.gensim_settings(tree.replace(**changes).validate(), workers=1)


def test_both_train_on_the_same_words_and_the_report_compares_them(tiny_corpus, tmp_path,
                                                                   monkeypatch):
  BenchmarkClock(tick=0.5).install(monkeypatch, benchmark)  # gensim's train() takes 0.5 s.
  config = Config(workdir=str(tmp_path / 'runs' / 'cbow_ns'), **TINY_CBOW).validate()
  result = benchmark.measure({'cbow_ns': config}, tiny_corpus, workers=2)

  train = tiny_corpus.vocab.decode(tiny_corpus.splits['train'])
  assert result['train_words'] == len(train) == TINY_SPLIT['train_tokens']
  entry = result['configs']['cbow_ns']
  assert entry['gensim']['vocab_size'] == len(collections.Counter(train))
  assert entry['nplm']['vocab_size'] == tiny_corpus.vocab.size
  for side in ('gensim', 'gensim_default_rate', 'nplm'):
    got = entry[side]
    assert got['epochs'] == 2 and got['seconds'] > 0
    assert got['words_per_second'] == pytest.approx(len(train) * 2 / got['seconds'])
    assert got['scores']['analogies']['questions'] == 19544
  assert entry['gensim']['seconds'] == entry['gensim_default_rate']['seconds'] == 0.5
  # nplm's time is its run's training time, as its summary.json recorded it.
  written = json.loads((tmp_path / 'runs' / 'cbow_ns' / 'summary.json').read_text())
  assert (entry['nplm']['seconds'], entry['nplm']['epochs']) == (
      written['train_seconds'], written['epochs'])
  for ratio, peer in (('nplm_over_gensim', 'gensim'),
                      ('nplm_over_gensim_default_rate', 'gensim_default_rate')):
    assert entry[ratio]['words_per_second'] == pytest.approx(
        entry['nplm']['words_per_second'] / entry[peer]['words_per_second'])
    for score, key in (('wordsim353', 'spearman'), ('simlex999', 'spearman'),
                       ('analogies', 'accuracy')):
      ours, theirs = entry['nplm']['scores'][score][key], entry[peer]['scores'][score][key]
      assert entry[ratio][score] == (ours / theirs if ours is not None and theirs else None)

  with pytest.raises(ConfigError, match='exists'):  # Its time would not be measured now.
    benchmark.measure({'cbow_ns': config}, tiny_corpus, workers=2)

  benchmark.report(result, benchmark.format_report, str(tmp_path / 'word2vec'))
  assert json.loads((tmp_path / 'word2vec.json').read_text())['configs']['cbow_ns']
  table = (tmp_path / 'word2vec.md').read_text()
  assert '| cbow_ns | gensim |' in table and '| cbow_ns | nplm / gensim |' in table
  assert '| cbow_ns | gensim α 0.025 |' in table
  assert table.count('\n| cbow_ns |') == 5  # Three trainings and two ratios.
  assert '| cbow_ns | nplm |' in table and f'{entry["nplm"]["words_per_second"]:,.0f} |' in table
