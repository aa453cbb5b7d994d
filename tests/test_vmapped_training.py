"""Many models in one program: each equals the same config trained alone by nplm.trainer
(losses, early stops, checkpoints, exact perplexities), resumes exactly, stops alone when it
diverges, and configs that cannot share a program are refused by name."""

import json
import math

import jax
import numpy as np
import pytest

from experiments.benchmarks import harness
from experiments.benchmarks import vmapped as vmapped_benchmark
from nplm import parallel
from nplm.run_files import saved_params as reading
from nplm.config import ConfigError
from nplm.training.run_checks import check_together
from nplm.trainer import run
from nplm.data import batching
from tests.test_benchmark import TINY_SHAPE, TINY_VOCAB
from tests.test_schedules import logged_rates
from tests.test_train import tiny_config

# Different seeds, learning rates, decays: the first and the last (weight decay and a
# decaying rate) stop early after 4 epochs, the second runs all 6.
MODELS = (dict(seed=1, learning_rate=1e-2), dict(seed=2, learning_rate=3e-3),
          dict(seed=4, learning_rate=3e-2, weight_decay=0.01, lr_decay=0.01))


def configs(root, name, **changes):
  return [tiny_config(root / f'{name}{k}', **{'data_seed': 7, 'epochs': 6, 'patience': 1,
                                               **model, **changes})
          for k, model in enumerate(MODELS)]


def saved_params(workdir, which):
  return jax.tree.map(np.asarray, reading.saved_params(workdir, latest=which == 'latest'))


def assert_params_close(workdir_a, workdir_b, which):
  a, b = saved_params(workdir_a, which), saved_params(workdir_b, which)
  assert jax.tree.structure(a) == jax.tree.structure(b)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope='module')
def together(tiny_corpus, tmp_path_factory):
  root = tmp_path_factory.mktemp('together')
  return root, run(configs(root, 'together'), tiny_corpus)


@pytest.mark.slow
def test_each_model_trained_together_equals_it_trained_alone(tiny_corpus, together, tmp_path):
  root, summaries = together
  alone = [run(config, tiny_corpus) for config in configs(tmp_path, 'alone')]
  assert [s['status'] for s in alone] == ['early_stopped', 'epochs_done', 'early_stopped']
  assert [s['epochs'] for s in alone] == [4, 6, 4]  # Each stopped on its own.
  for k, (mine, theirs) in enumerate(zip(summaries, alone)):
    for key in ('status', 'epochs', 'best_epoch', 'steps', 'parameters'):
      assert mine[key] == theirs[key], key
    np.testing.assert_allclose(mine['valid_ppl_history'], theirs['valid_ppl_history'], rtol=1e-5)
    for split in ('train', 'valid', 'test'):
      assert mine[f'{split}_ppl'] == pytest.approx(theirs[f'{split}_ppl'], rel=1e-5)
    for which in ('best', 'latest'):
      assert_params_close(root / f'together{k}', tmp_path / f'alone{k}', which)
    written = json.loads((root / f'together{k}' / 'summary.json').read_text())
    assert written['test_ppl'] == mine['test_ppl'] and written['trained_together'] == 3
    assert (root / f'together{k}' / 'learning_curve.png').stat().st_size > 0


@pytest.mark.slow
def test_a_model_trained_together_goes_on_alone(tiny_corpus, together, tmp_path):
  """Its workdir is a run's: nplm.trainer continues it as it would its own."""
  root, _ = together
  longer = dict(epochs=8, patience=8)
  alone = run(configs(tmp_path, 'alone')[1].replace(**longer), tiny_corpus)
  went_on = run(configs(root, 'together')[1].replace(**longer), tiny_corpus)
  assert went_on['epochs'] == alone['epochs'] == 8
  assert went_on['test_ppl'] == pytest.approx(alone['test_ppl'], rel=1e-5)


@pytest.mark.slow
def test_an_interrupted_run_resumes_to_the_same_numbers(tiny_corpus, together, tmp_path):
  _, uninterrupted = together
  first = run([c.replace(max_steps=130) for c in configs(tmp_path, 'm')], tiny_corpus)
  assert {s['status'] for s in first} == {'early_stopped', 'max_steps'}
  resumed = run(configs(tmp_path, 'm'), tiny_corpus)
  for mine, theirs in zip(resumed, uninterrupted):
    assert mine['steps'] == theirs['steps']
    assert mine['test_ppl'] == pytest.approx(theirs['test_ppl'], rel=1e-5)


