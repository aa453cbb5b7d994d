"""Checkpoints of a run: the latest (for resumption) and the best on validation, verified.

Each checkpoint holds the train state and the loop's progress (a small JSON) with a checksum
of both (nplm.run_files.checksum); every restore verifies it. A checkpoint that cannot be read or fails
verification is reported in one line and the next good one is used instead: for resuming,
the newest good one of either directory; for the best parameters, the same step's copy in
the other directory. The trainer moves a damaged checkpoint it passed over to `damaged/`
(out of the way of the steps it saves next); if no checkpoint is good, nothing is moved or
deleted and the error says so. Readers (nplm.run_files.saved_params) only read: they never
create, clean or move anything in a workdir that may be training.

A save cut short (a kill, a second Ctrl-C) never costs a finished checkpoint: a step is
written under a temporary name and renamed; a step saved again is written beside its first
copy and renamed into its place; the next trainer removes or undoes what a kill left.

The run's identity (its config, vocabulary, data and learned tokenizer) is written once to
`run.json` in the workdir (nplm.run_files.model_run.claim_workdir), so that a rerun with the
same workdir resumes and one with an incompatible config is refused before anything is
overwritten; every checkpoint keeps a copy of it in its progress record ('run'), from which
a lost run.json is read (`recorded_identity`: a workdir that holds checkpoints is never
taken for a new run). Its data locations are absolute
(Config.absolute_paths), so the run reads from any current directory; nothing in a workdir
names a file inside it by path (checkpoints are found from the workdir they are read from),
so a workdir copied or moved elsewhere still reads and resumes.

Which parameters a finished run reported (its best, or its last update's) is in its
summary.json, checksummed (nplm.run_files.summary), and in its final checkpoint's progress
record ('reported'), so that readers follow it without the summary; a damaged summary is an
error, never a silent other choice.
"""

import errno
import gc
import json
import logging
import os
import shutil
from pathlib import Path

import jax
from jax.experimental import multihost_utils
import orbax.checkpoint as ocp

from nplm.run_files import abandoned_reads, state_layouts
from nplm.run_files.checksum import checkpoint_checksum
from nplm.paths import absolute, shown

log = logging.getLogger(__name__)

LATEST, BEST = 'checkpoints', 'best'
_METADATA_BYTES = 64 * 2**10  # What a checkpoint holds besides its arrays (uncompressed).


class IncompatibleCheckpointError(RuntimeError):
  """The workdir holds a run that this config or vocabulary cannot continue."""


def read_identity(workdir: Path) -> dict | None:
  """run.json of a workdir (None if it has none); a damaged one is an error, not a new run."""
  path = workdir / 'run.json'
  try:
    return json.loads(path.read_text())
  except FileNotFoundError:
    return None
  except OSError as error:  # Not damage: no permission, a directory in its place, ...
    raise IncompatibleCheckpointError(
        f'{shown(path)} cannot be read ({_first_line(error)}); it records which run '
        f'{shown(workdir)} holds.') from error
  except ValueError as error:
    raise IncompatibleCheckpointError(
        f'{shown(path)} is damaged ({_first_line(error)}); it records which run '
        f'{shown(workdir)} holds. Restore it, or move the workdir aside and use another '
        '--workdir.') from error


def recorded_identity(workdir: Path) -> dict | None:
  """The copy of run.json that the newest good checkpoint keeps, read-only; None if the
  workdir holds no checkpoint (a new run), an error if none keeps a readable copy."""
  workdir = Path(absolute(workdir))
  paths = _newest_first(workdir)
  if not paths:
    return None
  unreadable = []
  for path in paths:
    try:
      identity = read(path)[1].get('run')
    except UnusableCheckpoint as why:
      unreadable.append(f'{path.parent.name}/{path.name}: {why}')
      continue
    if identity is not None:
      return identity
  why = (f'none can be read: {"; ".join(unreadable[:2])}' if len(unreadable) == len(paths)
         else 'an older nplm saved them without one')
  raise IncompatibleCheckpointError(
      f'{shown(workdir)} holds checkpoints but no run.json, which records the run they belong '
      f'to, and no checkpoint keeps a copy of it ({why}): restore run.json from a copy of the '
      'workdir, or move the workdir aside and use another --workdir.')


class CheckpointError(RuntimeError):
  """No checkpoint of a workdir can be used (each is damaged); nothing was deleted."""


