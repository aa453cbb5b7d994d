"""What the training loop (nplm.training.loop) says: the start-up line that names the run, and
the progress line of every --log_every updates with the time left in the epoch and the run."""

import jax

from nplm import models, paths
from nplm.config import Config
from nplm.data.corpus import Corpus
from nplm.data.tokenizers import token_kind
from nplm.display import counted, duration
from nplm.run_files.summary import parameter_count
from nplm.training.actions import StepInfo
from nplm.training.runs import Runs


def planned_steps(config: Config, steps_per_epoch: int) -> int:
  """The updates the run takes if nothing stops it early: --epochs, or --max_steps."""
  planned = config.epochs * steps_per_epoch
  return min(planned, config.max_steps) if config.max_steps else planned


def progress_line(info: StepInfo, step: int, steps_per_epoch: int, planned: int,
                  runs: Runs) -> str:
  """step, where in the epoch, the loss(es), speed and the time left in the epoch and in
  the run (its `planned` updates; early stopping may end it sooner)."""
  per_epoch, epoch = steps_per_epoch, info.epoch
  in_epoch = step - epoch * per_epoch
  if runs.count == 1:
    loss = f'loss {info.losses[0]:.4f}'
  else:
    loss = 'losses ' + ' '.join(f'{k}:{info.losses[k]:.3f}' for k in runs.training)
  if not info.steps_per_second:  # Only the compiled step since the last line: no rate yet.
    return f'step {step}  epoch {epoch + 1}: {in_epoch}/{per_epoch} steps  {loss}'
  planned_left = planned - step
  left = min(per_epoch - in_epoch, planned_left) / info.steps_per_second
  run_left = planned_left / info.steps_per_second
  per_model = ' per model' if runs.count > 1 else ''
  return (f'step {step}  epoch {epoch + 1}: {in_epoch}/{per_epoch} steps '
          f'({100 * in_epoch / per_epoch:.0f}%, {duration(left)} left; the run '
          f'{duration(run_left)} at most)  {loss}  '
          f'{info.examples_per_second:,.0f} examples/s{per_model}')


def startup_line(config: Config, corpus: Corpus, runs: Runs, mesh, steps_per_epoch: int,
                 step: int) -> str:
  """What the run is: data, model, head, size, devices, workdir(s); new, or resumed at
  `step`."""
  tokens = ', '.join(f'{name} {len(ids):,}' for name, ids in corpus.splits.items())
  shape = ','.join(f'{axis}:{size}' for axis, size in mesh.shape.items())
  first, last = runs.all[0].workdir, runs.all[-1].workdir
  workdirs = (f'workdir {paths.shown(first)}' if runs.count == 1
              else f'{runs.count} models trained together, workdirs '
                   f'{paths.shown(first)} … {paths.shown(last)}')
  state = f'resumed at step {step}' if step else 'new'
  calls = (f' ({config.updates_per_call} a call)' if config.updates_per_call > 1 else '')
  return (f'{config.dataset} ({token_kind(config)}): |V| = {corpus.vocab.size:,}, tokens '
          f'{tokens} · model {models.model_class(config.model).describe(config)} · head '
          f'{config.head} · '
          f'{parameter_count(runs.template.params, corpus.vocab.size):,} '
          f'parameters · {counted(steps_per_epoch, "step")} per epoch{calls} · '
          f'{counted(jax.device_count(), jax.devices()[0].platform + " device")}, mesh {shape} · '
          f'{workdirs} ({state})')
