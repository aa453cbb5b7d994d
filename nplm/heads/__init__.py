"""Output heads map a hidden vector to a training loss and to exact log-probabilities.

Every head offers `loss(hidden, targets, rng)` (the training objective, possibly sampled),
`log_prob(hidden, targets)` (exact and normalized: every reported perplexity comes from it)
and `log_probs(hidden)` (the full [batch, |V|] distribution).
"""

from nplm.heads.softmax import SoftmaxHead

HEADS = {'softmax': SoftmaxHead}


def build_head(config, vocab_size: int):
  """The head named by `config.head`, shaped by the config."""
  return HEADS[config.head].from_config(config, vocab_size)
