"""Orbax checkpoints of a run: the latest (for resumption) and the best on validation.

Each checkpoint holds the train state and the loop's progress (a small JSON). The run's
identity (its config and vocabulary) is written once to `run.json` in the workdir, so that a
rerun with the same workdir resumes and one with an incompatible config is refused before
anything is overwritten.
"""

import json
from pathlib import Path

import jax
import orbax.checkpoint as ocp

from nplm.config import Config
from nplm.files import write_json_atomically


class IncompatibleCheckpointError(RuntimeError):
  """The workdir holds a run that this config or vocabulary cannot continue."""


def claim_workdir(workdir: Path, config: Config, vocab_fingerprint: str,
                  data_fingerprint: str, write: bool = True) -> None:
  """Records the run's identity (if `write`: process 0 of a run): its config, vocabulary and
  data (the ids of every split), or checks it against the one already recorded."""
  workdir.mkdir(parents=True, exist_ok=True)
  identity_path = workdir / 'run.json'
  if not identity_path.exists():
    if write:
      write_json_atomically(identity_path, {'config': config.to_dict(),
                                            'vocab_fingerprint': vocab_fingerprint,
                                            'data_fingerprint': data_fingerprint})
    return
  saved = json.loads(identity_path.read_text())
  problems = config.incompatibilities(saved['config'])
  if saved['vocab_fingerprint'] != vocab_fingerprint:
    problems.append('vocabulary: the corpus or --unk_max_count gives a different vocabulary')
  elif saved.get('data_fingerprint', data_fingerprint) != data_fingerprint:  # Older runs: none.
    problems.append(f'data: --dataset={config.dataset} now holds other text than the run '
                    'was trained on (its files changed)')
  if problems:
    raise IncompatibleCheckpointError(
        f'{workdir} holds a run that this one cannot continue:\n  ' + '\n  '.join(problems) +
        '\nIts checkpoints are kept. Use another --workdir, or rerun with the settings above.')


class Checkpoints:
  """The latest checkpoints (periodic) and the best on validation, under one workdir."""

  def __init__(self, workdir: Path):
    directory = workdir.absolute()  # Orbax wants absolute paths.
    # A write cut short by a kill stays a temporary directory: never restored, removed here.
    def manager(name: str, max_to_keep: int):
      options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep,
                                             cleanup_tmp_directories=True)
      # Handlers named up front: a resuming manager can read a checkpoint's metadata.
      handlers = {'state': ocp.StandardCheckpointHandler(),
                  'progress': ocp.JsonCheckpointHandler()}
      return ocp.CheckpointManager(directory / name, options=options, item_handlers=handlers)
    self._latest, self._best = manager('checkpoints', 2), manager('best', 1)

  def save_latest(self, step: int, state, progress: dict) -> None:
    self._save(self._latest, step, state, progress)

  def save_best(self, step: int, state, progress: dict) -> None:
    self._save(self._best, step, state, progress)

  def restore_latest(self, abstract_state):
    """(state, progress) of the latest checkpoint, or None if there is none."""
    return self._restore(self._latest, abstract_state)

  def restore_best(self, abstract_state):
    return self._restore(self._best, abstract_state)

  def saved_params(self, which: str = 'best') -> dict | None:
    """The parameters of the best (or 'latest') checkpoint as saved, with no template.

    For analysis and generation outside a run; a run restores through `restore_*`.
    """
    manager = self._best if which == 'best' else self._latest
    step = manager.latest_step()
    if step is None:
      return None
    restored = manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
    return restored.state['params']

  @property
  def latest_step(self) -> int | None:
    return self._latest.latest_step()

  def close(self) -> None:
    """Waits for pending writes; a checkpoint only counts once it is finished."""
    for manager in (self._latest, self._best):
      manager.wait_until_finished()
      manager.close()

  @staticmethod
  def _save(manager, step: int, state, progress: dict) -> None:
    if step in manager.all_steps():  # Saved again after a resume, with newer progress.
      manager.delete(step)
    manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                               progress=ocp.args.JsonSave(progress)))
    manager.wait_until_finished()

  @staticmethod
  def _restore(manager, abstract_state):
    step = manager.latest_step()
    if step is None:
      return None
    # Vocabulary-parallel output rows are padded to a multiple of the 'model' shards, so a
    # run resumed on another mesh may want more or fewer rows than were saved. The rows past
    # |V| are padding, masked everywhere: Orbax may pad (with zeros) or cut exactly those.
    # Everything else must match (run.json vouches for the config), so that is strict.
    same_rows = (_output_rows(manager.item_metadata(step)['state'].tree)
                 == _output_rows(abstract_state.params))
    restored = manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract_state, strict=same_rows),
        progress=ocp.args.JsonRestore()))
    return restored.state, restored.progress


def _output_rows(tree) -> int | None:
  """The number of output rows (padding included) of a state's or params' head, if any."""
  params = tree.get('params', tree) if isinstance(tree, dict) else tree
  output = params.get('head', {}).get('output', {})
  return output['bias'].shape[0] if 'bias' in output else None


def abstract_of(state):
  """Shapes, dtypes and shardings of `state`: the target a checkpoint is restored into."""
  return jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
