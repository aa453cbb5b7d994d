"""The parameters a run reports, read-only: for using a model outside its run, also while it
trains (nplm.run_files.checkpoint says how checkpoints are kept and verified)."""

from pathlib import Path

from nplm.paths import absolute, shown
from nplm.run_files.checkpoint import (BEST, LATEST, CheckpointError, UnusableCheckpoint,
                                       finished_steps, read)
from nplm.run_files.summary import SummaryDamaged, read_summary


def saved_params(workdir: Path, latest: bool = False) -> dict | None:
  """The parameters a run reports, read-only: those its final evaluation scored (its best
  checkpoint's, from best/ or the same step's copy in checkpoints/, or its last update's), as
  its summary.json says ('reported', checksummed) or, without one, its final checkpoint's
  record; for a run still training (or resumed past its summary), its best so far, or the
  newest good checkpoint's if none was validated (or if `latest`); None if there is no
  checkpoint yet. A damaged summary.json is a CheckpointError: its choice cannot be trusted.

  For reading a model outside its run, also while it trains: a checkpoint deleted under the
  reader (the trainer keeps few) sends it to the next one, and a listing that changed
  meanwhile is read again. `workdir` may be relative (to the current directory): Orbax reads
  absolute paths only."""
  workdir = Path(absolute(workdir))
  try:
    summary = None if latest else read_summary(workdir)
  except SummaryDamaged as error:
    raise CheckpointError(str(error)) from None
  for attempt in range(3):
    listing = _listing(workdir)
    try:
      return _reported_params(workdir, listing, summary, latest)
    except CheckpointError:
      if attempt == 2 or listing == _listing(workdir):
        raise
  return None  # Not reached.


def _listing(workdir: Path) -> dict[str, list[int]]:
  return {name: finished_steps(workdir / name) for name in (LATEST, BEST)}


def _reported_params(workdir: Path, listing: dict, summary: dict | None, latest: bool):
  """saved_params for one listing of the workdir's checkpoints."""
  newest = [workdir / LATEST / str(step) for step in listing[LATEST]]
  if latest:
    found = _first_readable(workdir, newest)
    return None if found is None else found[1]['params']
  report = _summary_report(summary, listing)
  if report is None and newest:  # The newest checkpoint's record, if it ended the run.
    path, state, progress = _first_readable(workdir, newest)
    report = progress.get('reported')
    if (report is None and not listing[BEST]
        or report and report['parameters'] == 'last' and report['step'] == int(path.name)):
      return state['params']
  if report:
    step, which = report['step'], report['parameters']
    names = (BEST, LATEST) if which == 'best' else (LATEST,)
    paths = [workdir / name / str(step) for name in names if step in listing[name]]
    if not paths:
      raise CheckpointError(
          f'{shown(workdir)}: no checkpoint holds the parameters its run reported (its '
          f'{which}, step {step}); rerun its train command to train them again.')
  else:  # A run still training: its best so far.
    paths = [workdir / name / str(listing[BEST][0]) for name in (BEST, LATEST)
             if listing[BEST]]
  found = _first_readable(workdir, paths)
  return None if found is None else found[1]['params']


def _summary_report(summary: dict | None, listing: dict) -> dict | None:
  """Which parameters a summary says its run reported, if it stands for the workdir's
  checkpoints (the run has not been resumed and trained past it since)."""
  report = (summary or {}).get('reported')  # Older summaries have none.
  if not report or any(step > summary.get('steps', step) for step in listing[LATEST]):
    return None
  return report


def _first_readable(workdir: Path, paths: list[Path]):
  """(path, state, progress) of the first good checkpoint of `paths`, read-only; None if
  `paths` is empty; CheckpointError if none is good."""
  rejected = []
  for path in paths:
    try:
      return (path, *read(path))
    except UnusableCheckpoint as why:
      rejected.append(f'{path.parent.name}/{path.name}: {why}')
  if rejected:
    raise CheckpointError(f'{shown(workdir)}: no usable checkpoint of the parameters its '
                          f'run reports ({"; ".join(rejected)}).')
  return None
