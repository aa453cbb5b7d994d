"""Flags from Config, and flagfiles read as absl reads them: a recipe or a flagfile as a Config
(config_from_flagfile), and argv with its flagfiles' flags first so that typed flags win
(flagfiles_first). The programs (nplm.cli) and the studies (nplm.studies) read recipes here."""

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from absl import flags

from nplm import recipes
from nplm.config import Config, ConfigError, config_class

_DEFINE_BY_TYPE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer,
                   float: flags.DEFINE_float, str: flags.DEFINE_string}
# The command line always has a workdir; from Python one must be chosen.
_CLI_DEFAULTS = {'workdir': 'runs/default'}
# The module the Config flags are registered under: --help lists them by group.
CONFIG_FLAGS_MODULE = 'nplm.config'


def define_config_flags(flag_values: flags.FlagValues = flags.FLAGS,
                        names: tuple[str, ...] | None = None, config=Config) -> None:
  """A flag per field of `config` (or per field in `names`) not defined yet, with the
  field's help text."""
  for field in dataclasses.fields(config):
    if (names is None or field.name in names) and field.name not in flag_values:
      _DEFINE_BY_TYPE[field.type](field.name, _CLI_DEFAULTS.get(field.name, field.default),
                                  field.metadata['help'], flag_values=flag_values,
                                  module_name=CONFIG_FLAGS_MODULE)


def define_own_knob_flags(argv: list[str], flag_values: flags.FlagValues = flags.FLAGS):
  """The flags of the knobs of a model, head and source that argv (its flagfiles' flags
  first) names by import path: a component of the user's own brings its own
  (nplm.config.config_class).
  Returns the config class they make."""
  named = {'model': '', 'head': '', 'dataset': ''}
  for arg in argv:
    name, equals, value = arg.lstrip('-').partition('=')
    if equals and name in named:
      named[name] = value
  config = config_class(**named)
  if 'model' in flag_values:  # A program that takes the model's knobs.
    define_config_flags(flag_values, config=config)
  return config


def config_from_flagfile(path: str | Path, **overrides) -> Config:
  """The Config a flagfile sets (as `--flagfile=path` would: a path, or a recipe's name such
  as 'mlp9'), then `overrides`; for runners that read several flagfiles."""
  return config_from_flags([f'--flagfile={path}']).replace(**overrides)


def config_from_flags(typed: Sequence[str]) -> Config:
  """The Config that flags typed as on `nplm train`'s command line set (flagfiles first,
  typed flags winning), read into a private FlagValues: nplm.train from Python, and runners
  of many configs. A missing or unreadable flagfile, a bad line or an unknown flag is a
  ConfigError."""
  flag_values = flags.FlagValues()
  define_config_flags(flag_values)
  argv = flagfiles_first(['config_from_flags', *typed])
  config = define_own_knob_flags(argv, flag_values)
  try:
    flag_values(argv)
  except flags.Error as error:
    shown = ' '.join(typed)
    raise ConfigError(f'{shown}: {" ".join(str(error).split())}') from None
  return config(**{f.name: flag_values[f.name].value for f in dataclasses.fields(config)})


_FLAGFILE_PREFIXES = ('--flagfile=', '-flagfile=')


def flagfile_lines(typed: str, _including: tuple[Path, ...] = ()) -> list[str]:
  """The flags a flagfile sets, read as absl reads them (one a line; blank lines and lines
  starting with # or // skipped; a --flagfile line expanded where it stands). `typed` is a
  path relative to the current directory or, where no such file exists, a recipe's name
  (nplm/recipes). A missing, unreadable or binary file is a one-line ConfigError."""
  path = recipes.find(typed) if typed else None
  if path is None:
    raise ConfigError(f'--flagfile={typed}: no such file (recipes: '
                      f'{", ".join(recipes.names())})')
  if path.resolve() in _including:
    raise ConfigError(f'--flagfile={typed} includes itself')
  try:
    data = path.read_bytes()
  except OSError as error:  # A directory, a file without read permission.
    raise ConfigError(f'--flagfile={typed}: cannot be read '
                      f'({error.strerror or type(error).__name__})') from None
  bad = data.find(b'\0')
  try:
    text = data.decode('utf-8')
  except UnicodeDecodeError as error:
    bad = error.start if bad < 0 else min(bad, error.start)
  if bad >= 0:
    raise ConfigError(f'--flagfile={typed}: not a text file of flags (byte {data[bad]:#04x} '
                      f'at offset {bad:,})')
  lines = []
  for line in text.splitlines():
    line = line.strip()
    if not line or line.startswith(('#', '//')):
      continue
    if line.startswith(_FLAGFILE_PREFIXES):
      try:
        lines += flagfile_lines(line.split('=', 1)[1], (*_including, path.resolve()))
      except ConfigError as error:
        raise ConfigError(f'{error} (read by --flagfile={typed})') from None
    else:
      lines.append(line)
  return lines


def flagfiles_first(argv: list[str]) -> list[str]:
  """argv with its flagfiles' flags first and the flags typed on the command line after
  them, in their order: absl keeps a flag's last value, so a typed flag wins over a
  flagfile's wherever it stands on the line (a flagfile's --workdir never overrides the
  typed one). Flagfiles later on the line win over earlier ones; nothing after `--` moves."""
  from_files, typed, rest = [], [], list(argv[1:])
  while rest:
    arg = rest.pop(0)
    if arg == '--':
      typed += [arg, *rest]
      break
    if arg in ('--flagfile', '-flagfile'):  # --flagfile FILE
      if not rest:
        raise ConfigError('--flagfile needs a file or a recipe name: --flagfile=FILE')
      from_files += flagfile_lines(rest.pop(0))
    elif arg.startswith(_FLAGFILE_PREFIXES):
      from_files += flagfile_lines(arg.split('=', 1)[1])
    else:
      typed.append(arg)
  return [*argv[:1], *from_files, *typed]
