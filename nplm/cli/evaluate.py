r"""A trained model's exact perplexity on any dataset's splits, or on a text file.

  nplm evaluate --workdir=runs/ptb                              # its own dataset: valid, test
  nplm evaluate --workdir=runs/ptb --dataset=text:data/wikitext-2 --splits=test
  nplm evaluate --workdir=runs/mlp9 --text_file=my_text.txt     # a file, Brown-tokenized
  python -m experiments.evaluate --workdir=runs/mlp9 --json

The text is tokenized as the model's dataset was (nplm.data.tokenize) and read through the
model's own vocabulary: a word it never learned is scored as `<unk>`, and the words that
fell to `<unk>` most often are listed. Every token is scored once by the head's exact,
normalized log_prob, from the start-of-split context (as training's evaluation).
"""

import dataclasses
import json
from pathlib import Path

from absl import flags

from nplm import cli
from nplm.config import LOCATION_AND_SPLIT_FIELDS, ConfigError
from nplm.data.text_sources import read_lines
from nplm.evaluation import dataset_types, evaluate, file_types
from nplm.scoring import load_trained

FLAGS = flags.FLAGS


def report(where: str, results: dict) -> str:
  lines = [where]
  for name, result in results.items():
    lines.append(cli.split_line(name, result['ppl'], result['tokens'], result['unk_rate'],
                                result.get('bpc')))
    if result['unknown_words']:
      shown = ', '.join(f'{word} ({count})' for word, count in result['unknown_words'])
      lines.append(f'       read as <unk>: {shown}')
  return '\n'.join(lines)


def _text_and_splits(trained):
  """(description, types, splits) of what the flags name."""
  config = trained.config.resolved()
  if FLAGS.text_file and FLAGS.dataset:
    raise ConfigError('give --dataset or --text_file, not both')
  if FLAGS.text_file:
    path = Path(FLAGS.text_file)
    if not path.is_file():
      raise ConfigError(f'--text_file={path}: no such file')
    types, splits = file_types(read_lines(path), config)
    return f'{path} as {config.dataset} text ({config.tokens})', types, splits
  if FLAGS.dataset:
    overrides = {name: FLAGS[name].value for name in LOCATION_AND_SPLIT_FIELDS
                 if FLAGS[name].present}
    config = dataclasses.replace(config, dataset=FLAGS.dataset, unk_max_count=-1,
                                 **({'train_tokens': 0, 'valid_tokens': 0} | overrides))
  elif FLAGS['data_dir'].present:
    config = config.replace(data_dir=FLAGS.data_dir)
  types, splits = dataset_types(config)
  unknown = [name for name in FLAGS.splits if name not in splits]
  if unknown:
    raise ConfigError(f'--splits: no split {", ".join(unknown)}; give train, valid or test')
  return (f'--dataset={config.dataset} ({config.tokens})', types,
          {name: splits[name] for name in FLAGS.splits})


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  try:
    trained = load_trained(FLAGS.workdir)
    trained.require_language_model()  # Before the text is read.
    where, types, splits = _text_and_splits(trained)
    results = evaluate(trained, types, splits, FLAGS.top_unknown)
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  heading = (f'{FLAGS.workdir} ({trained.config.model}, --head={trained.config.head}, '
             f'|V| = {trained.vocab.size:,}) on {where}')
  print(json.dumps(results, indent=2) if FLAGS.json else report(heading, results))


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train).')
  flags.DEFINE_string('dataset', '', "The dataset to evaluate on (empty: the model's own); "
                      'text:DIR, text:FILE, tfds:NAME… or brown, tokenized as the model\'s.')
  flags.DEFINE_string('text_file', '', 'A text file to evaluate on instead, one line per '
                      'sentence (Brown models: per paragraph).')
  flags.DEFINE_list('splits', ['valid', 'test'], 'The dataset splits to evaluate.')
  flags.DEFINE_integer('top_unknown', 10, 'List this many of the words read as <unk>.')
  flags.DEFINE_bool('json', False, 'Print the results as JSON.')
  cli.define_config_flags(names=LOCATION_AND_SPLIT_FIELDS)
  flags.mark_flag_as_required('workdir')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
