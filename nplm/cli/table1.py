r"""Table 1 of Bengio et al. (2003) on identical tokens, beside the paper's numbers.

  nplm table1                                   # every row, into runs/table1
  nplm table1 --rows=KN5,DelInt3,MLP9           # some rows (and what they need)
  python -m experiments.table1 --rows=KN3,KN5   # in a checkout

Rows: MLP1 … MLP10 (odd: a network trained from the recipe mlpK; even: that network mixed
with the interpolated trigram at weight 0.5, the paper's "mix"), MLP1R and MLP2R (MLP1 with
dropout, the recipe mlp1_regularized, and its mix), RNN, LSTM, GRU and TRANSFORMER (beyond the
paper: the recipes rnn, lstm, gru, transformer), DelInt3 (the paper's interpolated trigram),
KN3, KN4, KN5 (interpolated modified Kneser-Ney). Every perplexity is exact over every token
of its split, and each row's test perplexity is also a ratio to KN5's, the comparison that
carries across vocabularies. Writes <workdir>/table1.md and table1.json; rows already
computed in the same workdir are reused, and an interrupted network's training resumes.
From Python: nplm.studies.table1.build_table(workdir, corpus, rows).
"""

import time
from pathlib import Path

from absl import flags

from nplm import cli, stop_requests
from nplm.config import Config
from nplm.data.config_checks import settled_data
from nplm.data.datasets import load_dataset
from nplm.studies.table1 import ROW_ORDER, Interrupted, build_table, markdown, needed_rows


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  options = flags.FLAGS
  overrides = {key: getattr(options, key) for key in ('epochs', 'max_steps')
               if getattr(options, key)}
  started = time.perf_counter()
  # As nplm train: a stop saves the network in training, in time even inside one computation.
  stop_requests.end_process_within(
      lambda what: f'Interrupted ({what}) at once; the networks in {options.workdir} keep '
                   'their last checkpoints. Rerun the same command to resume.',
      Config().stop_seconds, status=cli.INTERRUPTED_EXIT_STATUS)
  try:
    needed_rows(options.rows)  # A typo is refused before the corpus is read.
    # The corpus the recipes' rows train on: they name no --dataset, so Config's.
    corpus = load_dataset(settled_data(Config(data_dir=options.data_dir,
                                              corpus_dir=options.corpus_dir)))
    report = build_table(options.workdir, corpus, options.rows, overrides)
  except Interrupted as stopped:
    cli.stop_interrupted(str(stopped))
  except (ValueError, *cli.USER_ERRORS) as error:
    cli.fail(error)
  print(markdown(report))
  print(f'Wrote {Path(options.workdir) / "table1.md"} and table1.json '
        f'in {time.perf_counter() - started:.0f} s.')


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', 'runs/table1', 'Rows, networks and the tables go here.')
  flags.DEFINE_list('rows', ROW_ORDER, 'Rows to compute (the rows they need come too).')
  flags.DEFINE_string('data_dir', '', 'TFDS data dir of the prepared corpus (as nplm train).')
  flags.DEFINE_string('corpus_dir', '', 'Raw Brown corpus directory (as nplm train).')
  flags.DEFINE_integer('epochs', 0, "Caps every network's epochs (0: its recipe's).")
  flags.DEFINE_integer('max_steps', 0, "Caps every network's updates (0: no cap); smoke runs.")
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
