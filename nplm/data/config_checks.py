"""The data settings' checks of a Config (nplm.training.config_checks.validated asks them;
validated_data for the programs that read a dataset without training): kept here, beside the
sources and tokenizers they ask, so that config.py holds the knobs."""

from nplm.data import tokenizers
from nplm.data.sources import SOURCES, readers, source_class, source_of, split_knobs
from nplm.errors import ConfigError


def data_checks(config) -> list[tuple[bool, str]]:
  """(ok, the one-line message if not) per data setting; ConfigError at once for a
  --dataset that names no source."""
  source = source_of(config.dataset)  # A ConfigError if it names none.
  fractions = config.split_fractions.split(',')
  try:
    shares = [float(f) for f in fractions]
  except ValueError:
    shares = []
  return [
      (config.tokens in ('words', 'chars'),
       f'unknown --tokens={config.tokens!r}; known: words, chars'),
      (config.unk_max_count >= -1,
       f'--unk_max_count must be -1 (the dataset\'s default) or more, got {config.unk_max_count}'),
      (config.max_vocab_size >= 0,
       f'--max_vocab_size must be 0 (no bound) or more, got {config.max_vocab_size}'),
      (config.train_tokens >= 0 and config.valid_tokens >= 0
       and (config.train_tokens > 0) == (config.valid_tokens > 0),
       '--train_tokens and --valid_tokens go together, both positive (or both 0)'),
      *[(False, error) for error in tokenizers.config_errors(config)],
      *[(False, error) for error in source.config_errors(config)],
      *[(False, error) for error in _unread_knob_errors(config, source)],
      (len(shares) == 3 and min(shares) > 0 and abs(sum(shares) - 1) < 1e-6,
       f'--split_fractions must be three positive shares summing to 1, got '
       f'{config.split_fractions!r}'),
      (len(config.tfds_splits.split(',')) == 3 and all(config.tfds_splits.split(',')),
       f'--tfds_splits names three TFDS splits (train, valid, test), got {config.tfds_splits!r}'),
  ]


def _unread_knob_errors(config, source) -> list[str]:
  """A source's knob set away from its default under another --dataset would change
  nothing: refused, naming the sources that read it."""
  from nplm.config import default_of  # Here, not above: Config imports the sources.
  knobs = dict.fromkeys(name for kind in SOURCES for name in source_class(kind).knobs)
  # A source that cuts by tokens reads the split's knobs, declared or not.
  read = {*source.knobs, *(split_knobs('', '') if source.cuts_by_tokens else ())}
  return [f'--{name} is read by --dataset={", ".join(readers(name))}, not '
          f'--dataset={config.dataset}: leave it out'
          for name in knobs if name not in read and getattr(config, name) != default_of(name)]


def settled_data(config):
  """The config as a program that reads a dataset without training takes it, settled once at
  the edge: resolved, its data settings checked (validated_data), its paths absolute."""
  return validated_data(config.resolved()).absolute_paths()


def validated_data(config):
  """`config`, or ConfigError naming the first data setting that cannot work (for the
  programs that read a dataset without training)."""
  for ok, message in data_checks(config):
    if not ok:
      raise ConfigError(message)
  return config
