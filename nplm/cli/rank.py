r"""Alternative sentences ordered by how probable a trained model finds them.

  nplm rank --workdir=runs/mlp9 "about 15 minutes from" "about 15 minuets from"
  nplm rank --workdir=runs/lstm --file=candidates.txt

The use of a language model in spelling correction and speech recognition: of the sentences
a channel could have produced, the model prefers the most probable. Prints them the most
probable first, each with ln p of the whole sentence (nplm score's number) and its
difference to the best (ln of the likelihood ratio: -2.3 is ten times less probable).
Sentences come as for nplm score: arguments, --file or stdin; control characters in them
print escaped, as nplm score prints them.
"""

import json
import sys
from collections.abc import Iterator, Sequence

from absl import flags

from nplm import cli
from nplm.cli.score import define_input_flags, sentences_of
from nplm.display import printable
from nplm.errors import ConfigError
from nplm.use.sentences import SentenceScore, rank_sentences
from nplm.use.trained import load_trained
from nplm.stop_requests import Interrupted, interrupting


def report_lines(ranked: Sequence[SentenceScore], as_json: bool = False) -> Iterator[str]:
  """A line per sentence, the best first: its rank, ln p, the difference to the best."""
  best = ranked[0].log_prob
  for rank, score in enumerate(ranked, 1):
    if as_json:
      yield json.dumps({'rank': rank, **score.as_dict(tokens=False),
                        'difference': score.log_prob - best}, ensure_ascii=False)
    else:
      yield (f'{rank:3d}  ln {score.log_prob:9.2f}  diff {score.log_prob - best:8.2f}  '
             f'oov {score.num_oovs:2d}  {printable(score.text)}')


def unknown_words_note(ranked: Sequence[SentenceScore]) -> str | None:
  """A warning when the alternatives hold different numbers of <unk> tokens: an <unk> is
  the probability of every rare word at once, so the ranking favours the unknown spelling."""
  if len({score.num_oovs for score in ranked}) < 2:
    return None
  return ('note: the sentences hold different numbers of words outside the vocabulary (oov); '
          'each is scored as <unk>, the class of every rare word, so a misspelling can rank '
          'above the right word')


def main(argv):
  cli.show_progress_lines()
  options = flags.FLAGS
  try:
    sentences = list(sentences_of(argv[1:], options.file))
    if len(sentences) < 2:
      raise ConfigError('give two or more alternative sentences to rank')
    with interrupting(f'ranking with {options.workdir}'):
      ranked = rank_sentences(load_trained(options.workdir), sentences)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  if (note := unknown_words_note(ranked)) is not None:
    print(note, file=sys.stderr)
  for line in report_lines(ranked, options.json):
    print(line)


def run_program(argv=None) -> None:
  define_input_flags()
  flags.DEFINE_bool('json', False, 'Print one JSON object per sentence (JSON Lines), the best '
                    'first: rank, text, log_prob, log10_prob, num_tokens, num_oovs, '
                    'perplexity, difference.')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
