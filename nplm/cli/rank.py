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
from nplm.use import answers
from nplm.use.sentences import SentenceScore, rank_sentences
from nplm.use.trained import load_trained
from nplm.stop_requests import Interrupted, interrupting


def report_lines(ranked: Sequence[SentenceScore], as_json: bool = False) -> Iterator[str]:
  """A line per sentence, the best first: its rank, ln p (open vocabulary), the difference
  to the best; the closed ln p beside it where some sentence holds an unknown word."""
  if as_json:
    yield from (json.dumps(entry, ensure_ascii=False) for entry in answers.ranking(ranked))
    return
  best = ranked[0].log_prob
  closed = any(score.closed_log_prob != score.log_prob for score in ranked)
  for rank, score in enumerate(ranked, 1):
    beside = f'  closed {score.closed_log_prob:9.2f}' if closed else ''
    yield (f'{rank:3d}  ln {score.log_prob:9.2f}  diff {score.log_prob - best:8.2f}  '
           f'oov {score.num_oovs:2d}{beside}  {printable(score.text)}')


def unknown_words_note(ranked: Sequence[SentenceScore], spelt: bool) -> str | None:
  """What the figures mean where a sentence holds words outside the vocabulary: with a
  spelling model (`spelt`), which figure is which; without one (an older run whose data is
  gone), a warning where the alternatives hold different numbers of them, since <unk> alone
  is the probability of every rare word at once and favours the unknown spelling."""
  if spelt and any(score.num_oovs for score in ranked):
    return ('note: ranked by ln, the open vocabulary: a word outside the vocabulary (oov) '
            'costs ln p(<unk> | before) + ln q(its spelling); closed charges <unk> alone')
  if spelt or len({score.num_oovs for score in ranked}) < 2:
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
      model = load_trained(options.workdir)
      ranked = rank_sentences(model, sentences)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  for note in (model.spelling_note, unknown_words_note(ranked, model.spelling is not None)):
    if note is not None:
      print(note if note.startswith('note: ') else f'note: {note}', file=sys.stderr)
  for line in report_lines(ranked, options.json):
    print(line)


def run_program(argv=None) -> None:
  define_input_flags()
  flags.DEFINE_bool('json', False, 'Print one JSON object per sentence (JSON Lines), the best '
                    'first: rank, text, log_prob (open vocabulary), log10_prob, '
                    'closed_log_prob, num_tokens, num_oovs, perplexity, difference.')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
