"""A dataset's directory in the TFDS data dir: prepared by one process at a time, what killed
preparations left removed, and damage reported as "delete it and rerun".

TFDS prepares `<parent>/<version>` (parent: `<data_dir>/<name>` or `<data_dir>/<name>/<config>`)
in `<parent>/incomplete.XXXXXX_<version>` and renames that when done; an exception removes it,
but a killed process (SIGKILL, the OOM killer, a lost machine) leaves it behind for good. An
exclusive lock on `<parent>/.prepare.lock`, held for a whole preparation, makes those leftovers
safe to remove: only the holder prepares, so any other `incomplete.*` is a dead one. A process
that waited for the lock finds the dataset prepared and reads it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import tensorflow_datasets as tfds
from google.protobuf import json_format

from nplm.data.acquire import CorruptCorpusError

# What reading a damaged dataset directory raises: protobuf's ParseError (dataset_info.json),
# JSONDecodeError (metadata.json, a ValueError), Riegeli's RuntimeError and ArrayRecord's
# ValueError (array_record files), OSError (a missing file), KeyError (a missing split).
DAMAGE = (json_format.ParseError, KeyError, ValueError, OSError, RuntimeError)
LOCK_NAME = '.prepare.lock'


class ArrayRecordBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """A builder written as array_record (readable without TensorFlow) whose damaged
  dataset_info.json is reported at construction, where TFDS reads it."""

  def __init__(self, **kwargs):
    kwargs.setdefault('file_format', 'array_record')
    try:
      super().__init__(**kwargs)
    except DAMAGE as error:
      if not (getattr(self, '_data_dir', None) and self.data_path.exists()):
        raise  # Not a prepared directory's fault.
      raise damaged(self.data_path, error) from None


def damaged(path, problem) -> CorruptCorpusError:
  return CorruptCorpusError(f'{path} is damaged ({problem}); delete it and rerun to prepare it '
                            'again')


@contextlib.contextmanager
def damage_reported(path) -> Iterator[None]:
  """Errors of reading the prepared dataset at `path` as one CorruptCorpusError naming it."""
  try:
    yield
  except DAMAGE as error:
    raise damaged(path, error) from None


def prepare(builder) -> None:
  """Prepares the builder's dataset unless it is there; raises CorruptCorpusError if the
  directory there is not a prepared dataset (its dataset_info.json lost)."""
  path = Path(os.fspath(builder.data_path))
  if not path.exists():
    with _locked(path.parent):
      if path.exists():  # Another process prepared it while this one waited.
        with damage_reported(path):
          builder.info.read_from_directory(builder.data_path)
      else:
        _remove_leftovers(path)
        builder.download_and_prepare()
  if not builder.is_prepared():
    raise damaged(path, 'it has no dataset_info.json')


def metadata(builder) -> dict:
  """The builder's metadata.json as a dict ({} if there is none)."""
  with damage_reported(builder.data_path):
    return dict(builder.info.metadata.items())  # items() reads the file; get() would not.


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
  directory.mkdir(parents=True, exist_ok=True)
  with open(directory / LOCK_NAME, 'a') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # Released when the file closes or the process dies.
    yield


def _remove_leftovers(path: Path) -> None:
  """What killed preparations of `path` left (only the lock's holder may remove them)."""
  for leftover in path.parent.glob(f'incomplete.*_{path.name}'):
    shutil.rmtree(leftover, ignore_errors=True)
