r"""A trained model's (or an n-gram DIR's) exact perplexity on any dataset's splits, or on a
text file.

  nplm evaluate --workdir=runs/ptb                              # its own dataset: valid, test
  nplm evaluate --workdir=runs/ptb --dataset=text:data/wikitext-2 --splits=test
  nplm evaluate --workdir=runs/mlp9 --text_file=my_text.txt     # a file, Brown-tokenized
  python -m experiments.evaluate --workdir=runs/mlp9 --json

Without --dataset or --text_file the model is scored on its own data: the dataset its
run.json records, where it was when the model trained (paths are recorded absolute, so this
works from any directory). If that data is gone or no longer what the model was trained on
(its fingerprint differs: the files were edited), evaluate refuses in one line; to score the
data as it is now, or a copy elsewhere, name it with --dataset (the first line says whether
it is the data the model was trained on).

The text is tokenized as the model's dataset was (nplm.data.typed_text) and read through the
model's own vocabulary: a word it never learned is scored as `<unk>`, and the words that
fell to `<unk>` most often are listed. Every token is scored once by the head's exact,
normalized log_prob, from the start-of-split context (as training's evaluation).
"""

import dataclasses
import json
import sys
from pathlib import Path

from absl import flags

from nplm import cli, flagfiles, paths
from nplm.config import LOCATION_AND_SPLIT_FIELDS, ConfigError
from nplm.data.lines import read_lines
from nplm.data.tokenizers import Tokenization
from nplm.use.evaluation import (dataset_types, evaluate, file_types, file_words,
                                 own_dataset_types, same_data)
from nplm.use.trained import load_trained
from nplm.stop_requests import Interrupted, interrupting

FLAGS = flags.FLAGS


def report(where: str, results: dict) -> str:
  lines = [where]
  for name, result in results.items():
    lines.append(cli.split_line(name, result['ppl'], result['tokens'], result['unk_rate'],
                                result.get('bpc'), result.get('word_ppl'),
                                result.get('open_ppl'), result.get('spelling_share')))
    if result['unknown_words']:
      shown = ', '.join(f'{word} ({count})' for word, count in result['unknown_words'])
      lines.append(f'       read as <unk>: {shown}')
  if any(result.get('spelling_share') for result in results.values()):
    lines.append(cli.open_legend(any('word_ppl' in result for result in results.values())))
  return '\n'.join(lines)


def _text_and_splits(trained):
  """(description, types, splits, words of a text file's split) of what the flags name."""
  config = trained.config.resolved()
  tokenization = Tokenization.of(config).name
  if FLAGS.text_file and FLAGS.dataset:
    raise ConfigError('give --dataset or --text_file, not both')
  if FLAGS.text_file:
    path = Path(paths.absolute(FLAGS.text_file))
    if not path.is_file():
      raise ConfigError(f'--text_file={FLAGS.text_file}: no such file')
    types, splits = file_types(read_lines(path), trained)
    if not len(splits['file']):
      raise ConfigError(f'--text_file={FLAGS.text_file} is empty: no text to score')
    return (f'{FLAGS.text_file} as {config.dataset} text ({tokenization})', types, splits,
            {'file': file_words(read_lines(path))})
  if FLAGS.dataset:  # Other data, named: scored whatever it holds.
    overrides = {name: FLAGS[name].value for name in LOCATION_AND_SPLIT_FIELDS
                 if FLAGS[name].present}
    config = dataclasses.replace(config, dataset=FLAGS.dataset, unk_max_count=-1,
                                 **({'train_tokens': 0, 'valid_tokens': 0} | overrides))
    types, splits = dataset_types(config.absolute_paths(), trained.tokenizer.model)
    own = {True: 'the data it was trained on', False: 'not the data it was trained on',
           None: 'its run recorded no data fingerprint to compare'}[same_data(trained, types,
                                                                             splits)]
    where = f'--dataset={FLAGS.dataset} ({tokenization}; {own})'
  else:  # Its own data, where run.json says it lies: refused if it changed.
    data_dir = FLAGS.data_dir if FLAGS['data_dir'].present else ''
    types, splits = own_dataset_types(trained, data_dir)
    where = f'its own --dataset={paths.shown_dataset(config.dataset)} ({tokenization})'
  unknown = [name for name in FLAGS.splits if name not in splits]
  if unknown:
    raise ConfigError(f'--splits: no split {", ".join(unknown)}; give train, valid or test')
  return where, types, {name: splits[name] for name in FLAGS.splits}, {}


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  try:
    with interrupting(f'evaluating {FLAGS.workdir}'):
      trained = load_trained(FLAGS.workdir)
      trained.require_language_model()  # Before the text is read.
      if trained.spelling_note is not None:
        print(f'note: {trained.spelling_note}', file=sys.stderr)
      where, types, splits, words = _text_and_splits(trained)
      results = evaluate(trained, types, splits, FLAGS.top_unknown, words)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  heading = f'{FLAGS.workdir} ({trained.name}, |V| = {trained.vocab.size:,}) on {where}'
  print(json.dumps(results, indent=2) if FLAGS.json else report(heading, results))


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train) or an '
                      'n-gram DIR (nplm ngram --out).')
  flags.DEFINE_string('dataset', '', "The dataset to evaluate on (empty: the model's own); "
                      'text:DIR, text:FILE, tfds:NAME… or brown, tokenized as the model\'s.')
  flags.DEFINE_string('text_file', '', 'A text file to evaluate on instead, one line per '
                      'sentence (Brown models: per paragraph).')
  flags.DEFINE_list('splits', ['valid', 'test'], 'The dataset splits to evaluate.')
  flags.DEFINE_integer('top_unknown', 10, 'List this many of the words read as <unk>.')
  flags.DEFINE_bool('json', False, 'Print the results as JSON.')
  flagfiles.define_config_flags(names=LOCATION_AND_SPLIT_FIELDS)
  flags.mark_flag_as_required('workdir')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
