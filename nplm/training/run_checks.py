"""What a run is refused for before anything is built: models that cannot be trained as one
program, and a training split shorter than one training example. (Whether it fits in memory:
nplm.training.memory.)"""

import os

from nplm import models, paths
from nplm.config import PER_MODEL_FIELDS, Config, ConfigError
from nplm.display import counted
from nplm.training.families import feed_of


def check_together(configs: list[Config]) -> list[Config]:
  """The configs, validated; ConfigError if they cannot be trained as one program."""
  if not configs:
    raise ConfigError('no models to train')
  # Paths absolute once, here: a run records where its data lies (Config.absolute_paths).
  configs = [config.validate().absolute_paths() for config in configs]
  for name in configs[0].to_dict():
    values = sorted({repr(getattr(config, name)) for config in configs})
    if name not in PER_MODEL_FIELDS and len(values) > 1:
      raise ConfigError(f'models trained together differ only in {", ".join(PER_MODEL_FIELDS)}; '
                        f'their --{name} differ: {", ".join(values)}')
  if len({config.batch_order_seed for config in configs}) > 1:
    raise ConfigError('models trained together read the same batches: give them one '
                      '--data_seed (their --seed differ)')
  if len(configs) > 1 and not feed_of(models.model_class(configs[0].model)).trains_together:
    raise ConfigError(f'training together is for feed-forward models (--model=nnlm), not '
                      f'--model={configs[0].model}; train recurrent models one by one')
  workdirs = {os.path.realpath(config.workdir) for config in configs}  # A link loop: itself.
  if len(workdirs) < len(configs):
    raise ConfigError('each model trained together needs a --workdir of its own')
  return configs


def check_corpus(config: Config, lm, split_sizes: dict) -> None:
  """ConfigError for a training split shorter than one training example: a window of
  --order tokens, word2vec's 2c+1 around a word, a BPTT segment of --bptt_length. (A batch
  larger than the split is fine: it is padded and masked.)"""
  flag, span, what = feed_of(lm.model).example_span(config)
  value = getattr(config, flag[2:])
  train = split_sizes['train']
  if train < span:
    raise ConfigError(f'{flag}={value} {what}, and the train split of --dataset='
                      f'{paths.shown_dataset(config.dataset)} has {counted(train, "token")}: '
                      f'lower {flag} or train on a larger corpus')
