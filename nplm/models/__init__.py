"""Models map a context to a hidden vector; they know nothing of the output layer."""

from nplm.models.nnlm import NNLM

MODELS = {'nnlm': NNLM}


def build_model(config, vocab_size: int):
  """The model named by `config.model`, shaped by the config."""
  return MODELS[config.model].from_config(config, vocab_size)
