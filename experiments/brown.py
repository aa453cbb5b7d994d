r"""Bengio et al. (2003) on the Brown corpus: train, early-stop, report exact perplexities.

  python -m experiments.brown --flagfile=experiments/flags/mlp9.flags
  python -m experiments.brown --flagfile=experiments/flags/mlp9.flags --epochs=1 --workdir=/tmp/x

Every field of nplm.config.Config is a flag (see --helpfull); a flagfile sets a Table 1 row
and any flag after it overrides it. From Python: `experiments.brown.run(Config(...))`.
"""

import dataclasses
import logging
import sys

import tensorflow_datasets as tfds
from absl import app, flags
from absl import logging as absl_logging

from nplm import parallel
from nplm.checkpoint import IncompatibleCheckpointError
from nplm.config import Config, ConfigError
from nplm.data.acquire import CorpusError
from nplm.train import TrainingDiverged, run

__all__ = ['run', 'Config']

_DEFINE_BY_TYPE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer,
                   float: flags.DEFINE_float, str: flags.DEFINE_string}
# The command line always has a workdir; from Python one must be chosen.
_CLI_DEFAULTS = {'workdir': 'runs/default'}


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """A flag per Config field; only when run as a program, so importing `run` defines none."""
  for field in dataclasses.fields(Config):
    _DEFINE_BY_TYPE[field.type](field.name, _CLI_DEFAULTS.get(field.name, field.default),
                                field.metadata['help'], flag_values=flag_values)


def config_from_flagfile(path: str, **overrides) -> Config:
  """The Config a flagfile sets (as `--flagfile=path` would), then `overrides`; for runners
  that read several flagfiles, so the flags go to a private FlagValues."""
  flag_values = flags.FlagValues()
  define_flags(flag_values)
  flag_values(['config_from_flagfile', f'--flagfile={path}'])
  config = Config(**{f.name: flag_values[f.name].value for f in dataclasses.fields(Config)})
  return config.replace(**overrides)


# User mistakes print one line, not a traceback.
_USER_ERRORS = (ConfigError, CorpusError, IncompatibleCheckpointError, TrainingDiverged)


def config_from_flags() -> Config:
  return Config(**{f.name: flags.FLAGS[f.name].value for f in dataclasses.fields(Config)})


def _report(summary: dict) -> str:
  if summary['status'] == 'interrupted':
    return (f'Interrupted at step {summary["steps"]}; checkpoint saved. '
            f'Rerun the same command to resume from {summary["workdir"]}.')
  rows = [f'|V| = {summary["vocab_size"]}   status: {summary["status"]}   '
          f'epochs: {summary["epochs"]} (best {summary["best_epoch"]})   '
          f'{summary["train_examples_per_second"]:.0f} train examples/s   '
          f'{summary["wall_seconds"]:.0f} s']
  for split in ('train', 'valid', 'test'):
    rows.append(f'{split:>5}: perplexity {summary[f"{split}_ppl"]:9.2f}   '
                f'tokens {summary["tokens"][split]:>7}   '
                f'<unk> rate {100 * summary["unk_rate"][split]:.2f}%')
  return '\n'.join(rows)


def show_progress_lines() -> None:
  """nplm's own INFO lines on stderr; libraries (Orbax, TFDS) only warn."""
  absl_logging.set_verbosity(absl_logging.WARNING)
  tfds.disable_progress_bar()
  handler = logging.StreamHandler()
  handler.setFormatter(logging.Formatter('%(asctime)s %(message)s', '%H:%M:%S'))
  logger = logging.getLogger('nplm')
  logger.addHandler(handler)
  logger.setLevel(logging.INFO)
  logger.propagate = False


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
  show_progress_lines()
  try:
    summary = run(config_from_flags())
  except _USER_ERRORS as error:
    print(f'error: {error}', file=sys.stderr)
    sys.exit(2)
  if parallel.is_main_process():  # One report per run, not one per process.
    print(_report(summary))


if __name__ == '__main__':
  define_flags()
  app.run(main)
