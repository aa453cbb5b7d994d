r"""How probable a trained model finds each of some sentences, one line each, as KenLM's query.

  nplm score --workdir=runs/mlp9 "about 15 minutes from" "about 15 minuets from"
  nplm score --workdir=runs/lstm --file=sentences.txt --json
  cat sentences.txt | nplm score --workdir=runs/lstm -

Sentences come from the arguments, from --file (one per line, blank lines skipped), or from
stdin (`-` as the only argument, or no argument while stdin is not a terminal); a large file
is read and scored a batch at a time. Per sentence: ln p and log10 p of the whole sentence
(its end too where the dataset ends sentences with a token, `<eos>`), its tokens, how many
of them fell outside the vocabulary (read as `<unk>`), and the per-token perplexity
exp(-ln p / tokens). The figures are the open vocabulary's: a word outside the vocabulary
costs ln p(<unk> | the words before) + ln q(its spelling) (nplm.ngram.spelling); a line that
holds one shows the closed ln p too, which charges <unk> alone. --details adds each token's
ln p; --json prints one JSON object per sentence (JSON Lines). Control characters in the text (an ANSI escape's ESC, a carriage
return, a tab) print escaped as in a Python string (\x1b, \r, \t): what is scored is the
text as given. Each sentence starts as a split does and is tokenized as the model's
dataset was (nplm.use.sentences).
"""

import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence

from absl import flags

from nplm import cli, paths
from nplm.display import printable
from nplm.data.vocab import UNK
from nplm.errors import ConfigError
from nplm.use.trained import load_trained
from nplm.use.sentences import SentenceScore, TokenScore, scored
from nplm.stop_requests import interrupting


def define_input_flags() -> None:
  """The flags every program that reads sentences shares (score, rank, predict)."""
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train, nplm ngram).')
  flags.DEFINE_string('file', None, 'Read the sentences from this file, one per line (blank '
                      'lines skipped), instead of the arguments.')
  flags.mark_flag_as_required('workdir')


def sentences_of(arguments: Sequence[str], file: str | None,
                 units: str = 'sentences') -> Iterator[str]:
  """The sentences (or other `units`: predict's prefixes) the command line names, read
  lazily: the arguments, a file's lines, or stdin's. A ConfigError names a missing, empty or
  non-UTF-8 input, in one line."""
  reading_stdin = list(arguments) == ['-'] or (not arguments and not sys.stdin.isatty())
  if file is not None and arguments:
    raise ConfigError(f'give the {units} either as arguments or by --file, not both')
  if file is not None:
    return _lines(_opened(file), paths.shown(file), units)
  if reading_stdin:
    return _lines(sys.stdin.buffer, 'stdin', units)
  if not arguments:
    raise ConfigError(f'give one or more {units}, each one quoted argument, or --file=PATH, '
                      'or `-` to read them from stdin')
  for argument in arguments:
    _refuse_a_file_name(argument, units)
  return iter(arguments)


def _refuse_a_file_name(argument: str, units: str) -> None:
  """A ConfigError for an argument of one word that names a file here (`nplm score
  sentences.txt`, a habit from tools that read files): scored, it would be one sentence of an
  unknown word, a number about the file's name."""
  word = argument.strip()
  if word and len(word.split()) == 1 and os.path.isfile(paths.absolute(word)):
    raise ConfigError(f'{word!r} is a file here, and arguments are the {units} themselves: '
                      f'--file={word} reads its lines (to use the word {word!r} itself, give '
                      'it on stdin with `-`)')


def _opened(file: str):
  try:
    return open(paths.absolute(file), 'rb')
  except FileNotFoundError:
    raise ConfigError(f'--file={paths.shown(file)}: no such file') from None
  except IsADirectoryError:
    raise ConfigError(f'--file={paths.shown(file)} is a directory; give a text file') from None
  except OSError as error:
    raise ConfigError(f'--file={paths.shown(file)} cannot be read ({error.strerror})') from None


def _lines(stream, name: str, units: str) -> Iterator[str]:
  """The non-blank lines of a byte stream as text, each checked as UTF-8 text as it comes."""
  found = False
  with stream:
    for number, raw in enumerate(stream, 1):
      try:
        line = raw.decode('utf-8')
      except UnicodeDecodeError:
        raise ConfigError(f'{name} is not UTF-8 text (line {number:,}); give a text file of '
                          f'{units}') from None
      if '\0' in line:
        raise ConfigError(f'{name} is binary, not text (a NUL byte on line {number:,}); give a '
                          f'text file of {units}')
      if line.strip():
        found = True
        yield line.strip('\r\n')
  if not found:
    raise ConfigError(f'{name} holds no {units} (blank lines are skipped): give one or more '
                      f'{units}, one per line')


def summary_line(score: SentenceScore) -> str:
  """A sentence's numbers in fixed-width columns, then the sentence; where it holds a word
  outside the vocabulary, the closed ln p (<unk> alone) before it."""
  closed = (f'closed {score.closed_log_prob:.2f}  '
            if score.closed_log_prob != score.log_prob else '')
  return (f'ln {score.log_prob:9.2f}  log10 {score.log10_prob:8.2f}  '
          f'tokens {score.num_tokens:4d}  oov {score.num_oovs:3d}  '
          f'ppl {score.perplexity:10.1f}  {closed}{printable(score.text)}')


def _label(token: TokenScore) -> str:
  if token.oov and token.word != UNK:
    return f'{UNK} ({printable(token.word)})'
  # A character model's space, visible.
  return '␣' if token.token == ' ' else printable(token.token)


def token_lines(score: SentenceScore) -> list[str]:
  """Each token's ln p, one line each, indented under its sentence."""
  tokens = score.tokens
  width = max(12, *(len(_label(t)) for t in tokens))
  return [f'    {_label(t):{width}} {t.log_prob:9.4f}' + (
      f'   (<unk> {t.log_prob - t.spelling_log_prob:.4f}, spelling {t.spelling_log_prob:.4f})'
      if t.spelling_log_prob else '') for t in tokens]


def report_lines(scores: Iterable[SentenceScore], details: bool = False,
                 as_json: bool = False) -> Iterator[str]:
  """What score prints: a line per sentence (and its tokens' with `details`), or a JSON
  object per sentence."""
  for score in scores:
    if as_json:
      yield json.dumps(score.as_dict(tokens=details), ensure_ascii=False)
      continue
    yield summary_line(score)
    if details:
      yield from token_lines(score)


def main(argv):
  cli.show_progress_lines()
  options = flags.FLAGS
  with cli.failing_on_user_errors():
    sentences = sentences_of(argv[1:], options.file)
    with interrupting(f'scoring with {options.workdir}'):
      model = load_trained(options.workdir)
      if model.spelling_note is not None:
        print(f'note: {model.spelling_note}', file=sys.stderr)
      for line in report_lines(scored(model, sentences), options.details, options.json):
        print(line)


def run_program(argv=None) -> None:
  define_input_flags()
  flags.DEFINE_bool('details', False, "Print each token's ln p under its sentence (with "
                    '--json: a `tokens` list: word as typed, token read, log_prob, oov, '
                    'spelling_log_prob).')
  flags.DEFINE_bool('json', False, 'Print one JSON object per sentence (JSON Lines): text, '
                    'log_prob (ln, open vocabulary), log10_prob, closed_log_prob (an unknown word '
                    'charged <unk> alone), num_tokens, num_oovs, perplexity.')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
