r"""Named sweeps over a Table 1 row: each point trained in its own workdir, one results table.

  python -m experiments.sweep --sweep=table1_h --root=runs/sweeps/table1_h
  python -m experiments.sweep --sweep=table1_direct --epochs=1   # a quick look
  python -m experiments.sweep --sweep=mlp9_lr_seed --together     # 16 models, one program
  python -m experiments.sweep --sweep=mlp9_lr --dataset=text:data/ptb --root=runs/ptb_lr

Points already finished under --root are reused and an interrupted one resumes, so rerunning
the same command continues the sweep. Writes <root>/results.csv, .md and .png (nplm.sweep).
From Python: nplm.sweep.run_sweep(base_config, points, root).
"""

import sys
from pathlib import Path

from absl import app, flags

from nplm.cli import (USER_ERRORS, config_from_flagfile, fail, show_progress_lines,
                      stop_interrupted)
from nplm.sweep import SweepInterrupted, grid, markdown, run_sweep, write_results

FLAGS_DIR = Path(__file__).parent / 'flags'

# name: (the base flagfile in experiments/flags, the points).
SWEEPS = {
    # MLP9's hidden layer: none (which needs the direct connections), 50, 100 units, each
    # with and without direct connections.
    'table1_h': ('mlp9', [*grid(hidden_size=[50, 100], direct=[True, False]),
                          {'hidden_size': 0, 'direct': True}]),
    # MLP1 with and without its direct connections.
    'table1_direct': ('mlp1', grid(direct=[True, False])),
    # MLP9 at four learning rates (and four seeds each): models of one shape, which
    # --together trains in one program.
    'mlp9_lr': ('mlp9', grid(learning_rate=[3e-4, 1e-3, 3e-3, 1e-2])),
    'mlp9_lr_seed': ('mlp9', grid(learning_rate=[3e-4, 1e-3, 3e-3, 1e-2], seed=[0, 1, 2, 3])),
}

def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
  options = flags.FLAGS
  if options.sweep not in SWEEPS:
    print(f'error: unknown --sweep={options.sweep!r}; known: {", ".join(sorted(SWEEPS))}',
          file=sys.stderr)
    sys.exit(2)
  show_progress_lines()
  flagfile, points = SWEEPS[options.sweep]
  overrides = {key: getattr(options, key)
               for key in ('dataset', 'tokens', 'data_dir', 'corpus_dir', 'epochs', 'max_steps')
               if getattr(options, key)}
  root = options.root or f'runs/sweeps/{options.sweep}'
  try:
    base = config_from_flagfile(str(FLAGS_DIR / f'{flagfile}.flags'), **overrides)
    rows = run_sweep(base, points, root, together=options.together)
  except SweepInterrupted as stopped:
    stop_interrupted(str(stopped))
  except USER_ERRORS as error:
    fail(error)
  write_results(rows, root)
  print(markdown(rows))
  print(f'Wrote {Path(root) / "results.csv"}, results.md and results.png.')


if __name__ == '__main__':
  flags.DEFINE_string('sweep', '', f'The sweep to run: {", ".join(sorted(SWEEPS))}.')
  flags.DEFINE_string('root', '', "Points' workdirs and the results (empty: runs/sweeps/<sweep>).")
  flags.DEFINE_string('dataset', '', "Every point's --dataset (empty: the flagfile's, brown).")
  flags.DEFINE_string('tokens', '', "Every point's --tokens (empty: the flagfile's, words).")
  flags.DEFINE_string('data_dir', '', 'TFDS data dir of the prepared corpus (as nplm train).')
  flags.DEFINE_string('corpus_dir', '', 'Raw Brown corpus directory (as nplm train).')
  flags.DEFINE_integer('epochs', 0, "Caps every point's epochs (0: the flagfile's).")
  flags.DEFINE_bool('together', False, 'Train the points left in one program, vmapped '
                    '(they may differ only in seed, learning_rate, lr_decay, weight_decay).')
  flags.DEFINE_integer('max_steps', 0, "Caps every point's updates (0: no cap); quick looks.")
  app.run(main)
