r"""Train a language model on any dataset: early-stop, report exact perplexities.

  nplm train --flagfile=mlp9                                            # Brown, Table 1's MLP9
  nplm train --workdir=runs/mine --flagfile=mlp9 --epochs=3             # the recipe, changed
  nplm train --flagfile=my.flags                                        # a flagfile of yours
  nplm train --dataset=text:data/ptb --model=lstm --workdir=runs/ptb    # PTB's layout
  nplm train --dataset=tfds:lm1b --tfds_splits=train[:99%],train[99%:],test --head=nce
  python -m experiments.train --flagfile=mlp9                           # in a checkout

Every field of nplm.config.Config is a flag (see --helpfull). --flagfile reads a file of
flags, or a recipe shipped with nplm by name (mlp1 ... mlp9: Table 1's rows; the list is at
the end). A flag typed on the command line wins over a flagfile's, before or after it: the
recipes set --workdir=runs/<recipe>, and a typed --workdir replaces it. From Python:
`nplm.trainer.run(Config(...))`.
"""

import sys


from nplm import cli, flagfiles, parallel, paths, stop_requests
from nplm.models import model_class
from nplm.trainer import request_cpu_devices, run
from nplm.run_files.model_run import what_is_kept


def reported(summary: dict) -> str:
  """Which parameters the final evaluation scored: the best validated, or the last."""
  chosen = summary.get('reported')  # Older summaries: the best epoch's.
  if not chosen or chosen['parameters'] == 'best':
    return f'best {summary["best_epoch"]}'
  return f'the last parameters, step {chosen["step"]}'


def report(summary: dict) -> str:
  if summary['status'] == 'interrupted':
    return (f'Interrupted at step {summary["steps"]}; checkpoint saved. '
            f'Rerun the same command to resume from {paths.shown(summary["workdir"])}.')
  periodic = summary.get('periodic_validation') or {}  # Older summaries: the whole split.
  part = ('' if periodic.get('tokens') == periodic.get('of') else
          f'; validated on the first {periodic["tokens"]:,} of {periodic["of"]:,} valid tokens')
  rows = [f'{summary["dataset"]}   |V| = {summary["vocab_size"]:,}   '
          f'status: {summary["status"]}   '
          f'epochs: {summary["epochs"]} ({reported(summary)}{part})   '
          f'{summary["train_examples_per_second"]:,.0f} train examples/s   '
          f'{summary["wall_seconds"]:,.0f} s']
  if summary.get('evaluated') == {}:  # --eval_splits=none, or word vectors unless asked.
    workdir = paths.shown(summary['config']['workdir'])
    if model_class(summary['config']['model']).language_model:
      rows.append(f'no perplexity scored (--eval_splits=none); `nplm evaluate '
                  f'--workdir={workdir}` scores it')
    else:
      rows.append(f'no perplexity scored (--eval_splits=valid,test asks); its word vectors: '
                  f'nplm neighbours --workdir={workdir} WORD, nplm embeddings '
                  f'--workdir={workdir} --out=DIR')
  return '\n'.join(rows + cli.summary_lines(summary))


def out_of_memory(error: BaseException) -> bool:
  """Whether `error` is memory running out (XLA's RESOURCE_EXHAUSTED; Python's MemoryError):
  what nplm.training.memory's estimate did not foresee."""
  return isinstance(error, MemoryError) or 'RESOURCE_EXHAUSTED' in str(error)


def _first_line(error: BaseException) -> str:
  lines = str(error).strip().splitlines()
  return lines[0][:200] if lines else type(error).__name__


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  config = cli.config_from_flags()
  # A stop request ends the process in time even inside one long computation (a save's
  # --stop_seconds, seconds where there is nothing to save, at once on a second request).
  stop_requests.end_process_within(
      lambda what: f'Interrupted ({what}) at once; {what_is_kept(config.workdir)}.',
      config.stop_seconds, status=cli.INTERRUPTED_EXIT_STATUS)
  try:
    request_cpu_devices(config)
    summary = run(config)
  except cli.USER_ERRORS as error:
    cli.fail(error)
  except KeyboardInterrupt:
    cli.stop_interrupted(f'Interrupted at once; {what_is_kept(config.workdir)}.')
  except Exception as error:
    if out_of_memory(error):
      cli.fail(f'out of memory ({_first_line(error)}): lower --batch_size or '
               f'--eval_batch_size, or the model\'s sizes; the last checkpoint in '
               f'{config.workdir} (if any) is kept')
    if not cli.disk_full(error):
      raise
    cli.fail(f'no space left on the disk of --workdir={config.workdir}: free some space and '
             'rerun the same command (it resumes from the last checkpoint)')
  if parallel.is_main_process():  # One report per run, not one per process.
    print(report(summary))
  if summary['status'] == 'interrupted':
    sys.exit(cli.INTERRUPTED_EXIT_STATUS)


def run_program(argv=None) -> None:
  flagfiles.define_config_flags()
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
