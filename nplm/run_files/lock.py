"""One trainer per workdir: a lock the training process holds until it exits.

The lock is the kernel's (fcntl.flock on `train.lock`): it is released when its process
ends, however it ends, so a crashed or killed trainer never leaves a stale lock. The file
names the holder (process id, host, start time) for the message a second trainer gets.
Readers (score, generate, ...) take no lock: they only read.
"""

import datetime
import fcntl
import os
import socket
from pathlib import Path

from nplm import paths
from nplm.errors import ConfigError

LOCK_NAME = 'train.lock'


class WorkdirBusyError(RuntimeError):
  """Another process is training in this workdir."""


def prepare_workdir(workdir: Path) -> None:
  """Creates the workdir, or a ConfigError naming what is in the way (messages show it as
  typed: relative to the current directory when it lies under it)."""
  shown = paths.shown(workdir)
  too_wide = paths.too_wide_for_a_workdir(workdir)
  if too_wide:
    raise ConfigError(f'--workdir={shown} {too_wide}: a run writes its files and '
                      'checkpoints into its workdir; give a directory of its own, e.g. '
                      '--workdir=runs/NAME')
  workdir = Path(paths.absolute(workdir))
  for path in (workdir, *workdir.parents):
    if paths.broken_link(path):
      where = '' if path == workdir else f' (it lies under {paths.shown(path)})'
      raise ConfigError(f'--workdir={shown}: {paths.shown(path)} is a symbolic link that '
                        f'leads nowhere (a loop, or its target is missing){where}: give a '
                        'directory path')
    if path.exists() and not path.is_dir():
      where = '' if path == workdir else f' (it lies under {paths.shown(path)}, a file)'
      raise ConfigError(f'--workdir={shown} cannot be a directory{where}: '
                        'give a directory path')
  try:
    workdir.mkdir(parents=True, exist_ok=True)
  except OSError as error:  # No permission, a read-only file system, ...
    raise ConfigError(f'--workdir={shown} cannot be created ({error.strerror}): give a '
                      'directory you can write to') from error


class WorkdirLock:
  """Held from `acquire()` to `release()` (or the process's end)."""

  def __init__(self, workdir: Path):
    self.path = workdir / LOCK_NAME
    self._fd = None

  def acquire(self) -> 'WorkdirLock':
    try:
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:  # No permission, a read-only file system, ...
      raise ConfigError(f'--workdir={paths.shown(self.path.parent)} is not writable '
                        f'({error.strerror}): give a directory you can write to') from error
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.read(fd, 200).decode(errors='replace').strip() or 'another process'
      os.close(fd)
      raise WorkdirBusyError(f'{paths.shown(self.path.parent)} is being trained by {holder}: '
                             'wait for it to finish (or stop it), or use another --workdir'
                             ) from None
    started = datetime.datetime.now().isoformat(timespec='seconds')
    os.ftruncate(fd, 0)
    os.write(fd, f'process {os.getpid()} on {socket.gethostname()} since {started}\n'.encode())
    self._fd = fd
    return self

  def release(self) -> None:
    if self._fd is not None:
      fcntl.flock(self._fd, fcntl.LOCK_UN)
      os.close(self._fd)
      self._fd = None
