"""The proposal (and noise) distribution Q of the sampling heads: the unigram, or unigram^α.

Samples are drawn with replacement and shared by the whole minibatch, so the sampled output
layer stays one dense [batch, k] matmul (the NCE and negative-sampling heads can instead draw
k per example, as word2vec does: --noise_per_example); the corrections then use the exact
expected count k·Q(w) of each word among the k draws. Sampling without replacement
(`jax.random.choice` with replace=False) would need the inclusion probabilities instead, and
is slow.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from nplm.knobs import Knob


@dataclasses.dataclass(frozen=True, eq=False)
class Proposal:
  """Q(w) ∝ count(w)^α over the vocabulary, from training-split counts."""
  probs: np.ndarray  # float64 [|V|], sums to 1

  knobs = {  # Of the heads that sample from Q.
      'num_samples': Knob(100, 'k: words sampled per update, shared by the minibatch (unless '
                               '--noise_per_example).'),
      'proposal_power': Knob(1.0, 'α: words are drawn from Q ∝ count^α (1 = the unigram, 0 = '
                                  'uniform).'),
  }

  @staticmethod
  def config_errors(config) -> list[str]:
    checks = [(config.num_samples >= 1,
               f'--num_samples must be positive, got {config.num_samples}'),
              (0 <= config.proposal_power <= 1,
               f'--proposal_power must be within [0, 1], got {config.proposal_power}')]
    return [message for ok, message in checks if not ok]

  @classmethod
  def from_counts(cls, counts, power: float = 1.0) -> 'Proposal':
    # A word never seen in training (possible only for <unk>) still gets a count of 1, so
    # every word can be drawn and every log Q is finite.
    weights = np.maximum(np.asarray(counts, np.float64), 1.0) ** power
    return cls(probs=weights / weights.sum())

  @property
  def log_probs(self) -> jnp.ndarray:
    return jnp.asarray(np.log(self.probs), jnp.float32)

  @functools.cached_property
  def cumulative(self) -> np.ndarray:
    """Q's float32 running sum as jax.random.choice computes it (jnp.cumsum), once, outside
    any trace: inside a jitted step it is a constant that XLA folds at every compilation,
    3.4 s and a wall of warnings at |V| = 300k."""
    with jax.ensure_compile_time_eval():
      return np.asarray(jnp.cumsum(jnp.asarray(self.probs, jnp.float32)))

  @functools.cached_property
  def alias_table(self) -> tuple[np.ndarray, np.ndarray]:
    """Q as Walker's alias table (Walker 1977; Vose 1991's construction), for a draw in O(1)
    from one 64-bit number (word2vec's C++ update): word i, drawn uniformly, is kept where
    a uniform 32-bit number is below threshold[i], else alias[i] is taken. -> (threshold
    uint32 [|V|], alias int32 [|V|]). Q(w) = (keep(w) + Σ_{i: alias i = w} 1 - keep(i)) / |V|
    to float64's rounding and the thresholds' 2^-32."""
    size = len(self.probs)
    scaled = self.probs * size
    keep, alias = np.ones(size), np.arange(size, dtype=np.int32)
    small = [i for i in range(size) if scaled[i] < 1.0]
    large = [i for i in range(size) if scaled[i] >= 1.0]
    while small and large:
      below, above = small.pop(), large[-1]
      keep[below], alias[below] = scaled[below], above
      scaled[above] -= 1.0 - scaled[below]
      if scaled[above] < 1.0:
        small.append(large.pop())
    # What rounding leaves in either list keeps itself (keep 1).
    threshold = np.minimum(np.round(keep * 2.0 ** 32), 2.0 ** 32 - 1).astype(np.uint32)
    threshold[keep >= 1.0] = np.iinfo(np.uint32).max
    return threshold, alias

  def sample(self, rng, num_samples: int, examples: int | None = None) -> jnp.ndarray:
    """k word ids drawn independently from Q: [k] shared by a batch, or [examples, k].
    jax.random.choice's draw (the same ids for the same key), its running sum hoisted."""
    if rng is None:
      raise ValueError('a sampling head needs a PRNG key: call loss(hidden, targets, rng)')
    shape = (num_samples,) if examples is None else (examples, num_samples)
    cumulative = jnp.asarray(self.cumulative)
    draws = cumulative[-1] * (1 - jax.random.uniform(rng, shape, jnp.float32))
    return jax.lax.platform_dependent(cumulative, draws, cpu=_binary_search,
                                      default=_unrolled_binary_search).astype(jnp.int32)

  def log_expected_counts(self, words: jnp.ndarray, num_samples: int) -> jnp.ndarray:
    """log(k·Q(w)): the expected number of times w is among k draws with replacement."""
    return jnp.log(float(num_samples)) + self.log_probs[words]


def _binary_search(cumulative, draws):
  """The bisection as XLA's loop, log2 |V| rounds: a CPU runs a round's draws at once."""
  return jnp.searchsorted(cumulative, draws)


def _unrolled_binary_search(cumulative, draws):
  """The same rounds unrolled, the same ids: a GPU's while loop launches each round's
  kernels after the last round's. On an H200 the sampled heads' step took 0.7 ms at |V| =
  10k (14 rounds), the full softmax's 0.4, and 0.9 ms at 4M (22 rounds): about 25 µs a
  round, if the rounds make the difference (experiments/results/h200/check_1/rows/4; not
  yet timed unrolled). JAX's documentation advises the unrolled
  search on a GPU; on a CPU it was up to 3× slower for 800k draws."""
  return jnp.searchsorted(cumulative, draws, method='scan_unrolled')
