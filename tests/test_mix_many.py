"""`nplm mix` of several models: equal, learned and binned weights against numpy, from each
model's own per-token log-probs; the command's table; a bad path in --with refused."""

import math
import subprocess

import numpy as np
import pytest

from nplm import trainer
from nplm.cli import mix as mix_program
from nplm.cli import ngram as ngram_program
from nplm.config import Config
from nplm.data.datasets import load_dataset
from nplm.use.ngram_run import save_ngram_run
from nplm.use.trained import load_trained
from tests.conftest import write_text_corpus
from tests.test_ngram_models import context_bins_by_hand
from nplm.data.config_checks import validated_data
from tests import cli

SPLITS = ('valid', 'test')


@pytest.fixture(scope='module')
def models(tmp_path_factory):
  """(corpus, {name: DIR}, {name: {split: log p}}): two tiny networks trained together for a
  few steps, KN3 saved as `nplm ngram` saves it, and DelInt3's log-probs, on one corpus."""
  root = tmp_path_factory.mktemp('mix_many')
  data = dict(dataset=f'text:{write_text_corpus(root / "toy")}', data_dir=str(root / 'tfds'))
  config = validated_data(Config(workdir='', **data).resolved())
  corpus = load_dataset(config)
  where = {'net1': root / 'net1', 'net2': root / 'net2', 'KN3': root / 'KN3'}
  trainer.run([Config(workdir=str(where[name]), seed=seed, data_seed=0, order=3,
                      feature_size=8, hidden_size=8, batch_size=8, eval_batch_size=64,
                      epochs=1, max_steps=30, eval_splits='valid', **data)
               for seed, name in enumerate(('net1', 'net2'))], corpus)
  kn3, spelt, summary = ngram_program.results(corpus, config, 'kn', 3)
  save_ngram_run(where['KN3'], kn3, spelt, corpus, summary)
  delint3, _, _ = ngram_program.results(corpus, config, 'delint', 3)
  log_probs = {name: {s: load_trained(path).split_log_probs(corpus.splits[s]) for s in SPLITS}
               for name, path in where.items()}
  log_probs['DelInt3'] = {s: delint3.log_prob_split(corpus.splits[s]) for s in SPLITS}
  return corpus, where, log_probs


def numpy_perplexity(log_probs: list[np.ndarray], weights: np.ndarray) -> float:
  """exp(-mean log Σ_i α_i p_i): `weights` [K], or [N, K] for one row per token."""
  p = np.exp(np.stack(log_probs, axis=1))
  return math.exp(-np.mean(np.log(np.sum(np.broadcast_to(weights, p.shape) * p, axis=1))))


@pytest.mark.slow
def test_three_models_mixed_three_ways_match_numpy(models):
  corpus, where, log_probs = models
  names = ['net1', 'net2', 'KN3']
  got, mixed = mix_program.mixes([load_trained(where[name]) for name in names], corpus)
  for model_log_probs, name in zip(got, names):
    for s in SPLITS:
      np.testing.assert_array_equal(model_log_probs[s], log_probs[name][s])
  per_split = {s: [log_probs[name][s] for name in names] for s in SPLITS}
  for s in SPLITS:
    p = np.exp(np.stack(per_split[s], axis=1))
    assert mixed['fixed']['ppl'][s] == pytest.approx(
        math.exp(-np.mean(np.log(np.mean(p, axis=1)))), rel=1e-12)
  learned = mixed['learned']['weights'][0]
  assert learned.shape == (3,) and np.all(learned >= 0) and learned.sum() == pytest.approx(1)
  for s in SPLITS:
    assert mixed['learned']['ppl'][s] == pytest.approx(numpy_perplexity(per_split[s], learned),
                                                       rel=1e-12)
  # The optimum of the concave log-likelihood on the simplex (KKT): the gradient
  # mean_t p_i / p_mix is 1 for every weight above 0, and at most 1 for the others.
  p = np.exp(np.stack(per_split['valid'], axis=1))
  gradient = np.mean(p / (p @ learned)[:, None], axis=0)
  assert np.all(gradient <= 1 + 1e-3)
  np.testing.assert_allclose(gradient[learned > 0.05], 1, atol=1e-3)
  best_alone = min(math.exp(-np.mean(lp)) for lp in per_split['valid'])
  assert mixed['learned']['ppl']['valid'] <= min(best_alone, mixed['fixed']['ppl']['valid'])
  binned = mixed['binned']['weights']
  np.testing.assert_allclose(binned.sum(axis=1), 1)
  for s in SPLITS:
    per_token = binned[context_bins_by_hand(corpus, s)]
    assert mixed['binned']['ppl'][s] == pytest.approx(
        numpy_perplexity(per_split[s], per_token), rel=1e-12)
  assert mixed['binned']['ppl']['valid'] <= best_alone


def nplm(*args: str) -> subprocess.CompletedProcess:
  return cli.run(*args)


@pytest.mark.slow
def test_mix_of_four_from_the_command_line(models):
  corpus, where, log_probs = models
  result = nplm('mix', f'--workdir={where["net1"]}', f'--with={where["net2"]}, {where["KN3"]}',
                '--with_trigram')
  assert result.returncode == 0 and 'Traceback' not in result.stderr, result.stderr
  lines = result.stdout.splitlines()
  assert lines[1] == 'mixed with 3 more, numbered (weights in this order):'
  assert lines[2].startswith(f'  1. {where["net1"]}: nnlm order 3')
  assert lines[4] == f'  3. {where["KN3"]}: KN3'
  assert lines[5] == '  4. DelInt3 fitted on this corpus (weights by EM on valid)'
  numbers = {line[:34].strip(): [float(x) for x in line[34:].split()] for line in lines[7:-1]}
  names = ['net1', 'net2', 'KN3', 'DelInt3']
  for i, name in enumerate(names, 1):
    assert numbers[f'model {i} alone'] == pytest.approx(
        [math.exp(-np.mean(log_probs[name][s])) for s in SPLITS], abs=0.01)
  per_split = {s: [log_probs[name][s] for name in names] for s in SPLITS}
  assert numbers['mix, equal weights (1/4)'] == pytest.approx(
      [numpy_perplexity(per_split[s], np.full(4, 0.25)) for s in SPLITS], abs=0.01)
  label, weights = lines[-1].split(': ')
  assert label == 'learned weights (EM on valid)'
  weights = np.array([float(w) for w in weights.split()])
  assert weights.shape == (4,) and weights.sum() == pytest.approx(1, abs=2e-3)
  assert numbers['mix, learned weights (see below)'] == pytest.approx(
      [numpy_perplexity(per_split[s], weights) for s in SPLITS], rel=1e-2)
  assert numbers['mix, learned weights (see below)'][0] <= min(
      numbers['mix, equal weights (1/4)'][0], *(numbers[f'model {i} alone'][0] for i in
                                                range(1, 5)))
  assert set(numbers) == {*(f'model {i} alone' for i in range(1, 5)), 'mix, equal weights (1/4)',
                          'mix, learned weights (see below)', 'mix, weights per bin (16 bins)'}


@pytest.mark.slow
def test_a_bad_path_in_the_list_is_one_line(models, tmp_path):
  _, where, _ = models
  missing = tmp_path / 'no_such_run'
  refused = nplm('mix', f'--workdir={where["net1"]}', f'--with={where["KN3"]},{missing}')
  assert refused.returncode == 2 and 'Traceback' not in refused.stderr
  assert refused.stderr.strip().splitlines() == [
      f'error: {missing}: no such directory (give the --workdir of a run)']
