"""Errors that name a user's mistake; the command-line tools print them as one line."""


class ConfigError(ValueError):
  """A configuration value that cannot work; the message says which and why."""
