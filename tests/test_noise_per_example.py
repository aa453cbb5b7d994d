"""--noise_per_example: the NCE and negative-sampling heads drawing k noise words for each
example (as word2vec does) instead of k shared by the batch. Expected values come from numpy
(the exact expectation over Q) and brute-force softmax sums, never from the head under test.
"""

import types
from pathlib import Path

import jax
import numpy as np
import pytest

from nplm.run_files.saved_params import saved_params
from nplm.config import Config, ConfigError
from nplm.heads import build_head
from nplm.trainer import run
from tests.test_heads import (D, SMALL_D, SMALL_V, V, initial_valid_perplexity, make_head,
                              random_hidden, random_params, unit_scores, zipf_counts)
from tests.test_train import brute_force_perplexity, tiny_config
from nplm.training.config_checks import validated


def expected_noise_loss(params, hidden, counts, k, power, negative_sampling):
  """Σ_i E[softplus(Δs(ṽ_i))] = k Σ_w Q(w) softplus(Δs(w)) per example, in numpy, with
  Q ∝ count^power and Δs = s (negative sampling) or s - log(k Q) (NCE)."""
  q = counts.astype(np.float64) ** power
  q /= q.sum()
  delta = unit_scores(params['output'], hidden.astype(np.float64))
  if not negative_sampling:
    delta = delta - np.log(k * q)
  return k * (np.logaddexp(0.0, delta) * q).sum(axis=1)


@pytest.mark.parametrize('head_name', ['nce', 'negative_sampling'])
@pytest.mark.slow
def test_noise_per_example_is_drawn_apart_and_matches_the_expected_loss(head_name):
  """With one hidden vector and one target for every example, noise shared by the batch
  gives every example the same loss; noise drawn per example gives them different losses,
  whose mean over the batch and 50 draws is the numpy expectation
  softplus(-Δs(t)) + k Σ_w Q(w) softplus(Δs(w)) within 2%."""
  k, power, batch, counts = 5, 0.75, 400, zipf_counts(SMALL_V)
  make = lambda per_example: make_head(head_name, SMALL_V, SMALL_D, counts=counts,
                                        num_samples=k, proposal_power=power,
                                        noise_per_example=per_example)
  params = random_params(make(False), SMALL_D, seed=11)
  hidden = np.repeat(random_hidden(1, SMALL_D, seed=12), batch, axis=0)
  targets = np.full(batch, 3, np.int32)

  def losses(head, seed):
    return np.asarray(head.apply({'params': params}, hidden, targets, jax.random.key(seed),
                                 method=head.loss), np.float64)

  assert np.ptp(losses(make(False), 0)) == 0
  per_example = np.stack([losses(make(True), seed) for seed in range(50)])
  assert np.ptp(per_example[0]) > 0
  data_delta = unit_scores(params['output'], hidden[:1].astype(np.float64))[0, 3]
  if head_name == 'nce':
    q = counts[3] ** power / np.sum(counts ** power)
    data_delta -= np.log(k * q)
  want = np.logaddexp(0.0, -data_delta) + expected_noise_loss(
      params, hidden[:1], counts, k, power, head_name == 'negative_sampling')[0]
  assert per_example.mean() == pytest.approx(want, rel=0.02)


def test_noise_per_example_is_refused_for_other_heads_and_vocabulary_parallel_rows():
  with pytest.raises(ConfigError, match='--noise_per_example is read by --head=nce, '
                     'negative_sampling, not --head=is'):
    validated(Config(workdir='unused', head='is', noise_per_example=True))
  two_row_shards = types.SimpleNamespace(shape={'data': 1, 'model': 2})  # All it reads.
  with pytest.raises(ConfigError, match='vocabulary-parallel'):
    build_head(Config(workdir='unused', head='nce', noise_per_example=True), zipf_counts(V),
               D, two_row_shards)


@pytest.mark.slow
def test_a_run_with_noise_per_example_learns_and_reports_the_exact_softmax_perplexity(
    tiny_corpus, tmp_path):
  """Two epochs of an NNLM under NCE with noise drawn per example lower the exact validation
  perplexity by at least 5%, and every reported perplexity is the full softmax over the saved
  parameters, summed in numpy."""
  config = tiny_config(tmp_path, head='nce', num_samples=10, noise_per_example=True,
                       epochs=2, patience=2, log_every=1000, checkpoint_every=1000)
  summary = run(config, tiny_corpus)
  assert summary['status'] == 'epochs_done'
  assert summary['valid_ppl'] < 0.95 * initial_valid_perplexity(config, tiny_corpus)
  params = jax.tree.map(np.asarray, saved_params(Path(config.workdir)))
  for split in ('valid', 'test'):
    want = brute_force_perplexity(params, tiny_corpus.splits[split], tiny_corpus.vocab, config)
    assert summary[f'{split}_ppl'] == pytest.approx(want, rel=1e-4)
