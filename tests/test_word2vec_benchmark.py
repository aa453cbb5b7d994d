"""The word2vec benchmark on the tiny corpus: gensim and nplm trained on the same words with
the same settings, once per seed; means and spreads over the seeds, nplm - gensim, the goals;
speeds as words × epochs ÷ seconds; the speed section on a small generated corpus."""

import json
import statistics
from pathlib import Path

import numpy as np
import pytest

from experiments.benchmarks import word2vec as benchmark
from nplm.config import Config, ConfigError
from nplm import recipes
from nplm.data.datasets import load_dataset
from nplm.run_files.saved_params import saved_params
from tests.benchmark_clock import BenchmarkClock
from tests.conftest import TINY_SPLIT
from nplm.training.config_checks import validated

TINY_CBOW = dict(model='cbow', feature_size=8, window=2, subsample=1e-2,
                 head='negative_sampling', num_samples=3, proposal_power=0.75, optimizer='sgd',
                 lr_schedule='linear', learning_rate=0.05, min_learning_rate=1e-3,
                 batch_size=16, epochs=2, eval_batch_size=64, log_every=100, unk_max_count=1,
                 **TINY_SPLIT)
FIGURES = ('wordsim353', 'simlex999', 'analogies', 'words_per_second')


def recipe_flags(name: str) -> dict:
  """A recipe file's --flag=value lines, read as text."""
  lines = (Path(recipes.__file__).parent / f'{name}.flags').read_text().splitlines()
  return dict(line.strip()[2:].split('=', 1) for line in lines if line.startswith('--'))


def test_the_settings_are_the_configs_field_by_field():
  config = validated(Config(workdir='unused', **TINY_CBOW))
  assert benchmark.gensim_settings(config, workers=3) == {
      'sg': 0, 'hs': 0, 'negative': 3, 'ns_exponent': 0.75, 'vector_size': 8, 'window': 2,
      'sample': 1e-2, 'epochs': 2, 'alpha': 0.05, 'min_alpha': 1e-3, 'min_count': 1,
      'cbow_mean': 1, 'workers': 3, 'seed': 0}
  tree = validated(config.replace(model='skipgram', head='tree', tree='huffman', num_samples=100,
                        proposal_power=1.0, seed=7))  # The tree reads neither.
  settings = benchmark.gensim_settings(tree, workers=1)
  assert (settings['sg'], settings['hs'], settings['negative'], settings['seed']) == (1, 1, 0, 7)
  assert (settings['alpha'], settings['min_alpha']) == (0.05, 1e-3)  # Per pair: as it stands.
  for name in benchmark.CONFIGS:  # The recipes' own numbers, read from their files.
    flags = recipe_flags(name)
    settings = benchmark.gensim_settings(benchmark.flagfile_config(name, workdir='unused'), 2)
    assert (settings['alpha'], settings['min_alpha']) == (
        float(flags['learning_rate']), float(flags['min_learning_rate']))
    assert (settings['vector_size'], settings['window'], settings['sample'],
            settings['epochs']) == (int(flags['feature_size']), int(flags['window']),
                                    float(flags['subsample']), int(flags['epochs']))
    assert settings['sg'] == (flags['model'] == 'skipgram')
    assert settings['negative'] == int(flags.get('num_samples', 0))
  for changes, phrase in [({'tree': 'balanced'}, 'no gensim counterpart'),
                          ({'lr_schedule': 'inverse', 'min_learning_rate': 0.0},
                           '--lr_schedule=linear')]:
    with pytest.raises(ConfigError, match=phrase):
      benchmark.gensim_settings(validated(tree.replace(**changes)), workers=1)


def entry(wordsim, simlex, analogies, words_per_second) -> dict:
  """One trained side's figures, as seed_runs records them."""
  return {'scores': {'wordsim353': {'spearman': wordsim}, 'simlex999': {'spearman': simlex},
                     'analogies': {'accuracy': analogies}},
          'words_per_second': words_per_second}


