"""Paths as users type them: resolved once, at the edge, and shown back as typed.

A relative path means the current directory of the command (or Python process) that names
it. `nplm.config.Config.absolute_paths` turns every location a config names absolute when a
program starts, so a run records its data locations absolute and a workdir reads from any
directory. Files inside a workdir are never recorded by path: each is found from the
workdir a reader is given, so a workdir copied or moved elsewhere still reads.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
  """Where nplm keeps what it builds once per machine (word2vec's compiled update, learned
  spelling channels): $NPLM_CACHE_DIR, else $XDG_CACHE_HOME/nplm, else ~/.cache/nplm."""
  if os.environ.get('NPLM_CACHE_DIR'):
    return Path(os.environ['NPLM_CACHE_DIR'])
  return Path(os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache') / 'nplm'


def absolute(path: str | os.PathLike) -> str:
  """`path` absolute, from the current directory, `~` expanded and `.`, `..` folded (as the
  shell reads it; symbolic links are kept, not followed)."""
  return os.path.abspath(os.path.expanduser(os.fspath(path)))


def shown(path: str | os.PathLike) -> str:
  """`path` as one would type it here: relative to the current directory if it lies under
  it (what a user who typed a relative path typed), else absolute."""
  full = absolute(path)
  try:
    here = os.getcwd()
  except OSError:  # The current directory was deleted.
    return full
  if here == os.sep:  # Under / every path lies: shown whole.
    return full
  relative = os.path.relpath(full, here)
  return full if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative


def too_wide_for_a_workdir(path: str | os.PathLike) -> str | None:
  """Why `path` cannot be a workdir (the root, the home directory itself: a run writes its
  files and checkpoints directly into its workdir), or None."""
  real = os.path.realpath(absolute(path))  # A link to / is /; a link loop stays itself.
  if real == os.path.realpath(os.sep):
    return 'is the root directory'
  home = os.path.expanduser('~')
  if home != '~' and real == os.path.realpath(home):
    return 'is your home directory itself'
  return None


def broken_link(path: str | os.PathLike) -> bool:
  """Whether `path` is a symbolic link that leads nowhere (a loop, or a missing target)."""
  path = Path(absolute(path))
  return path.is_symlink() and not os.path.exists(path)


def shown_dataset(dataset: str) -> str:
  """A --dataset value with a text: path shown as `shown` shows it (others as they are)."""
  kind, _, where = dataset.partition(':')
  return f'text:{shown(where)}' if kind == 'text' and where else dataset
