r"""Named sweeps over a recipe: each point trained in its own workdir, one results table.

  nplm sweep --sweep=table1_h --root=runs/sweeps/table1_h
  nplm sweep --sweep=table1_direct --epochs=1   # a quick look
  nplm sweep --sweep=mlp9_lr_seed --together     # 16 models, one program
  nplm sweep --sweep=mlp9_lr --dataset=text:data/ptb --root=runs/ptb_lr
  python -m experiments.sweep --sweep=table1_h   # in a checkout

Points already finished under --root are reused and an interrupted one resumes, so rerunning
the same command continues the sweep. Writes <root>/results.csv, .md and .png (nplm.studies.sweep),
the plot with the Kneser-Ney 5-gram's test perplexity on the same tokens as its reference
line (fitted once, kept in <root>/kn5.json). From Python: nplm.studies.sweep.run_sweep(base_config,
points, root).
"""

import json
from pathlib import Path

from absl import flags

from nplm import cli, flagfiles, ngram, parallel
from nplm.config import PER_MODEL_FIELDS
from nplm.data.corpus import Corpus
from nplm.data.datasets import load_dataset
from nplm.files import write_json_atomically
from nplm.studies.sweep import SweepInterrupted, grid, markdown, run_sweep, write_results

# name: (the recipe the points start from (nplm/recipes/NAME.flags), the points).
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
    # MLP1 regularized: dropout on x and the tanh units, and AdamW's decoupled weight decay
    # (the paper-faithful rows overfit within 3-4 epochs: MLP1 train 98, valid 174).
    'mlp1_regularized': ('mlp1', grid(weight_decay=[0.0, 0.01], dropout=[0.2, 0.4])),
    # MLP9 with dropout, four seeds: the members of an ensemble (nplm mix), trained together.
    'mlp9_dropout_seeds': ('mlp9_dropout', grid(seed=[0, 1, 2, 3])),
}

def kn5_test_perplexity(corpus: Corpus, root: Path) -> float:
  """The interpolated modified Kneser-Ney 5-gram's test perplexity on the sweep's tokens
  (seconds on Brown), kept in <root>/kn5.json for the same data."""
  path = root / 'kn5.json'
  if path.exists() and (saved := json.loads(path.read_text()))['data'] == corpus.fingerprint:
    return saved['test_ppl']
  model = ngram.KneserNey.fit(corpus.splits['train'], 5, corpus.vocab.size, corpus.boundary_id)
  test_ppl = ngram.perplexity(model.log_prob_split(corpus.splits['test']))
  root.mkdir(parents=True, exist_ok=True)
  write_json_atomically(path, {'data': corpus.fingerprint, 'test_ppl': test_ppl})
  return test_ppl


def main(argv):
  cli.refuse_arguments(argv)
  options = flags.FLAGS
  if options.sweep not in SWEEPS:
    cli.fail(f'unknown --sweep={options.sweep!r}; known: {", ".join(sorted(SWEEPS))}')
  cli.show_progress_lines()
  flagfile, points = SWEEPS[options.sweep]
  overrides = {key: getattr(options, key)
               for key in ('dataset', 'tokens', 'data_dir', 'corpus_dir', 'epochs', 'max_steps')
               if getattr(options, key)}
  root = Path(options.root or f'runs/sweeps/{options.sweep}')
  try:
    base = flagfiles.config_from_flagfile(flagfile, **overrides)
    parallel.initialize_processes(base)
    corpus = parallel.main_process_first(lambda: load_dataset(base.resolved().validate()))
    rows = run_sweep(base, points, root, corpus, together=options.together)
    baseline = ('KN5', kn5_test_perplexity(corpus, root))
  except SweepInterrupted as stopped:
    cli.stop_interrupted(str(stopped))
  except cli.USER_ERRORS as error:
    cli.fail(error)
  write_results(rows, root, baseline)
  print(markdown(rows))
  print(f'KN5 test perplexity on the same tokens: {baseline[1]:.1f}')
  print(f'Wrote {root / "results.csv"}, results.md and results.png.')


def run_program(argv=None) -> None:
  flags.DEFINE_string('sweep', '', f'The sweep to run: {", ".join(sorted(SWEEPS))}.')
  flags.DEFINE_string('root', '', "Points' workdirs and the results (empty: runs/sweeps/<sweep>).")
  flags.DEFINE_string('dataset', '', "Every point's --dataset (empty: the recipe's, brown).")
  flags.DEFINE_string('tokens', '', "Every point's --tokens (empty: the recipe's, words).")
  flags.DEFINE_string('data_dir', '', 'TFDS data dir of the prepared corpus (as nplm train).')
  flags.DEFINE_string('corpus_dir', '', 'Raw Brown corpus directory (as nplm train).')
  flags.DEFINE_integer('epochs', 0, "Caps every point's epochs (0: the recipe's).")
  flags.DEFINE_bool('together', False, 'Train the points left in one program, vmapped (they '
                    f'may differ only in {", ".join(PER_MODEL_FIELDS)}).')
  flags.DEFINE_integer('max_steps', 0, "Caps every point's updates (0: no cap); quick looks.")
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