def test_figures_over_seeds_their_differences_and_the_goals():
  nplm = benchmark.over_seeds([entry(0.30, 0.10, 0.020, 400.0), entry(0.34, 0.16, 0.030, 100.0),
                               entry(0.32, 0.13, None, 300.0)])
  gensim = benchmark.over_seeds([entry(0.31, 0.12, 0.030, 800.0), entry(0.35, 0.11, 0.040, 500.0),
                                 entry(0.33, 0.13, 0.050, 900.0)])
  assert nplm['wordsim353'] == pytest.approx({'mean': 0.32, 'spread': 0.04, 'median': 0.32})
  assert nplm['simlex999'] == pytest.approx({'mean': 0.13, 'spread': 0.06, 'median': 0.13})
  assert nplm['analogies'] == {'mean': None, 'spread': None, 'median': None}  # A seed's is None.
  assert nplm['words_per_second'] == pytest.approx(
      {'mean': 800 / 3, 'spread': 300.0, 'median': 300.0})
  difference = benchmark.differences(nplm, gensim)
  assert difference == pytest.approx({'wordsim353': -0.01, 'simlex999': 0.01,
                                      'analogies_points': None, 'speed_ratio': 300 / 800})
  assert benchmark.verdicts(difference) == {'wordsim353': True, 'simlex999': True,
                                            'analogies_points': None, 'speed_ratio': False}
  at_the_edges = {'wordsim353': 0.02, 'simlex999': -0.0201, 'analogies_points': -1.0,
                  'speed_ratio': 1.0}
  assert benchmark.verdicts(at_the_edges) == {'wordsim353': True, 'simlex999': False,
                                              'analogies_points': True, 'speed_ratio': True}
  assert benchmark.verdicts({**at_the_edges, 'analogies_points': 1.01,
                             'speed_ratio': 0.99}) == {
      'wordsim353': True, 'simlex999': False, 'analogies_points': False, 'speed_ratio': False}


def expected_over_seeds(runs: list[dict], figure: str):
  values = [run['words_per_second'] if figure == 'words_per_second' else
            run['scores'][figure]['accuracy' if figure == 'analogies' else 'spearman']
            for run in runs]
  if None in values:
    return None, None
  return statistics.mean(values), max(values) - min(values)


@pytest.mark.slow
def test_each_seed_trains_both_and_the_report_aggregates_them(tiny_corpus, tmp_path,
                                                              monkeypatch):
  BenchmarkClock(tick=0.5).install(monkeypatch, benchmark)  # gensim's train() takes 0.5 s.
  config = validated(Config(workdir=str(tmp_path / 'runs' / 'cbow_ns'), **TINY_CBOW))
  result = benchmark.measure({'cbow_ns': config}, tiny_corpus, seeds=(0, 1), workers=2)

  train = tiny_corpus.vocab.decode(tiny_corpus.splits['train'])
  assert result['train_words'] == len(train) == TINY_SPLIT['train_tokens']
  got = result['configs']['cbow_ns']
  assert got['seeds'] == [0, 1] and got['settings']['alpha'] == 0.05
  vectors = []
  for seed in (0, 1):
    nplm, gensim = got['runs']['nplm'][seed], got['runs']['gensim'][seed]
    assert nplm['seed'] == gensim['seed'] == seed
    assert gensim['vocab_size'] == len(set(train)) and nplm['vocab_size'] == tiny_corpus.vocab.size
    assert gensim['seconds'] == 0.5 and gensim['words_per_second'] == len(train) * 2 / 0.5
    # nplm's time is its run's, as its summary.json recorded it: the updates after the first
    # (compiled) one, over the share of the positions they trained.
    written = json.loads((tmp_path / 'runs' / f'cbow_ns-seed{seed}' / 'summary.json').read_text())
    assert written['config']['seed'] == seed and written['evaluated'] == {}  # Not asked.
    vectors.append(saved_params(tmp_path / 'runs' / f'cbow_ns-seed{seed}')['model']['C'])
    timed = written['train_examples_per_second'] * written['train_seconds']
    assert (nplm['seconds'], nplm['epochs']) == (written['train_seconds'], 2)
    assert nplm['words_per_second'] == pytest.approx(
        len(train) * 2 * timed / (timed + 16) / written['train_seconds'])
    assert nplm['scores']['analogies']['questions'] == 19544
  # Two seeds, two different trainings.
  assert not np.array_equal(vectors[0]['embedding'], vectors[1]['embedding'])
  for who in ('nplm', 'gensim'):
    for figure in FIGURES:
      mean, spread = expected_over_seeds(got['runs'][who], figure)
      summary = got['over_seeds'][who][figure]
      assert (summary['mean'], summary['spread']) == pytest.approx((mean, spread))
  speeds = [[run['words_per_second'] for run in got['runs'][who]] for who in ('nplm', 'gensim')]
  assert got['nplm_minus_gensim']['speed_ratio'] == pytest.approx(
      statistics.median(speeds[0]) / statistics.median(speeds[1]))
  assert got['goals_met']['speed_ratio'] == (got['nplm_minus_gensim']['speed_ratio'] >= 1.0)

  with pytest.raises(ConfigError, match='exists'):  # Its time would not be measured now.
    benchmark.measure({'cbow_ns': config}, tiny_corpus, seeds=(2, 1), workers=2)
  assert not (tmp_path / 'runs' / 'cbow_ns-seed2').exists()  # Refused before any training.

  benchmark.report(result, benchmark.format_report, str(tmp_path / 'word2vec'))
  assert json.loads((tmp_path / 'word2vec.json').read_text())['configs']['cbow_ns']
  table = (tmp_path / 'word2vec.md').read_text()
  assert 'over seeds 0, 1' in table
  assert table.count('\n| cbow_ns |') == 4  # nplm, gensim, their difference, the goals.
  ratio = got['nplm_minus_gensim']['speed_ratio']
  assert '| cbow_ns | nplm − gensim |' in table and f'| {ratio:.2f}× |' in table
  verdict = 'met' if got['goals_met']['speed_ratio'] else 'not met'
  assert [line for line in table.splitlines() if line.startswith('| cbow_ns | goal |')][0] \
      .endswith(f'| {verdict} |')
  wps = got['over_seeds']['gensim']['words_per_second']
  assert f'| {wps["mean"]:,.0f} ± {wps["spread"]:,.0f} |' in table


