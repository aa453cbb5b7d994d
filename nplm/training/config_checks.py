"""The checks of a Config before anything is built: each value that cannot work refused in
one line (ConfigError). The chosen model and head check their own knobs (nplm.models,
nplm.heads), the optimizer and schedule theirs (nplm.training.optimizer), the data settings
theirs (nplm.data.config_checks); a knob that neither the model nor the head reads must keep
its default. Here, not in nplm/config.py, so that the config imports no component."""

from nplm import heads, lm, models, parallel, paths
from nplm.config import Config, ConfigError, component_knobs, default_of
from nplm.data.config_checks import data_checks
from nplm.data.corpus import SPLITS
from nplm.training import optimizer


def settled(config: Config) -> Config:
  """The config as a run takes it, settled once at the edge: its source's defaults filled in
  (Config.resolved), every value checked (validated: ConfigError naming the first that
  cannot work), its paths absolute (Config.absolute_paths). Idempotent."""
  return validated(config.resolved()).absolute_paths()


def validated(config: Config) -> Config:
  """`config`, or ConfigError naming the first value that cannot work."""
  errors = (models.config_errors(config) + heads.config_errors(config)
            + _unread_knob_errors(config) + optimizer.config_errors(config))
  checks = [
      *[(False, error) for error in errors],
      (config.dtype in lm.COMPUTE_DTYPES,
       f'unknown --dtype={config.dtype!r}; known: {", ".join(sorted(lm.COMPUTE_DTYPES))}'),
      *data_checks(config),
      (config.batch_size >= 1, f'--batch_size must be positive, got {config.batch_size}'),
      (config.eval_batch_size >= 1,
       f'--eval_batch_size must be positive, got {config.eval_batch_size}'),
      (config.data_seed >= -1,
       f'--data_seed must be -1 (--seed) or more, got {config.data_seed}'),
      *_run_checks(config),
  ]
  parallel.parse_mesh(config.mesh)  # Raises ConfigError on a malformed --mesh.
  for ok, message in checks:
    if not ok:
      raise ConfigError(message)
  return config


def _unread_knob_errors(config: Config) -> list[str]:
  """A component knob set away from its default that neither the chosen model nor the
  chosen head reads would change nothing: refused, naming those that read it."""
  read = (*models.model_class(config.model).knobs, *heads.head_class(config.head).knobs)
  errors = []
  for name in component_knobs():
    if name in read or getattr(config, name) == default_of(name):
      continue
    if model_readers := models.readers(name):
      readers, chosen = f'--model={", ".join(model_readers)}', f'--model={config.model}'
    else:
      readers, chosen = f'--head={", ".join(heads.readers(name))}', f'--head={config.head}'
    errors.append(f'--{name} is read by {readers}, not {chosen}: leave it out')
  return errors


def _run_checks(config: Config) -> list[tuple[bool, str]]:
  """The run bounds, what it records and where, and the processes it runs in."""
  return [
      (config.epochs >= 1, f'--epochs must be positive, got {config.epochs}'),
      (config.patience >= 0, f'--patience must be 0 (no early stop) or more, got '
       f'{config.patience}'),
      (config.max_steps >= 0, f'--max_steps must be 0 or more, got {config.max_steps}'),
      (config.log_every >= 1, f'--log_every must be positive, got {config.log_every}'),
      (config.eval_every >= 0, f'--eval_every must be 0 (each epoch) or more, got '
       f'{config.eval_every}'),
      (config.valid_tokens_per_eval >= 0, '--valid_tokens_per_eval must be 0 (the whole valid '
       f'split) or more, got {config.valid_tokens_per_eval}'),
      (config.eval_splits in ('auto', 'none')
       or set(config.eval_splits.split(',')) <= set(SPLITS),
       f'unknown --eval_splits={config.eval_splits!r}; known: {", ".join(SPLITS)} '
       '(comma-separated), none or auto'),
      (config.checkpoint_minutes >= 0,
       f'--checkpoint_minutes must be 0 (none by time) or more, got {config.checkpoint_minutes}'),
      (config.checkpoint_every >= 0,
       f'--checkpoint_every must be 0 (by time only) or more, got {config.checkpoint_every}'),
      (config.profile_steps >= 0,
       f'--profile_steps must be 0 (none) or more, got {config.profile_steps}'),
      (config.keep_checkpoints >= 1,
       f'--keep_checkpoints must be at least 1 (the run resumes from one), got '
       f'{config.keep_checkpoints}'),
      (config.stop_seconds > 0, f'--stop_seconds must be positive, got {config.stop_seconds}'),
      (bool(config.workdir), '--workdir is required: it receives checkpoints and the summary'),
      (not config.workdir or not paths.too_wide_for_a_workdir(config.workdir),
       f'--workdir={config.workdir} {paths.too_wide_for_a_workdir(config.workdir or ".")}: a run '
       'writes its files and checkpoints into its workdir; give a directory of its own, '
       'e.g. --workdir=runs/NAME'),
      (not config.workdir or not paths.broken_link(config.workdir),
       f'--workdir={config.workdir} is a symbolic link that leads nowhere (a loop, or its '
       'target is missing): give a directory path'),
      (config.num_processes >= 1, f'--num_processes must be positive, got {config.num_processes}'),
      (config.updates_per_call >= 0,
       f'--updates_per_call must be positive (or 0: chosen from the first updates\' time), '
       f'got {config.updates_per_call}'),
      (config.updates_per_call <= 1 or (config.num_processes == 1 and not config.distributed),
       '--updates_per_call above 1 runs in one process only: leave it out of a multi-process '
       'run'),
      (config.num_processes == 1 or bool(config.coordinator_address),
       '--num_processes above 1 needs --coordinator_address=host:port (of process 0)'),
      (0 <= config.process_id < config.num_processes,
       f'--process_id must be within [0, {config.num_processes}), got {config.process_id}'),
      (not (config.distributed and config.num_processes > 1),
       '--distributed finds the processes itself: leave out --num_processes'),
  ]
