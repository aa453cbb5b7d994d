r"""Sweeps: many runs that differ from one base config by a few fields, each trained in its
own workdir under one directory, and one results table.

  nplm sweep --dataset=text:data/ptb --grid=learning_rate=0.01,0.003 --grid=dropout=0,0.25 \
      --out=runs/sweeps/ptb_lr                        # any base config, a grid of 4 points
  nplm sweep --flagfile=lstm --grid=seed=0,1,2 --epochs=1   # a recipe as the base
  nplm sweep --sweep=table1_h --out=runs/sweeps/table1_h    # a named sweep (below)
  nplm sweep --sweep=mlp9_lr_seed --together                # 16 models, one program
  python -m experiments.sweep --sweep=table1_h              # in a checkout

Every `nplm train` flag (a flagfile, a recipe by name) sets the base config of every point.
--grid=FIELD=V1,V2,... (repeatable; values read as the field's type, separated by '|' where
they hold commas) varies one field; the points are every combination. --sweep=NAME is one of
the named sweeps: its recipe is the base (flags typed win) and its points are crossed with
any --grid. Each point trains in <--out>/<its values> (e.g. dropout=0.25,learning_rate=0.01).
The points' final evaluation scores valid and test, not the train split (a pass over it costs
an epoch), unless --eval_splits says otherwise.

Points already finished under --out are reused, and an interrupted one (or one whose
summary.json was damaged) resumes, so rerunning the same command continues the sweep. Writes
<out>/results.csv, .md and .png (nplm.studies.sweep), the plot with the Kneser-Ney 5-gram's
test perplexity on the same tokens as its reference line (fitted once, kept in <out>/kn5.json)
where every point reads the base's data. From Python: nplm.studies.sweep.run_sweep(base_config,
points, root).
"""

import dataclasses
import functools
import itertools
import json
import sys
from pathlib import Path

from absl import flags

from nplm import cli, flagfiles, ngram, parallel, paths, stop_requests
from nplm.config import (AUTO_TRAIN_TOKENS, DATA_FIELDS, PER_MODEL_FIELDS, Config, ConfigError,
                         config_class)
from nplm.data.corpus import Corpus
from nplm.data.datasets import load_dataset
from nplm.files import write_json_atomically
from nplm.studies.sweep import (SweepInterrupted, crossed, grid, markdown, parse_grid,
                                point_configs, run_sweep, write_results)
from nplm.data.config_checks import settled_data

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
# What a sweep's points score by default: the table reports valid and test perplexity, and
# a pass over the train split costs as much as an epoch's forward passes. Named sweeps
# recorded with --eval_splits=auto are reused as they are (it only observes a run).
SWEEP_EVAL_SPLITS = 'valid,test'


def kn5_test_perplexity(corpus: Corpus, root: Path) -> float:
  """The interpolated modified Kneser-Ney 5-gram's test perplexity on the sweep's tokens
  (seconds on Brown), kept in <root>/kn5.json for the same data (fitted again if that file
  is for other data or cannot be read)."""
  path = root / 'kn5.json'
  try:
    saved = json.loads(path.read_text())
    if saved['data'] == corpus.fingerprint:
      return float(saved['test_ppl'])
  except (OSError, ValueError, KeyError, TypeError):
    pass  # No file yet, or a damaged one: a cache, fitted again.
  model = ngram.KneserNey.fit(corpus.splits['train'], 5, corpus.vocab.size, corpus.boundary_id)
  test_ppl = ngram.perplexity(model.log_prob_split(corpus.splits['test']))
  root.mkdir(parents=True, exist_ok=True)
  write_json_atomically(path, {'data': corpus.fingerprint, 'test_ppl': test_ppl})
  return test_ppl


def typed_config(options) -> dict:
  """The Config fields the command line set (typed, or by a --flagfile), but --workdir:
  the sweep's directory, not a point's."""
  config = config_class(options.model, options.head, options.dataset)  # With own knobs.
  return {field.name: options[field.name].value for field in dataclasses.fields(config)
          if options[field.name].present and field.name != 'workdir'}


def sweep_definition(options) -> tuple[str, Config, list[dict]]:
  """The sweep's name (its default directory under runs/sweeps), base config and points."""
  axes = parse_grid(options.grid or [])
  if options.sweep:
    if options.sweep not in SWEEPS:
      raise ConfigError(f'unknown --sweep={options.sweep!r}; known: '
                        f'{", ".join(sorted(SWEEPS))}')
    recipe, points = SWEEPS[options.sweep]
    # The recipe, then the sweep's --eval_splits, then what the command line set.
    base = flagfiles.config_from_flagfile(
        recipe, **{'eval_splits': options.eval_splits, **typed_config(options)})
    return options.sweep, base, crossed(points, axes)
  if not axes:
    raise ConfigError('nothing to sweep: give --grid=FIELD=V1,V2 (e.g. '
                      f'--grid=learning_rate=0.01,0.003) or --sweep=NAME '
                      f'({", ".join(sorted(SWEEPS))})')
  return ','.join(axes), cli.config_from_flags(), grid(**axes)


