"""Mixture weights by EM: never a lower likelihood, the optimum a grid search finds, never
worse than the better component on the tokens they were fitted on, normalized mixtures."""

import numpy as np
import pytest

from nplm.ngram import mixture
from nplm.ngram import perplexity


def random_components(tokens=3000, vocab=20, seed=0):
  """Log-probabilities of the observed tokens under three different normalized models."""
  rng = np.random.default_rng(seed)
  targets = rng.zipf(1.5, tokens) % vocab
  models = [rng.dirichlet(np.full(vocab, alpha), tokens) for alpha in (0.3, 1.0, 5.0)]
  distributions = np.stack(models, axis=1)  # [T, K, V]
  return np.log(distributions[np.arange(tokens), :, targets]), distributions, targets


def test_em_never_lowers_the_likelihood_and_stops_converged():
  log_probs, _, _ = random_components()
  bins = np.arange(len(log_probs)) % 4
  fitted = mixture.fit_weights(log_probs, bins, num_bins=5, tolerance=1e-10)
  history = np.array(fitted.log_likelihoods)
  assert fitted.iterations >= 3
  assert np.all(np.diff(history) >= -1e-9)
  np.testing.assert_allclose(fitted.weights.sum(axis=1), 1.0)
  np.testing.assert_allclose(fitted.weights[4], 1 / 3)  # No tokens in bin 4: initial weights.
  assert fitted.tokens_per_bin.tolist() == [750, 750, 750, 750, 0]
  assert np.sum(mixture.mix(log_probs, bins, fitted.weights)) == pytest.approx(history[-1])


def test_em_finds_the_weight_a_grid_search_finds():
  log_probs, _, _ = random_components(seed=1)
  pair = log_probs[:, :2]
  fitted = mixture.fit_weights(pair, tolerance=1e-12, max_iterations=5000)
  grid = np.linspace(0, 1, 10001)
  likelihood = [np.sum(np.logaddexp(np.log(g) + pair[:, 0], np.log1p(-g) + pair[:, 1]))
                if 0 < g < 1 else -np.inf for g in grid]
  assert fitted.weights[0, 0] == pytest.approx(grid[int(np.argmax(likelihood))], abs=2e-4)


@pytest.mark.parametrize('num_bins', [1, 3])
def test_mixture_never_worse_than_its_better_component_where_fitted(num_bins):
  for seed in range(4):
    log_probs, _, _ = random_components(seed=seed)
    bins = np.arange(len(log_probs)) % num_bins
    fitted = mixture.fit_weights(log_probs, bins, num_bins)
    mixed = perplexity(mixture.mix(log_probs, bins, fitted.weights))
    assert mixed <= min(perplexity(log_probs[:, k]) for k in range(3)) + 1e-9


def test_a_mixture_of_normalized_models_is_normalized():
  _, distributions, _ = random_components(tokens=50)
  weights = np.array([[0.2, 0.5, 0.3], [0.6, 0.0, 0.4]])
  bins = np.arange(50) % 2
  vocab = distributions.shape[2]
  totals = [np.exp(mixture.mix(np.log(distributions[:, :, w]), bins, weights)) for w in range(vocab)]
  np.testing.assert_allclose(np.sum(totals, axis=0), 1.0)


def test_bad_inputs_are_refused():
  log_probs, _, _ = random_components(tokens=10)
  with pytest.raises(ValueError, match='bins'):
    mixture.fit_weights(log_probs, np.full(10, 3), num_bins=2)
  with pytest.raises(ValueError, match='non-zero probability'):
    mixture.fit_weights(np.full((4, 2), -np.inf))
