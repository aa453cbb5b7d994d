"""The shipped flagfiles (recipes): Table 1's rows, the recurrent models, published recipes
(zaremba_small, medium, large; pytorch_lstm, pytorch_lstm_tied), word2vec, a quick
look. `--flagfile=mlp9` reads nplm/recipes/mlp9.flags when no file `mlp9` exists in the
current directory; any other value is a path, relative to the current directory."""

import os
from pathlib import Path

DIRECTORY = Path(__file__).parent
SUFFIX = '.flags'


def names() -> list[str]:
  """The recipes' names, sorted."""
  return sorted(path.stem for path in DIRECTORY.glob(f'*{SUFFIX}'))


def path(name: str) -> Path | None:
  """The recipe called `name` (`mlp9` or `mlp9.flags`), or None."""
  if not name or os.sep in name or (os.altsep and os.altsep in name):
    return None
  stem = name.removesuffix(SUFFIX)
  candidate = DIRECTORY / f'{stem}{SUFFIX}'
  return candidate if stem in names() else None


def find(typed: str) -> Path | None:
  """The flagfile `--flagfile=typed` reads: a file at that path (relative to the current
  directory, `~` expanded) first, else the recipe of that name, else whatever is at that
  path (a directory: the caller says it is no flagfile); None if nothing is."""
  typed_path = Path(os.path.expanduser(typed))
  if typed_path.is_file():
    return typed_path
  recipe = path(typed)
  if recipe is not None:
    return recipe
  return typed_path if typed_path.exists() else None
