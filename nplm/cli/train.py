r"""Train a language model on any dataset: early-stop, report exact perplexities.

  nplm train --flagfile=experiments/flags/mlp9.flags                    # Brown, Table 1's MLP9
  nplm train --dataset=text:data/ptb --model=lstm --workdir=runs/ptb    # PTB's layout
  nplm train --dataset=tfds:lm1b --tfds_splits=train[:99%],train[99%:],test --head=nce
  python -m experiments.brown --flagfile=experiments/flags/mlp9.flags   # in a checkout

Every field of nplm.config.Config is a flag (see --helpfull); a flagfile sets a Table 1 row
and any flag after it overrides it. From Python: `nplm.train.run(Config(...))`.
"""

import sys


from nplm import cli, parallel
from nplm.train import run


def report(summary: dict) -> str:
  if summary['status'] == 'interrupted':
    return (f'Interrupted at step {summary["steps"]}; checkpoint saved. '
            f'Rerun the same command to resume from {summary["workdir"]}.')
  rows = [f'{summary["dataset"]}   |V| = {summary["vocab_size"]:,}   '
          f'status: {summary["status"]}   '
          f'epochs: {summary["epochs"]} (best {summary["best_epoch"]})   '
          f'{summary["train_examples_per_second"]:.0f} train examples/s   '
          f'{summary["wall_seconds"]:.0f} s']
  return '\n'.join(rows + cli.summary_lines(summary))


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  config = cli.config_from_flags()
  try:
    summary = run(config)
  except cli.USER_ERRORS as error:
    cli.fail(error)
  except KeyboardInterrupt:
    cli.stop_interrupted(f'Interrupted at once; the last checkpoint in {config.workdir} is '
                         'kept. Rerun the same command to resume from it.')
  except Exception as error:
    if not cli.disk_full(error):
      raise
    cli.fail(f'no space left on the disk of --workdir={config.workdir}: free some space and '
             'rerun the same command (it resumes from the last checkpoint)')
  if parallel.is_main_process():  # One report per run, not one per process.
    print(report(summary))
  if summary['status'] == 'interrupted':
    sys.exit(cli.INTERRUPTED_EXIT_STATUS)


def run_program(argv=None) -> None:
  cli.define_config_flags()
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