class UnusableCheckpoint(Exception):
  """One checkpoint cannot be read or fails verification."""


class Checkpoints:
  """The trainer's checkpoints of a workdir: it alone writes, moves and deletes them (it
  holds the workdir's lock); in a multi-process run, process 0 (`main`) does the moving
  and deleting and every process reads and saves (a collective). Each keeps `identity`
  (run.json's content) in its progress record; checkpoints/ keeps the `keep` newest
  (--keep_checkpoints) and the best step's copy."""

  def __init__(self, workdir: Path, main: bool = True, identity: dict | None = None,
               keep: int = 2):
    self.workdir, self.main = workdir.absolute(), main  # Orbax wants absolute paths.
    self.identity, self.keep = identity, keep
    if main:
      for name in (LATEST, BEST):
        _finish_or_undo_saves(self.workdir / name)

  def save_latest(self, step: int, state, progress: dict, best: bool = False) -> None:
    """checkpoints/STEP; with `best`, best/STEP too, as a copy of its files: the same bytes,
    without a second Orbax save (most of an epoch's time on a small corpus)."""
    self._save(LATEST, step, state, progress)
    if best:
      self._copy_to_best(self.workdir / LATEST / str(step))
    best_steps = finished_steps(self.workdir / BEST)[:1]
    self._delete(LATEST, finished_steps(self.workdir / LATEST)[self.keep:], keep=best_steps)

  def save_again(self, step: int, state, progress: dict) -> None:
    """checkpoints/STEP, the newest, saved again with a newer progress record; nothing else
    is deleted: the best step's copy in checkpoints/ stays even where best/ was lost, for
    restore_best to fall back on."""
    self._save(LATEST, step, state, progress)

  def _copy_to_best(self, source: Path) -> None:
    """best/ holds `source`'s copy (made under a temporary name, then renamed: a copy cut
    short is cleaned away, never read; a step copied again replaces its first copy as a
    step saved again does), and no other step."""
    if self.main:
      target = self.workdir / BEST / source.name
      partial = target.with_name(f'{source.name}.orbax-checkpoint-tmp-copy')
      if partial.exists():
        shutil.rmtree(partial)
      shutil.copytree(source, partial)
      _put_in_place(target, partial)
      self._delete(BEST, finished_steps(self.workdir / BEST)[1:])
    if jax.process_count() > 1:  # Every process may read it next.
      multihost_utils.sync_global_devices('nplm: best copied')

  def restore_latest(self, abstract_state):
    """(state, progress) of the newest good checkpoint, or None if there is none."""
    found = self._first_good(_newest_first(self.workdir), abstract_state)
    return None if found is None else (found[1], _without_identity(found[2]))

  def restore_best(self, abstract_state, step: int | None = None):
    """(state, progress) of the best checkpoint, at `step` (the progress record's best
    step; by default best/'s): from best/, or the same step's copy in checkpoints/ if
    best/'s is damaged or gone (then copied to best/ again); None if there is no best."""
    if step is None:
      best = finished_steps(self.workdir / BEST)[:1]
      if not best:
        return None
      step = best[0]
    copies = [self.workdir / name / str(step) for name in (BEST, LATEST)]
    found = self._first_good([path for path in copies if path.exists()], abstract_state)
    if found is None:
      raise CheckpointError(f'{shown(self.workdir)}: no copy of the best checkpoint (step '
                            f'{step}) is left in best/ or checkpoints/; nothing was deleted. '
                            'Its best parameters are lost: train again in a new --workdir.')
    path, state, progress = found
    progress = _without_identity(progress)
    progress.pop('reported', None)
    if path.parent.name != BEST:
      self._copy_to_best(path)
    return state, progress

  @property
  def latest_step(self) -> int | None:
    steps = finished_steps(self.workdir / LATEST)
    return steps[0] if steps else None

  def _first_good(self, paths: list[Path], abstract_state):
    """(path, state, progress) of the first good checkpoint of `paths`, the bad ones before
    it moved to damaged/; None if `paths` is empty; CheckpointError if none is good."""
    rejected, reasons = [], []
    for path in paths:
      try:
        state, progress = read(path, abstract_state)
      except UnusableCheckpoint as why:
        log.warning('Checkpoint %s cannot be used: %s', path, why)
        rejected.append(path)
        reasons.append(f'{path.parent.name}/{path.name}: {why}')
        continue
      self._set_aside(rejected)
      return path, state, progress
    if rejected:
      raise CheckpointError(
          f'{shown(self.workdir)}: no checkpoint can be restored ({"; ".join(reasons)}); '
          'nothing was deleted. Move the workdir aside and train again in a new --workdir.')
    return None

  def _set_aside(self, paths: list[Path]) -> None:
    """Moves damaged checkpoints to damaged/, kept for inspection, so that the steps they
    hold can be saved again."""
    if jax.process_count() > 1:  # Every process has read them before any is moved.
      multihost_utils.sync_global_devices('nplm: checkpoints read')
    if not self.main:
      return
    for path in paths:
      target = self.workdir / 'damaged' / f'{path.parent.name}-{path.name}'
      while target.exists():
        target = target.with_name(target.name + '+')
      target.parent.mkdir(exist_ok=True)
      os.replace(path, target)
      log.warning('Moved the damaged checkpoint %s to %s.', path, target)

  def _save(self, name: str, step: int, state, progress: dict) -> None:
    """NAME/STEP; a step saved already (with newer progress: a resumed run, keep_report)
    is written beside it as STEP.again, then put in its place (_replace): a kill or a
    second Ctrl-C at any moment leaves the one copy or the other, never neither."""
    self._check_space(state)
    path = self.workdir / name / str(step)
    again = path.exists()
    target = path.with_name(f'{step}{_AGAIN}') if again else path
    if target.exists() and self.main:  # Left by a kill in a save again: cleaned at start.
      shutil.rmtree(target)
    if jax.process_count() > 1:
      multihost_utils.sync_global_devices('nplm: checkpoint step free')
    if self.identity is not None:
      progress = {**progress, 'run': self.identity}
    progress = {**progress, 'checksum': checkpoint_checksum(state, progress)}
    with _checkpointer() as checkpointer:  # Written in a temporary directory, then renamed.
      checkpointer.save(target, args=ocp.args.Composite(
          state=ocp.args.StandardSave(state), progress=ocp.args.JsonSave(progress)))
    if again:
      self._replace(path, target)

  def _replace(self, path: Path, again: Path) -> None:
    """`again` in `path`'s place (_put_in_place)."""
    if self.main:
      _put_in_place(path, again)
    if jax.process_count() > 1:
      multihost_utils.sync_global_devices('nplm: checkpoint saved again')

  def _check_space(self, state) -> None:
    """A full disk is found before Orbax writes: its threads, failing mid-write, print
    pages of tracebacks (the error itself comes after them)."""
    needed = sum(leaf.nbytes for leaf in jax.tree.leaves(state)) + _METADATA_BYTES
    free = shutil.disk_usage(self.workdir).free
    if free < needed:
      raise OSError(errno.ENOSPC, f'No space left on device: a checkpoint needs up to '
                    f'{needed / 2**20:.1f} MiB, {free / 2**20:.1f} MiB are free', str(self.workdir))

  def _delete(self, name: str, steps: list[int], keep=()) -> None:
    if self.main:
      for step in steps:
        if step not in keep:
          shutil.rmtree(self.workdir / name / str(step))


