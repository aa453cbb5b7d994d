r"""What a data dir's prepared datasets and a workdir's checkpoints take on disk, and removing
what is no longer needed.

  nplm clean --data_dir=~/tensorflow_datasets          # prepared datasets: name, size, when, source
  nplm clean --data_dir=D --remove=NAME[,NAME]         # remove prepared datasets by name
  nplm clean --workdir=runs/mlp9                       # checkpoints/*, best/*, damaged/*
  nplm clean --workdir=runs/mlp9 --remove=checkpoints/4000,damaged
  nplm clean --workdir=runs/mlp9 --remove_unneeded     # every checkpoint but the needed ones

A workdir's needed checkpoints are never removed: the newest good one in checkpoints/ (the run
resumes from it) and the best step's (best/, and its copy in checkpoints/: the run reports it).
Nothing is removed while a trainer holds the workdir (train.lock) or a preparer the dataset
(.prepare.lock): both are the kernel's locks, taken here for the removal too. A dataset
removed is prepared again by the next run that reads it.
"""

import contextlib
import datetime
import fcntl
import json
import os
import shutil
from pathlib import Path

from absl import flags

from nplm import cli, paths
from nplm.config import ConfigError
from nplm.run_files import checkpoint
from nplm.run_files.lock import LOCK_NAME
from nplm.run_files.summary import SummaryDamaged, read_summary
from nplm.data.tfds_dirs import LOCK_NAME as PREPARE_LOCK
from nplm.training.memory import size

FLAGS = flags.FLAGS
DATASETS = 'nplm_tokens'  # The builder of every prepared source (nplm.data.prepared).
DAMAGED = 'damaged'


def disk_bytes(path: Path) -> int:
  """The disk a file or directory takes (its blocks), links not followed."""
  if not path.is_dir() or path.is_symlink():
    return path.lstat().st_blocks * 512
  return sum(disk_bytes(child) for child in path.iterdir()) + path.lstat().st_blocks * 512


@contextlib.contextmanager
def holding(lock_file: Path, busy: str):
  """The kernel lock at `lock_file` (flock, as its owners take it), or ConfigError `busy`."""
  try:
    fd = os.open(lock_file, os.O_RDONLY)
  except FileNotFoundError:  # Never locked by anyone: nobody holds it now.
    yield
    return
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      raise ConfigError(busy) from None
    yield
  finally:
    os.close(fd)


# --- a data dir's prepared datasets -------------------------------------------------------

def datasets(data_dir: Path) -> list[dict]:
  """Each prepared dataset under data_dir/nplm_tokens: name, size, when, source."""
  root = data_dir / DATASETS
  if not root.is_dir():
    return []
  found = []
  for directory in sorted(p for p in root.iterdir() if p.is_dir()):
    versions = sorted(p for p in directory.iterdir() if p.is_dir()
                      and (p / 'dataset_info.json').is_file())
    info = versions[-1] / 'metadata.json' if versions else None
    try:
      metadata = json.loads(info.read_text()) if info else {}
    except (OSError, ValueError):
      metadata = {}
    when = (datetime.datetime.fromtimestamp(info.stat().st_mtime).isoformat(timespec='minutes')
            if info and info.exists() else 'not prepared (an interrupted preparation)')
    source = metadata.get('source', '?')
    if metadata.get('tokenization'):
      source += f' ({metadata["tokenization"]})'
    found.append({'name': directory.name, 'path': directory, 'bytes': disk_bytes(directory),
                  'when': when, 'source': source})
  return found


def clean_data_dir(data_dir: Path, remove: list[str]) -> None:
  found = {entry['name']: entry for entry in datasets(data_dir)}
  unknown = [name for name in remove if name not in found]
  if unknown:
    raise ConfigError(f'--remove={",".join(unknown)}: no such prepared dataset under '
                      f'--data_dir={paths.shown(data_dir)}'
                      + (f' (it has: {", ".join(found)})' if found else ' (it has none)'))
  for name in remove:
    directory = found[name]['path']
    with holding(directory / PREPARE_LOCK, f'{name} is being prepared by another process: '
                 'wait for it to finish, then rerun nplm clean'):
      shutil.rmtree(directory)
    print(f'removed {name} ({size(found[name]["bytes"])})')
  if remove:
    return
  for entry in found.values():
    print(f'{entry["name"]:48} {size(entry["bytes"]):>8}  prepared {entry["when"]}  from '
          f'{entry["source"]}')
  print(f'{len(found)} prepared datasets, {size(sum(e["bytes"] for e in found.values()))}'
        f' under {paths.shown(data_dir / DATASETS)}')


# --- a workdir's checkpoints --------------------------------------------------------------

