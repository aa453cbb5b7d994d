"""Models map a context to a hidden vector; they know nothing of the output layer.

Feed-forward models (`recurrent = False`) map a window of n-1 words to one hidden vector
(the Transformer, `trains_every_position`, also gives one per position of the window, for its
training loss); recurrent ones map a segment of words and a carried state to a hidden vector
per word.
"""

from nplm.models.nnlm import NNLM
from nplm.models.rnn import RecurrentModel
from nplm.models.transformer import Transformer
from nplm.models.word2vec import CBOW, SkipGram, changed_knobs

MODELS = {'nnlm': NNLM, 'rnn': RecurrentModel, 'lstm': RecurrentModel, 'gru': RecurrentModel,
          'transformer': Transformer}
MODELS['cbow'] = CBOW  # word2vec (Mikolov et al. 2013a): word vectors, not a language model.
MODELS['skipgram'] = SkipGram
RECURRENT_MODELS = ('rnn', 'lstm', 'gru')


def config_errors(config) -> list[str]:
  """What in the config no model could be built from: the model's name, the knobs every
  model reads, and the named model's own checks."""
  if config.model not in MODELS:
    return [f'unknown --model={config.model!r}; known: {", ".join(sorted(MODELS))}']
  shared = [(config.feature_size >= 1, f'--feature_size must be positive, got '
             f'{config.feature_size}'),
            (config.hidden_size >= 0, f'--hidden_size must be 0 or more, got '
             f'{config.hidden_size}')]
  if MODELS[config.model].language_model:
    shared.append((not changed_knobs(config, ('window', 'subsample')),
                   '--window and --subsample are for word2vec models (--model=cbow or skipgram)'))
  return [message for ok, message in shared if not ok] + MODELS[config.model].config_errors(
      config)


def build_model(config, vocab_size: int):
  """The model named by `config.model`, shaped by the config."""
  return MODELS[config.model].from_config(config, vocab_size)
