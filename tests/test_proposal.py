"""The proposal (and noise) distribution Q of the sampling heads (nplm.heads.proposal): its
draws are jax.random.choice's, and on a GPU they take no loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nplm.heads import proposal as proposal_module
from nplm.heads.proposal import Proposal
from tests.test_heads import zipf_counts


@pytest.mark.parametrize('examples', [None, 5])
@pytest.mark.slow
def test_the_proposal_draws_what_jax_random_choice_draws_from_q(examples):
  """Q's running sum is hoisted out of the step (XLA folded it at every compilation, 3.4 s
  at |V| = 300k); the ids drawn for a key are still jax.random.choice's, so runs recorded
  before keep their samples. Their frequencies follow Q (numpy) too."""
  counts = zipf_counts(5000)
  proposal = Proposal.from_counts(counts, power=0.75)
  shape = (64,) if examples is None else (examples, 64)
  for seed in range(20):
    key = jax.random.key(seed)
    expected = jax.jit(lambda k: jax.random.choice(
        k, len(counts), shape, replace=True, p=jnp.asarray(proposal.probs, jnp.float32)))(key)
    drawn = jax.jit(lambda k: proposal.sample(k, 64, examples))(key)
    np.testing.assert_array_equal(drawn, expected)
  many = np.asarray(proposal.sample(jax.random.key(99), 200_000))
  frequencies = np.bincount(many, minlength=len(counts)) / len(many)
  assert np.abs(frequencies[:20] - proposal.probs[:20]).max() < 0.004


def test_a_gpu_draws_from_the_proposal_without_a_loop_and_the_same_ids():
  """On a GPU the bisection is unrolled: a while loop there launches each of its log2 |V|
  rounds after the last. Lowered for a GPU, the draw holds no loop; the unrolled search run
  here finds numpy's ids."""
  proposal = Proposal.from_counts(zipf_counts(5000), power=0.75)
  draw = jax.jit(lambda key: proposal.sample(key, 64))
  lowered = {platform: draw.trace(jax.random.key(0)).lower(lowering_platforms=(platform,))
             for platform in ('cpu', 'cuda')}
  assert 'stablehlo.while' not in lowered['cuda'].as_text()
  assert 'stablehlo.while' in lowered['cpu'].as_text()  # The check can see a loop.
  cumulative = proposal.cumulative
  draws = np.random.default_rng(0).uniform(0, cumulative[-1], 1000).astype(np.float32)
  np.testing.assert_array_equal(
      jax.jit(proposal_module._unrolled_binary_search)(cumulative, draws),
      np.searchsorted(cumulative, draws))