def needed(workdir: Path) -> dict[str, str]:
  """The checkpoints the run needs ('checkpoints/N' -> why): the newest good one in
  checkpoints/ (resume), the best step in best/ and its copy (what the run reports), and
  the step its summary says it reported."""
  kept = {}
  for step in checkpoint.finished_steps(workdir / checkpoint.LATEST):  # Newest first.
    try:
      checkpoint.read(workdir / checkpoint.LATEST / str(step))
    except Exception:  # pylint: disable=broad-except  # Damaged: the run passes over it.
      continue
    kept[f'{checkpoint.LATEST}/{step}'] = 'newest good checkpoint: the run resumes from it'
    break
  for step in checkpoint.finished_steps(workdir / checkpoint.BEST)[:1]:
    kept.setdefault(f'{checkpoint.BEST}/{step}', 'the best step: the run reports it')
    kept.setdefault(f'{checkpoint.LATEST}/{step}', 'the best step\'s second copy')
  try:  # A damaged one protects nothing more: the final checkpoint's record names the same.
    reported = (read_summary(workdir) or {}).get('reported') or {}
  except SummaryDamaged:
    reported = {}
  if reported.get('parameters') == 'last':
    kept.setdefault(f'{checkpoint.LATEST}/{reported["step"]}', 'the parameters the run '
                    'reported')
  return {name: why for name, why in kept.items() if (workdir / name).exists()}


def checkpoints(workdir: Path) -> list[str]:
  """'checkpoints/N', 'best/N', 'damaged/X' of the workdir, in that order."""
  names = [f'{where}/{step}' for where in (checkpoint.LATEST, checkpoint.BEST)
           for step in sorted(checkpoint.finished_steps(workdir / where))]
  if (workdir / DAMAGED).is_dir():
    names += [f'{DAMAGED}/{p.name}' for p in sorted((workdir / DAMAGED).iterdir())]
  return names


def clean_workdir(workdir: Path, remove: list[str], unneeded: bool) -> None:
  shown = paths.shown(workdir)
  if not (workdir / 'run.json').is_file():
    raise ConfigError(f'--workdir={shown} holds no run (no run.json): give a workdir that '
                      'nplm train wrote')
  busy = (f'{shown} is being trained (its {LOCK_NAME} is held): wait for the trainer to '
          'finish or stop it, then rerun nplm clean')
  with holding(workdir / LOCK_NAME, busy):
    present, kept = checkpoints(workdir), needed(workdir)
    if unneeded:
      remove = [name for name in present if name not in kept]
    remove = [n for name in remove for n in (
        [p for p in present if p.startswith(f'{DAMAGED}/')] if name == DAMAGED else [name])]
    unknown = [name for name in remove if name not in present]
    if unknown:
      raise ConfigError(f'--remove={",".join(unknown)}: not a checkpoint of {shown} (it '
                        f'has: {", ".join(present) or "none"})')
    refused = [name for name in remove if name in kept]
    if refused:
      raise ConfigError(f'--remove={",".join(refused)}: {kept[refused[0]]}; it is kept')
    sizes = {name: disk_bytes(workdir / name) for name in present}
    for name in remove:
      shutil.rmtree(workdir / name)
      print(f'removed {name} ({size(sizes[name])})')
    if remove:
      return
    for name in present:
      print(f'{name:24} {size(sizes[name]):>8}  {kept.get(name, "not needed")}')
    spare = sum(b for name, b in sizes.items() if name not in kept)
    print(f'{len(present)} checkpoints, {size(sum(sizes.values()))}; not needed '
          f'{size(spare)} (--remove_unneeded removes it); the workdir '
          f'{size(disk_bytes(workdir))}')


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()  # Orbax's and absl's INFO lines off (reading a checkpoint).
  try:
    if bool(FLAGS.workdir) == bool(FLAGS.data_dir):
      raise ConfigError('give --workdir=W (its checkpoints) or --data_dir=D (its prepared '
                        'datasets), one of them')
    remove = [name.strip().strip('/') for name in FLAGS.remove if name.strip()]
    where = Path(paths.absolute(FLAGS.workdir or FLAGS.data_dir))
    if not where.is_dir():
      flag = '--workdir' if FLAGS.workdir else '--data_dir'
      raise ConfigError(f'{flag}={paths.shown(where)} is not a directory')
    if FLAGS.data_dir:
      if FLAGS.remove_unneeded:
        raise ConfigError('--remove_unneeded is for a --workdir\'s checkpoints; name '
                          'datasets with --remove=NAME')
      clean_data_dir(where, remove)
    else:
      clean_workdir(where, remove, FLAGS.remove_unneeded)
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'A run\'s workdir: list (or remove) its checkpoints.')
  flags.DEFINE_string('data_dir', None, 'A TFDS data dir: list (or remove) its prepared '
                      'datasets (nplm_tokens/*).')
  flags.DEFINE_list('remove', [], 'What to remove: dataset names (--data_dir), or '
                    'checkpoints/N, best/N, damaged/X or damaged (--workdir).')
  flags.DEFINE_bool('remove_unneeded', False, 'Remove every checkpoint of --workdir but '
                    'the ones its run needs to resume and to report.')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