_AGAIN, _REPLACED = '.again', '.replaced'  # A step saved again, and the copy it replaces.


def _put_in_place(path: Path, new: Path) -> None:
  """`new` renamed `path`; an old copy at `path` is renamed STEP.replaced first and deleted
  last. Between the two renames a kill leaves no STEP: the next trainer renames
  STEP.replaced back (_finish_or_undo_saves)."""
  if not path.exists():
    os.replace(new, path)
    return
  replaced = path.with_name(f'{path.name}{_REPLACED}')
  os.replace(path, replaced)
  os.replace(new, path)
  shutil.rmtree(replaced)


def _finish_or_undo_saves(directory: Path) -> None:
  """What saves cut short by a kill left in `directory`, cleaned: a temporary directory
  (Orbax's, a copy's, a step saved again) is never restored and is deleted; a step's old
  copy renamed STEP.replaced goes back to STEP where nothing took its place (_put_in_place)."""
  for replaced in directory.glob(f'*{_REPLACED}'):
    step = replaced.with_name(replaced.name.removesuffix(_REPLACED))
    if step.exists():
      shutil.rmtree(replaced)
    else:
      os.replace(replaced, step)
  for path in [*directory.glob('*.orbax-checkpoint-tmp*'), *directory.glob(f'*{_AGAIN}')]:
    shutil.rmtree(path)


