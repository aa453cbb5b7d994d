"""What a run is refused for before anything is built: models that cannot be trained as one
program, a training split shorter than one training example (and a warning for a batch larger
than an epoch). (Whether it fits in memory: nplm.training.memory.)"""

import logging
import os

from nplm import models, paths
from nplm.config import PER_MODEL_FIELDS, Config, ConfigError
from nplm.display import counted
from nplm.training.families import feed_of
from nplm.training.config_checks import settled

log = logging.getLogger('nplm.trainer')


def check_together(configs: list[Config]) -> list[Config]:
  """The configs, settled (config_checks.settled: resolved, validated, paths absolute, so a
  run records where its data lies); ConfigError if they cannot be trained as one program."""
  if not configs:
    raise ConfigError('no models to train')
  configs = [settled(config) for config in configs]
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
  """ConfigError for a training split shorter than one training example (a window of
  --order tokens, word2vec's 2c+1 around a word, a BPTT segment of --bptt_length). A
  --batch_size larger than an epoch's examples is said in a warning: its one update a step
  holds the whole epoch and the rest padding (a tiny corpus under a recipe's batch trains,
  and memory.require_fit has refused what cannot fit)."""
  feed = feed_of(lm.model)
  flag, span, what = feed.example_span(config)
  value = getattr(config, flag[2:])
  train = split_sizes['train']
  dataset = f'--dataset={paths.shown_dataset(config.dataset)}'
  if train < span:
    raise ConfigError(f'{flag}={value} {what}, and the train split of {dataset} has '
                      f'{counted(train, "token")}: lower {flag} or train on a larger corpus')
  batch, held, examples, noun, largest = feed.epoch_examples(config, lm, train)
  if held > examples:
    log.warning('%s is more than the %s of an epoch on the train split of %s: each epoch is '
                'one update, %.0f%% of it padding, computed and held for nothing; the largest '
                'useful --batch_size is %s', batch, counted(examples, noun), dataset,
                100 * (held - examples) / held, f'{largest:,}')


def warn_calls_cut(config: Config) -> None:
  """A warning where --log_every is not a multiple of --updates_per_call: the updates before
  each progress line that do not fill a call run one a call, the speed-up lost on them."""
  k, every = config.updates_per_call, config.log_every
  if k > 1 and every % k:
    log.warning('--log_every=%s is not a multiple of --updates_per_call=%s: %s of every %s '
                'updates run one a call; a multiple (e.g. --log_every=%s) runs them all %s a '
                'call', every, k, every % k, every, max(k, every - every % k), k)


def warn_untrained_unk(corpus) -> None:
  """A warning where <unk> never occurs in training (--unk_max_count=0 on text without its
  own <unk>) while valid or test hold unknown words: each then costs whatever the model
  learned for a token it never saw."""
  if corpus.vocab.counts[corpus.vocab.unk_id]:
    return
  unknown = {name: sum(corpus.unknown_words.get(name, {}).values()) for name in ('valid', 'test')}
  if any(unknown.values()):
    log.warning('<unk> never occurs in training (every training type kept), yet valid and test '
                'hold %s and %s unknown tokens: each costs what the model learned for a token '
                'it never saw; leave --unk_max_count out to train <unk> on the words seen once',
                f'{unknown["valid"]:,}', f'{unknown["test"]:,}')
