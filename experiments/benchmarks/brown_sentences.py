"""Brown's test split as typed sentences, for the benchmarks of a model's uses (choosing
between words, correcting misspellings): the paper's split, its sentences, which of them
Brown's tokenizer reads back as Brown's tokens, the models they are given to, and the
programs' common flags, main and report."""

from collections.abc import Callable, Sequence
from pathlib import Path

from absl import flags

import nplm
from experiments.benchmarks.harness import (CorpusNotPrepared, require_prepared_brown,
                                            table_lines)
from nplm import display
from nplm.cli import fail, refuse_arguments
from nplm.data import PARAGRAPH_END, TEXT_END, brown, brown_source
from nplm.errors import ConfigError
from nplm.files import write_json_atomically, write_text_atomically
from nplm.use.trained import NoTrainedModelError

SENTENCE_ENDS = frozenset({'.', '!', '?'})
CLOSING_QUOTE = "''"
MARKS = frozenset({PARAGRAPH_END, TEXT_END})


def sentences_of(tokens: Sequence[str]) -> list[list[str]]:
  """The sentences of a split's tokens, cut after '.', '!' or '?' (with any closing '' or
  further '.', '!', '?' after it) and at </p> and </text>, the marks left out."""
  sentences, current = [], []
  for previous, token, following in zip([None, *tokens], tokens, [*tokens[1:], None]):
    if token in MARKS:
      ends = True
    else:
      current.append(token)
      closes = token in SENTENCE_ENDS or token == CLOSING_QUOTE and previous in SENTENCE_ENDS
      # "? ?" and `. ''` end one sentence, not two: it ends after the last of them.
      ends = closes and following not in SENTENCE_ENDS | {CLOSING_QUOTE}
    if ends and current:
      sentences.append(current)
      current = []
  if current:  # A split cut inside a sentence.
    sentences.append(current)
  return sentences


def reads_back(sentence: Sequence[str]) -> bool:
  """Whether Brown's tokenizer reads the sentence, typed, as its own tokens."""
  return brown_source.brown_words(' '.join(sentence)) == list(sentence)


def capitalised(word: str) -> str:
  return word[:1].upper() + word[1:]


def brown_splits(data_dir: str) -> dict[str, list[str]]:
  """Brown's tokens, words as written, split as the paper split them."""
  require_prepared_brown(data_dir)
  texts = brown.load_texts(data_dir or None)
  return brown_source.split_tokens(brown_source.tokens_from_texts(texts),
                                   **brown_source.PAPER_SPLIT)


def loaded(workdir: str):
  """nplm.load's Model of a workdir, refused unless it gives a text's probability."""
  model = nplm.load(workdir)
  model.read.require_language_model()
  return model


def out_dir(out: str) -> Path | None:
  """--out, made now: a report that cannot be written fails before the scoring."""
  if not out:
    return None
  try:
    Path(out).mkdir(parents=True, exist_ok=True)
  except OSError as error:
    raise ConfigError(f'cannot write into --out={out} ({error.strerror or error})') from None
  return Path(out)


def report_text(title: str, header: Sequence[str], rows: list[list[str]],
                notes: Sequence[str], markdown: bool) -> str:
  """What was run, the table and a note per model: printed, or as report.md."""
  if markdown:
    return '\n'.join([f'# {title}', '', *header, '', *table_lines(rows, True), '',
                      *[f'- {note}' for note in notes]])
  return '\n'.join([*header, '', *table_lines(rows, False), '', *notes])


def define_flags(limit: int, limit_help: str) -> None:
  flags.DEFINE_list('workdirs', None, 'Models to compare: trained runs or `nplm ngram` DIRs.')
  flags.DEFINE_string('out', '', 'If set, writes DIR/report.md and DIR/results.json.')
  flags.DEFINE_integer('limit', limit, limit_help)
  flags.DEFINE_string('data_dir', '', 'TFDS data dir of the prepared Brown corpus (empty: '
                      'TFDS default).')
  flags.mark_flag_as_required('workdirs')


def benchmark_main(result_of: Callable, formatted: Callable) -> Callable:
  """The program's main: `result_of(options, models)` (a refusal, one line and status 2,
  before any scoring), printed by `formatted` and written into --out."""
  def main(argv):
    refuse_arguments(argv)
    options = flags.FLAGS
    display.show_progress_lines()
    try:
      if options.limit < 0:
        raise ConfigError(f'--limit must be 0 (all) or a positive count, got {options.limit}')
      out = out_dir(options.out)
      result = result_of(options, lambda: {w: loaded(w) for w in options.workdirs})
    except (ConfigError, NoTrainedModelError, CorpusNotPrepared) as error:
      fail(error)
    reported(result, formatted, out)
  return main


def reported(result: dict, formatted: Callable, out: Path | None) -> None:
  """The result printed by `formatted`, and written into `out` (results.json, report.md)."""
  print(formatted(result))
  if out:
    write_json_atomically(out / 'results.json', result)
    write_text_atomically(out / 'report.md', formatted(result, markdown=True) + '\n')
