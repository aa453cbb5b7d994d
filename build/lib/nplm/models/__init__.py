"""Models map a context to a hidden vector; they know nothing of the output layer.

Feed-forward models (`recurrent = False`) map a window of n-1 words to one hidden vector;
recurrent ones map a segment of words and a carried state to a hidden vector per word.
"""

from nplm.models.nnlm import NNLM
from nplm.models.rnn import RecurrentModel

MODELS = {'nnlm': NNLM, 'rnn': RecurrentModel, 'lstm': RecurrentModel, 'gru': RecurrentModel}
RECURRENT_MODELS = ('rnn', 'lstm', 'gru')


def build_model(config, vocab_size: int):
  """The model named by `config.model`, shaped by the config."""
  return MODELS[config.model].from_config(config, vocab_size)
