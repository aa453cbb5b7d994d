"""Perplexity from a sum of negative log-probabilities, and when a loss has exploded.

A diverging run can produce a huge but finite loss: exp of it overflows a float (math.exp
raises past ~709), so the perplexity is then infinite, and any loss far above log |V| (the
loss of a uniform guess, where training starts) is taken as diverged before it gets there.
"""

import math

EXPLODED_FACTOR = 100  # A loss above 100 · log |V|: p(target) below |V|^-100.


def perplexity(nll: float, tokens: int) -> dict:
  """exp(Σ NLL / Σ tokens), beside what it came from; inf where exp overflows."""
  mean = nll / tokens
  return {'nll': float(nll), 'tokens': tokens,
          'ppl': math.exp(mean) if mean < math.log(1.7e308) else math.inf}


def exploded(loss: float, vocab_size: int) -> bool:
  """True for a training loss or mean NLL that is not finite or far above log |V|."""
  return not math.isfinite(loss) or loss > EXPLODED_FACTOR * math.log(max(vocab_size, 2))
