"""A dataset's directory in the TFDS data dir: prepared by one process at a time, what killed
preparations left removed, and damage reported as "delete it and rerun".

TFDS prepares `<parent>/<version>` (parent: `<data_dir>/<name>` or `<data_dir>/<name>/<config>`)
in `<parent>/incomplete.XXXXXX_<version>` and renames that when done; an exception removes it,
but a killed process (SIGKILL, the OOM killer, a lost machine) leaves it behind for good. An
exclusive lock on `<parent>/.prepare.lock`, held for a whole preparation, makes those leftovers
safe to remove: only the holder prepares, so any other `incomplete.*` is a dead one. A process
that waited for the lock finds the dataset prepared and reads it.

SIGTERM and Ctrl-C during a preparation raise nplm.stop_requests.Interrupted, so TFDS removes
its incomplete directory on the way out. A data dir that cannot be written (not a directory,
read-only) or fills up is one CorpusError naming --data_dir, never the workdir.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib
import inspect
import os
import shutil
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import tensorflow_datasets as tfds
from google.protobuf import json_format

from nplm import paths
from nplm.data.acquire import CorpusError, CorruptCorpusError
from nplm.stop_requests import check_interrupted, interrupting

# What reading a damaged dataset directory raises: protobuf's ParseError (dataset_info.json),
# JSONDecodeError (metadata.json, a ValueError), Riegeli's RuntimeError and ArrayRecord's
# ValueError (array_record files), OSError (a missing file), KeyError (a missing split).
DAMAGE = (json_format.ParseError, KeyError, ValueError, OSError, RuntimeError)
LOCK_NAME = '.prepare.lock'


class ArrayRecordBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """A builder written as array_record (readable without TensorFlow) whose damaged
  dataset_info.json is reported at construction, where TFDS reads it, and whose preparation
  is never completed after a stop request (nplm.stop_requests.interrupting)."""

  def __init__(self, **kwargs):
    kwargs.setdefault('file_format', 'array_record')
    try:
      super().__init__(**kwargs)
    except DAMAGE as error:
      if not (getattr(self, '_data_dir', None) and self.data_path.exists()):
        raise  # Not a prepared directory's fault.
      raise damaged(self.data_path, error) from None

  def _download_and_prepare(self, dl_manager, download_config):
    super()._download_and_prepare(dl_manager, download_config)
    check_interrupted()  # Inside the incomplete directory: a stop request is never renamed.


class LocalDatasetInfo(tfds.core.DatasetInfo):
  """The info of a dataset nplm prepares itself, which TFDS's GCS bucket never holds."""

  def initialize_from_bucket(self) -> None:
    """Nothing: TFDS 4.9.10's makes a temporary directory before it asks the bucket and never
    removes it, one left in the system's temporary directory per preparation."""


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


def prepare(builder, data_dir: str | os.PathLike | None = None, what: str = '') -> None:
  """Prepares the builder's dataset unless it is there; raises CorruptCorpusError if the
  directory there is not a prepared dataset (its dataset_info.json lost), CorpusError naming
  --data_dir (`data_dir` as the user gave it; None: TFDS's default) if the data dir cannot be
  written or fills up, nplm.stop_requests.Interrupted on SIGTERM or Ctrl-C (`what`, such as
  'preparing the Brown corpus', says what was stopped), ImportError (before any download) if
  the builder's code uses TensorFlow and it cannot be imported."""
  path = Path(os.fspath(builder.data_path))
  if not path.exists():
    what = what or f'preparing {builder.name}'
    named = data_dir_named(data_dir, builder)
    with interrupting(f'{what} in {named}'), _data_dir_errors(builder, named, what):
      import_tensorflow_if_used(builder)  # Before the lock: a refusal leaves no directory.
      with _locked(path.parent):
        if path.exists():  # Another process prepared it while this one waited.
          with damage_reported(path):
            builder.info.read_from_directory(builder.data_path)
        else:
          _remove_leftovers(path)
          try:
            builder.download_and_prepare()
            check_interrupted()  # A catalogue builder's: after it, not inside it.
          except BaseException:
            # TFDS removes its incomplete directory, unless the error (a signal) came
            # between its creation and TFDS's try: the lock's holder removes it then.
            _remove_leftovers(path)
            raise
  elif not builder.info.initialized:
    # Another process prepared it after this builder was made (two commands reading one
    # new corpus at once): the builder holds its own empty info, not what is there.
    with damage_reported(path):
      builder.info.read_from_directory(builder.data_path)
  if not builder.is_prepared():
    raise damaged(path, 'it has no dataset_info.json')


