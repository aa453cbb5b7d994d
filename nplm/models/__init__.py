"""Models map a context to a hidden vector; they know nothing of the output layer.

A model's `family` names the feed that trains and scores it (nplm.training.families):
'windows' models map a window of n-1 words to one hidden vector (the Transformer,
`trains_every_position`, also gives one per position of the window, for its training loss);
'streams' (recurrent) models map a segment of words and a carried state to a hidden vector
per word; 'word2vec' models read the ±c words around a position.

--model names a registry entry or a class of the user's own ('module.path:Name') offering
what nplm's do: `knobs` (the Config fields it reads), `config_errors(config)`,
`describe(config)`, `from_config(config, vocab_size)`, `family`, `language_model` (whether
it gives p(w_t | the words before it)), `output_width` (the hidden vector's width), and the
calls of its family's feed.
"""

from nplm import components

# Import paths, not classes: naming and validating a model imports no Flax.
MODELS = {
    'nnlm': 'nplm.models.nnlm:NNLM',
    'rnn': 'nplm.models.rnn:RecurrentModel',
    'lstm': 'nplm.models.rnn:RecurrentModel',
    'gru': 'nplm.models.rnn:RecurrentModel',
    'transformer': 'nplm.models.transformer:Transformer',
    # word2vec (Mikolov et al. 2013a): word vectors, not a language model.
    'cbow': 'nplm.models.word2vec:CBOW',
    'skipgram': 'nplm.models.word2vec:SkipGram',
}


def model_class(name: str):
  """The class --model=`name` names (a ConfigError if none)."""
  return components.load('--model', MODELS, name)


def readers(knob: str) -> list[str]:
  """The registry's models that read the Config field `knob`."""
  return [name for name in MODELS if knob in model_class(name).knobs]


def config_errors(config) -> list[str]:
  """What in the config the named model cannot be built from: its knobs' values."""
  model = model_class(config.model)
  shared = [] if config.feature_size >= 1 else [
      f'--feature_size must be positive, got {config.feature_size}']
  return shared + model.config_errors(config)


def build_model(config, vocab_size: int):
  """The model named by `config.model`, shaped by the config."""
  return model_class(config.model).from_config(config, vocab_size)
