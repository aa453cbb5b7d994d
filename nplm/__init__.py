"""nplm: neural probabilistic language models (Bengio et al. 2003 and after) in JAX/Flax.

  import nplm
  nplm.train(['--flagfile=mlp9', '--workdir=runs/mlp9'])   # a run, its progress lines shown
  model = nplm.load('runs/mlp9')                             # any run's workdir, or an n-gram's
  model.predict('the jury said', k=5)

The names below (nplm.api) are imported on first use: `import nplm` itself loads neither JAX
nor TFDS.
"""

from importlib import metadata

try:
  __version__ = metadata.version('nplm')
except metadata.PackageNotFoundError:  # A checkout on sys.path, never installed.
  __version__ = '0+unknown'

_API = ('Config', 'Model', 'load', 'train')


def __getattr__(name: str):
  if name in _API:
    from nplm import api
    return getattr(api, name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list[str]:
  return sorted([*globals(), *_API])