# A data dir that cannot hold a preparation: not a directory (or under a file), not writable.
_UNWRITABLE = (errno.ENOTDIR, errno.EEXIST, errno.EACCES, errno.EPERM, errno.EROFS)
_FULL = (errno.ENOSPC, errno.EDQUOT)


def data_dir_named(data_dir: str | os.PathLike | None, builder=None) -> str:
  """The data dir as messages name it: --data_dir=PATH as the user gave it, or TFDS's."""
  if data_dir is not None:
    return f'--data_dir={paths.shown(data_dir)}'
  if builder is None:
    return "TFDS's data dir (--data_dir)"
  return f"TFDS's data dir {paths.shown(builder.data_dir_root)} (--data_dir)"


@contextlib.contextmanager
def _data_dir_errors(builder, named: str, what: str) -> Iterator[None]:
  """OSErrors of writing into the data dir as one CorpusError naming it: a full disk (what
  TFDS and ArrayRecord wrap is looked through), or a path that cannot be written (an
  OSError naming a file inside the data dir)."""
  root = Path(os.fspath(builder.data_dir_root))
  try:
    yield
  except CorpusError:
    raise
  except Exception as error:
    if _caused_by(error, lambda e: isinstance(e, OSError) and e.errno in _FULL or
                  'No space left on device' in str(e)):
      raise CorpusError(f'no space left on the disk of {named} while {what}; nothing of it '
                        'was kept: free some space (or give another --data_dir) and rerun the '
                        'same command') from error
    unwritable = _caused_by(error, lambda e: isinstance(e, OSError) and e.errno in _UNWRITABLE
                            and _inside(e.filename, root))
    if not unwritable:
      raise
    file = _file_in_the_way(Path(os.fsdecode(unwritable.filename)))
    why = (f'{paths.shown(file)} is a file, not a directory' if file else
           f'{unwritable.strerror}: {paths.shown(unwritable.filename)}')
    raise CorpusError(f'{named} cannot hold the prepared dataset ({why}); give a writable '
                      'directory as --data_dir') from error


def _file_in_the_way(path: Path) -> Path | None:
  """The first of path's ancestors (or path) that exists and is not a directory, if any."""
  for place in reversed((path, *path.parents)):
    if place.exists() and not place.is_dir():
      return place
  return None


def _caused_by(error: BaseException | None, test) -> BaseException | None:
  """`error` or what caused it (a chain of wrapped errors) that passes `test`, or None."""
  while error is not None:
    if test(error):
      return error
    error = error.__cause__ or error.__context__
  return None


def _inside(filename, root: Path) -> bool:
  if not filename:
    return False
  full, top = paths.absolute(os.fsdecode(filename)), paths.absolute(root)
  return full == top or full.startswith(top.rstrip(os.sep) + os.sep)


def import_tensorflow_if_used(builder) -> None:
  """Imports TensorFlow if the builder's own code uses it, as TFDS catalogue builders do
  (tiny_shakespeare and lm1b read their downloads with tf.io.gfile): one that lacks it then
  fails before its download (lm1b's is 1.7 GB), not after. ImportError if it is missing."""
  for cls in type(builder).__mro__:
    module = sys.modules.get(cls.__module__)
    if module is None or cls.__module__.startswith('tensorflow_datasets.core'):
      continue
    for value in vars(module).values():
      # TFDS's lazy `tf` (an etils LazyModule) or `import tensorflow`; read without
      # touching the lazy module, whose attributes import it.
      named = (value.__name__ if isinstance(value, types.ModuleType) else
               inspect.getattr_static(value, 'module_name', None))
      if isinstance(named, str) and named.split('.')[0] == 'tensorflow':
        # Quiet: no INFO lines from its C++ at import. nplm computes nothing with TensorFlow
        # (the builders read files with it), so its oneDNN kernels, which announce
        # themselves, are not wanted either.
        os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '1')
        os.environ.setdefault('TF_ENABLE_ONEDNN_OPTS', '0')
        try:
          importlib.import_module('tensorflow')
        except ImportError as error:  # Missing, or installed but broken: either way, TF's.
          raise ImportError(str(error), name='tensorflow') from error
        return


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
