"""nplm: neural probabilistic language models (Bengio et al. 2003 and after) in JAX/Flax."""

from importlib import metadata

try:
  __version__ = metadata.version('nplm')
except metadata.PackageNotFoundError:  # A checkout on sys.path, never installed.
  __version__ = '0+unknown'