@pytest.mark.slow
def test_validations_every_n_steps_and_plateau_decays_are_each_models_own(tiny_corpus,
                                                                          tmp_path):
  """Validations every 7 updates, plateau halving, the last update validated off the grid:
  each model trained together takes its own decays and stops, and reports what it would
  alone."""
  changes = dict(eval_every=7, lr_schedule='plateau', lr_decay=0.0, max_steps=61, log_every=1)
  together = run(configs(tmp_path, 'together', **changes), tiny_corpus)
  alone = [run(config, tiny_corpus) for config in configs(tmp_path, 'alone', **changes)]
  for k, (mine, theirs) in enumerate(zip(together, alone)):
    for key in ('status', 'valid_steps', 'best_step', 'steps'):
      assert mine[key] == theirs[key], key
    assert mine['reported']['parameters'] == theirs['reported']['parameters']
    assert mine['reported']['step'] == theirs['reported']['step']
    np.testing.assert_allclose(mine['valid_ppl_history'], theirs['valid_ppl_history'], rtol=1e-5)
    assert mine['test_ppl'] == pytest.approx(theirs['test_ppl'], rel=1e-5)
    rates = [logged_rates(tmp_path / f'{name}{k}') for name in ('together', 'alone')]
    assert rates[0] == pytest.approx(rates[1], rel=1e-6)
  assert len({tuple(sorted(logged_rates(tmp_path / f'alone{k}').values())) for k in range(3)}) == 3


@pytest.mark.slow
def test_a_diverging_model_stops_alone_and_the_others_finish(tiny_corpus, tmp_path):
  runs = configs(tmp_path, 'd', epochs=2)
  runs[1] = runs[1].replace(learning_rate=1e30)
  summaries = run(runs, tiny_corpus)
  assert summaries[1]['status'] == 'diverged'
  assert 'Lower its --learning_rate' in summaries[1]['error']
  assert not (tmp_path / 'd1' / 'summary.json').exists()
  for k in (0, 2):
    assert math.isfinite(summaries[k]['test_ppl'])
    assert (tmp_path / f'd{k}' / 'summary.json').exists()


@pytest.mark.parametrize('first, others, message', [
    ({}, dict(hidden_size=20), 'their --hidden_size differ'),
    (dict(data_seed=-1), dict(data_seed=-1), 'give them one --data_seed'),
    ({}, dict(workdir='same'), 'a --workdir of its own'),
    # An LSTM reads neither --order nor --direct: their defaults.
    (dict(model='lstm', order=5, direct=False), dict(model='lstm', order=5, direct=False),
     'feed-forward models'),
])
def test_configs_that_cannot_share_a_program_are_refused(tmp_path, first, others, message):
  runs = configs(tmp_path, 'r')
  runs = [runs[0].replace(**first)] + [run.replace(**others) for run in runs[1:]]
  with pytest.raises(ConfigError, match=message):
    check_together(runs)


@pytest.mark.slow
def test_the_benchmark_times_the_same_models_both_ways(tmp_path):
  ids = np.random.default_rng(0).integers(0, TINY_VOCAB, 100).astype(np.int32)
  counts = np.ones(TINY_VOCAB)
  report = vmapped_benchmark.run_benchmark(ids, counts, 1, 'tiny', batch_size=4, steps=3,
                                           repeats=2, model_counts=(1, 3), shape=TINY_SHAPE)
  assert [row['models'] for row in report['rows']] == [1, 3]
  for row in report['rows']:
    for way in ('together', 'one_by_one'):
      assert len(row[way]['runs']) == 2 and row[way]['min'] <= row[way]['median'] > 0
    assert row['together_over_one_by_one'] == pytest.approx(
        row['together']['median'] / row['one_by_one']['median'])
  assert '| 3 |' in vmapped_benchmark.format_report(report, markdown=True)

  # What is timed both ways is the same training: the same losses after the same batches.
  config = harness.shape_config(TINY_SHAPE, 4)
  configs = vmapped_benchmark.model_configs(config, 3)
  padded = batching.pad_split(ids, config.order, 1)
  batches = harness.benchmark_batches(len(ids), 4, 5)
  mesh = parallel.make_mesh()
  together = vmapped_benchmark.together_runner(configs, counts, padded, mesh)(batches)
  one_by_one = vmapped_benchmark.one_by_one_runner(configs, counts, padded, mesh)(batches)
  assert len(set(one_by_one)) == 3
  np.testing.assert_allclose(together, one_by_one, rtol=1e-5)
