"""Files written whole or not at all: readers never see half of one."""

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = 'w') -> Iterator[IO]:
  """A file written through a temporary file in the same directory, renamed to `path` only
  once it was written whole ('w': UTF-8 text, characters kept as given; 'wb': bytes)."""
  text = {} if 'b' in mode else {'encoding': 'utf-8', 'newline': ''}
  with _renamed_into_place(Path(path)) as (fd, tmp):
    with os.fdopen(fd, mode, **text) as f:
      yield f


@contextlib.contextmanager
def _renamed_into_place(path: Path, suffix: str = '') -> Iterator[tuple[int, str]]:
  """(fd, name) of a temporary file beside `path`, renamed to `path` once the context ends
  without an exception, removed otherwise: a stop request (Ctrl-C, SIGTERM in a command's
  `interrupting`) may come at any line, the rename's own included, and what it raises is
  what the command reports, not a FileNotFoundError from removing a file renamed already."""
  fd, tmp = tempfile.mkstemp(prefix=f'.{path.name}.', suffix=suffix, dir=path.parent)
  try:
    yield fd, tmp
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the file from other accounts.
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.unlink(tmp)
    raise


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
  """Writes via a temporary file in the same directory and a rename: no half-written file."""
  with atomic_file(path) as f:
    f.write(text)


def write_bytes_atomically(path: str | os.PathLike, data: bytes) -> None:
  with atomic_file(path, 'wb') as f:
    f.write(data)


def write_json_atomically(path: str | os.PathLike, data: Any) -> None:
  write_text_atomically(path, json.dumps(data, indent=2, sort_keys=True) + '\n')


def save_figure_atomically(figure, path: str | os.PathLike) -> None:
  """A matplotlib Figure saved as a PNG via a temporary file and a rename: no half a picture."""
  with _renamed_into_place(Path(path), suffix='.png') as (fd, tmp):
    os.close(fd)
    figure.savefig(tmp, format='png', dpi=120, bbox_inches='tight')
