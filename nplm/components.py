"""Components chosen by name: a registry's own names, or `module.path:Name` for a user's own.

A registry maps each name to where its component lives ('nplm.models.nnlm:NNLM'), so that
naming, listing and validating components imports none of them (`import nplm.config` stays
light), and a component of the user's own package is found the same way, by its import path,
without editing nplm (big_vision chooses its models and inputs by name likewise).
"""

import importlib

from nplm.errors import ConfigError


class ComponentImportError(ConfigError):
  """A component named by import path whose module cannot be imported here: not a bad value
  but a missing package (a trained run's model read where its package is not installed)."""


def is_import_path(name: str) -> bool:
  """'package.module:Name': a dotted module, a colon, an attribute."""
  module, colon, attribute = name.partition(':')
  return bool(colon) and '.' in module and attribute.isidentifier()


def load(flag: str, registry: dict[str, str], name: str):
  """The component `name` names: a registry entry, or an import path 'module.path:Name'.

  One line (ConfigError) for an unknown name, a module that cannot be imported, or a missing
  attribute; `flag` is the option that named it ('--model')."""
  where = registry.get(name) or (name if is_import_path(name) else None)
  if where is None:
    raise ConfigError(f'unknown {flag}={name!r}; known: {", ".join(sorted(registry))}, or '
                      'module.path:Name for your own')
  module_name, _, attribute = where.partition(':')
  try:
    module = importlib.import_module(module_name)
  except ImportError as error:
    raise ComponentImportError(f'{flag}={name}: cannot import {module_name} ({error}); is its '
                               'package installed, or its directory on PYTHONPATH?') from None
  try:
    return getattr(module, attribute)
  except AttributeError:
    raise ConfigError(f'{flag}={name}: {module_name} has no {attribute!r}') from None