def typed_workdir(argv: list[str]) -> bool:
  """Whether --workdir was typed on the command line, not set by a flagfile (a recipe's
  --workdir names the recipe's own run, not a sweep's directory)."""
  args = itertools.takewhile(lambda arg: arg != '--', argv[1:])
  return any(arg.split('=', 1)[0] in ('--workdir', '-workdir') for arg in args)


def sweep_root(options, name: str, workdir_typed: bool) -> Path:
  """--out (or --root), else a typed --workdir, else runs/sweeps/<name>: absolute."""
  out = options.out and paths.absolute(options.out)
  workdir = workdir_typed and options.workdir and paths.absolute(options.workdir)
  if out and workdir and out != workdir:
    raise ConfigError(f'--out={options.out} and --workdir={options.workdir} name two '
                      'directories for the sweep: give --out only')
  return Path(out or workdir or paths.absolute(f'runs/sweeps/{name}'))


def varies_data(points: list[dict]) -> bool:
  """Whether some point reads other tokens than the base (it varies a data field)."""
  return any(field in DATA_FIELDS for point in points for field in point)


def main(argv, workdir_typed: bool = False):
  cli.refuse_arguments(argv)
  options = flags.FLAGS
  cli.show_progress_lines()
  baseline = None
  try:
    name, base, points = sweep_definition(options)
    root, base = sweep_root(options, name, workdir_typed), base.absolute_paths()
    point_configs(base, points, root)  # Every point checked before the data is read.
    # As nplm train: a stop saves the point in training, in time even inside one computation.
    stop_requests.end_process_within(
        lambda what: f'Interrupted ({what}) at once; the points in {paths.shown(root)} keep '
                     'their last checkpoints. Rerun the same command to resume.',
        base.stop_seconds, status=cli.INTERRUPTED_EXIT_STATUS)
    parallel.initialize_processes(base)
    corpus = None
    if not varies_data(points):
      corpus = parallel.main_process_first(lambda: load_dataset(settled_data(base)))
    rows = run_sweep(base, points, root, corpus, together=options.together)
    if corpus is not None and len(corpus.splits['train']) <= AUTO_TRAIN_TOKENS:
      baseline = ('KN5', kn5_test_perplexity(corpus, root))
  except SweepInterrupted as stopped:
    cli.stop_interrupted(str(stopped))
  except cli.USER_ERRORS as error:
    cli.fail(error)
  write_results(rows, root, baseline)
  print(markdown(rows))
  if baseline:
    print(f'KN5 test perplexity on the same tokens: {baseline[1]:.1f}')
  print(f'Wrote {paths.shown(root / "results.csv")}, results.md and results.png.')


def define_flags() -> None:
  """`nplm train`'s flags (the base of every point), a sweep's defaults and help for
  --eval_splits and --workdir, and the sweep's own flags."""
  flagfiles.define_config_flags()
  eval_splits = flags.FLAGS['eval_splits']
  eval_splits.help = (f'{eval_splits.help} A sweep\'s points score {SWEEP_EVAL_SPLITS} by '
                      'default, not the train split: ask for it with --eval_splits=auto or '
                      'train,valid,test.')
  flags.FLAGS.set_default('eval_splits', SWEEP_EVAL_SPLITS)
  flags.FLAGS['workdir'].help = ("A sweep's, typed: where its points' workdirs go, as --out "
                                 "(a flagfile's is ignored).")
  flags.FLAGS.set_default('workdir', '')
  flags.DEFINE_string('sweep', '', f'A named sweep: {", ".join(sorted(SWEEPS))} (its recipe '
                      'is the base; typed flags win).')
  grid_help = ('FIELD=V1,V2,...: every point takes each value of the field in turn (values '
               "holding commas are separated by '|'); repeated for several fields: every "
               'combination.')
  flags.DEFINE_multi_string('grid', None, grid_help)
  flags.FLAGS['grid'].help = grid_help  # Without absl's note on repeating it.
  flags.DEFINE_string('out', '', "The points' workdirs (<out>/<point>) and the results "
                      '(empty: a typed --workdir, else runs/sweeps/<sweep or grid fields>).')
  flags.DEFINE_alias('root', 'out')
  flags.DEFINE_bool('together', False, 'Train the points left in one program, vmapped (they '
                    f'may differ only in {", ".join(PER_MODEL_FIELDS)}).')


def run_program(argv=None) -> None:
  define_flags()
  workdir_typed = typed_workdir(sys.argv if argv is None else argv)
  cli.start(functools.wraps(main)(lambda parsed: main(parsed, workdir_typed)), argv)


if __name__ == '__main__':
  run_program()
