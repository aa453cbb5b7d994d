"""Files written whole or not at all: readers never see half of one."""

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
  """Writes via a temporary file in the same directory and a rename: no half-written file."""
  path = Path(path)
  fd, tmp = tempfile.mkstemp(prefix=f'.{path.name}.', dir=path.parent)
  try:
    with os.fdopen(fd, 'w', encoding='utf-8', newline='') as f:  # Characters kept as given.
      f.write(text)
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide exported files from other accounts.
    os.replace(tmp, path)
  except BaseException:
    os.unlink(tmp)
    raise


def write_json_atomically(path: str | os.PathLike, data: Any) -> None:
  write_text_atomically(path, json.dumps(data, indent=2, sort_keys=True) + '\n')


def save_figure_atomically(figure, path: str | os.PathLike) -> None:
  """A matplotlib Figure saved as a PNG via a temporary file and a rename: no half a picture."""
  path = Path(path)
  fd, tmp = tempfile.mkstemp(prefix=f'.{path.name}.', suffix='.png', dir=path.parent)
  os.close(fd)
  try:
    figure.savefig(tmp, format='png', dpi=120, bbox_inches='tight')
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the picture from other accounts.
    os.replace(tmp, path)
  except BaseException:
    os.unlink(tmp)
    raise
