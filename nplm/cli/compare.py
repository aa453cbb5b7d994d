r"""Several runs side by side: one table of their numbers, one figure of their curves.

  nplm compare runs/mlp1 runs/mlp9 runs/lstm runs/kn5
  nplm compare runs/ptb_lstm runs/ptb_kn5 --out=ptb.png --json

A row per run (a training workdir, or an `nplm ngram --out` directory): dataset, |V|, model,
head, parameters, exact valid and test perplexity, per-word perplexity and bits per character
where recorded, wall time and training examples/s, read from its summary.json (ngram.json).
Runs of one vocabulary are ranked by valid perplexity; runs of several keep the order given,
under a warning naming each vocabulary's runs: their perplexities are not comparable. A run
that has not finished is a row marked unfinished. --out (compare.png) receives every run's
validation perplexity by epoch in one plot (an n-gram run: a dashed level line).
"""

import json

from absl import flags

from nplm import cli, paths
from nplm.studies import comparison

FLAGS = flags.FLAGS


def main(argv):
  cli.show_progress_lines()
  try:
    rows = comparison.read_runs(argv[1:])
    comparison.save_figure(rows, FLAGS.out)
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  report = comparison.report(rows)
  if FLAGS.json:
    print(json.dumps({**report, 'plot': paths.absolute(FLAGS.out)}, indent=2))
    return
  if report['warning']:
    print(report['warning'])
  print('\n'.join(comparison.table(report['runs'])))
  print(f'plot: {paths.shown(FLAGS.out)}')


def run_program(argv=None) -> None:
  flags.DEFINE_string('out', 'compare.png', 'PNG that receives every run\'s validation '
                      'perplexity curve in one plot.')
  flags.DEFINE_bool('json', False, 'Print the comparison as JSON (the rows, ranked when '
                    'their vocabularies agree, and the warning when they do not).')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