def _checkpointer() -> ocp.Checkpointer:
  """A synchronous Orbax checkpointer of (state, progress): no threads outlive a call."""
  return ocp.Checkpointer(ocp.CompositeCheckpointHandler(
      state=ocp.StandardCheckpointHandler(), progress=ocp.JsonCheckpointHandler()))


def _newest_first(workdir: Path) -> list[Path]:
  """Every finished checkpoint of both directories, newest first, checkpoints/'s before
  best/'s copy of the same step."""
  candidates = sorted(((step, name) for name in (LATEST, BEST)
                       for step in finished_steps(workdir / name)),
                      key=lambda c: (-c[0], c[1] != LATEST))
  return [workdir / name / str(step) for step, name in candidates]


def _without_identity(progress: dict) -> dict:
  """The loop's progress record, without the copy of run.json that checkpoints keep."""
  return {key: value for key, value in progress.items() if key != 'run'}


def finished_steps(directory: Path) -> list[int]:
  """The steps of the finished checkpoints in `directory`, newest first (unfinished ones
  are temporary directories with other names)."""
  try:
    names = os.listdir(directory)
  except FileNotFoundError:
    return []
  return sorted((int(name) for name in names if name.isdigit()), reverse=True)


def read(path: Path, abstract_state=None):
  """(state, progress) of the checkpoint at `path`, verified against its checksum; restored
  into `abstract_state`'s shapes and shardings (an older layout into today's:
  nplm.run_files.state_layouts), or without one as saved, onto this process's first device:
  a reader's machine may have other devices than the run had (8 GPUs, a laptop)."""
  as_today = lambda state: state
  abandoned_reads.drop()
  try:
    with _checkpointer() as checkpointer:
      saved = checkpointer.metadata(path).item_metadata['state'].tree
      state_args = ocp.args.StandardRestore(_on_first_device(saved))
      if abstract_state is not None:
        abstract_state, as_today = state_layouts.restore_target(saved, abstract_state)
        # Vocabulary-parallel output rows are padded to a multiple of the 'model' shards,
        # so a run resumed on another mesh may want more or fewer rows than were saved.
        # The rows past |V| are padding, masked everywhere: Orbax may pad (with zeros) or
        # cut exactly those. Everything else must match (run.json vouches for the config).
        same_rows = _output_rows(saved) == _output_rows(abstract_state.params)
        state_args = ocp.args.StandardRestore(abstract_state, strict=same_rows)
      restored = checkpointer.restore(path, args=ocp.args.Composite(
          state=state_args, progress=ocp.args.JsonRestore()))
  except Exception as error:  # Damage surfaces as many types (Orbax, TensorStore, JSON, OS).
    why = _first_line(error)
  else:
    why = None
  if why is not None:
    gc.collect()  # The abandoned reads, dropped now rather than as the process ends.
    raise UnusableCheckpoint(f'it cannot be read ({why})')
  progress = dict(restored.progress)
  checksum = progress.pop('checksum', None)
  if checksum is None:
    log.warning('Checkpoint %s has no checksum (saved by an older nplm): not verified.', path)
  elif checkpoint_checksum(restored.state, progress) != checksum:
    raise UnusableCheckpoint('its contents do not match their checksum (the files were damaged)')
  return as_today(restored.state), progress


def _first_line(error: Exception) -> str:
  text = str(error).strip().splitlines()
  # TensorStore appends its whole spec after "See full TensorStore details".
  first = text[0].split(' See full ')[0][:200] if text else ''
  return f'{type(error).__name__}: {first}' if first else type(error).__name__


def _output_rows(tree) -> int | None:
  """The number of output rows (padding included) of a state's or params' head, if any."""
  params = tree.get('params', tree) if isinstance(tree, dict) else tree
  output = params.get('head', {}).get('output', {})
  return output['bias'].shape[0] if 'bias' in output else None


def _on_first_device(saved):
  """A restore target of a checkpoint's arrays (`saved`: their metadata) as saved, each whole
  on this process's first device, whatever devices the run that saved them had."""
  device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=device),
                      saved)


def abstract_of(state):
  """Shapes, dtypes and shardings of `state`: the target a checkpoint is restored into."""
  return jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