@pytest.mark.slow
def test_the_speed_section_on_a_generated_corpus(tmp_path, monkeypatch):
  BenchmarkClock(tick=0.25).install(monkeypatch, benchmark)
  configs, generated = benchmark.speed_configs(['cbow_ns'], tmp_path, tokens=30_000, types=2000)
  config = configs['cbow_ns']
  assert generated == {'tokens': 30_000, 'types': 2000}
  assert (config.dataset, config.epochs, config.unk_max_count) == (
      f'text:{tmp_path / "speed" / "corpus"}', 1, int(recipe_flags('cbow_ns')['unk_max_count']))
  corpus = load_dataset(config)
  assert (tmp_path / 'speed' / 'tfds').is_dir()
  speed = benchmark.measure_speed(configs, corpus, generated, workers=2)

  lines = (tmp_path / 'speed' / 'corpus' / 'train.txt').read_text().splitlines()
  words = sum(len(line.split()) + 1 for line in lines)  # Each line's words and its <eos>.
  got = speed['configs']['cbow_ns']
  assert speed['train_words'] == words and got['gensim']['words_per_second'] == words / 0.25
  written = json.loads((tmp_path / 'runs' / 'cbow_ns-speed' / 'summary.json').read_text())
  assert written['epochs'] == 1 and got['nplm']['seconds'] == written['train_seconds']
  assert got['speed_ratio'] == pytest.approx(
      got['nplm']['words_per_second'] / got['gensim']['words_per_second'])
  assert got['speed_ratio_met'] == (got['speed_ratio'] >= 0.5)
  text = benchmark.format_report({'machine': {**benchmark.machine_info(), 'usable_cores': 2},
                                  'gensim': '4', 'train_words': 1, 'vocab_size': 1,
                                  'workers': 2, 'configs': {}, 'workdirs': {}, 'speed': speed},
                                 markdown=True)
  assert f'| cbow_ns | {got["nplm"]["words_per_second"]:,.0f} | {words / 0.25:,.0f} | ' in text
  with pytest.raises(ConfigError, match='exists'):
    benchmark.measure_speed(configs, corpus, generated, workers=2)


@pytest.mark.parametrize('seeds', [[], ['0', 'x'], ['1', '1'], ['-1']])
def test_malformed_seeds_are_refused(seeds):
  with pytest.raises(ConfigError, match='--seeds must be distinct integers'):
    benchmark.parse_seeds(seeds)


def test_configs_that_read_different_data_are_refused(tmp_path):
  assert benchmark.parse_seeds(['2', '0']) == (2, 0)
  with pytest.raises(ConfigError, match='names no flagfile'):
    benchmark.flagfile_configs([], tmp_path, '', 0, 0)
  configs = benchmark.flagfile_configs(['cbow_ns', 'skipgram_hs'], tmp_path, '', 2000, 1)
  assert configs['cbow_ns'].workdir == str(tmp_path / 'runs' / 'cbow_ns')
  assert configs['cbow_ns'].chunk_positions == int(recipe_flags('cbow_ns')['chunk_positions'])
  chunked = benchmark.flagfile_configs(['cbow_ns'], tmp_path, '', 2000, 1, chunk=0)
  assert chunked['cbow_ns'].chunk_positions == 0  # --chunk_positions=0: an accelerator's.
  with pytest.raises(ConfigError, match='read different data'):
    benchmark.same_data({name: config.replace(unk_max_count=k) for k, (name, config)
                         in enumerate(configs.items())})
