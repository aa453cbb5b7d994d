r"""The most probable continuations of a typed prefix, a few words each, as a search box offers.

  nplm complete --workdir=runs/mlp9 "what is the"
  nplm complete --workdir=runs/mlp9 --misspellings=codespell "the jury recie"
  nplm complete --workdir=runs/lstm --k=5 --max_words=2 --json "The jury said" "It was"
  printf 'the cat\nof the\n' | nplm complete --workdir=runs/kn5

Per prefix (each argument, or each line of --file or stdin): the --k most probable
continuations, one per line, written after the prefix as nplm generate writes text, with p,
ln p and how each ended: at a sentence end (the dataset's end mark, or '.', '!', '?' for word
tokenizations) or at --max_words words, its last word whole. The probabilities are the
model's own, exact (nplm.use.completion): the product of each token's, found by beam search.
The prefix is read as nplm predict reads it; tokens outside the vocabulary are read as
<unk> (named on stderr), and <unk> is never proposed. A word being typed is completed: where
each token is a word, a last word with no space after it that the vocabulary lacks but begins
words of ("the old m") is left out of the prefix, and each continuation begins with one of
those words ("the old man ..."); for subwords its pieces are read back and the continuations
spell it out, in the pieces the model saw it cut into (token healing); characters go on with
it as with any text. Where each token is a word, the words typed may be misspelt, as a
search box reads them (--typos, the default): a word being typed that may be the misspelt
beginning of words ("the jury recie") is completed by them too, each continuation weighed by
P(typed | its first word) as well, nplm correct's channel (--alpha, --second_edit,
--misspellings) on the likeliest prefix of the word (nplm.use.prefix_channel), that ln P the
last column; the words before it are corrected first as nplm correct corrects the beginning
of a sentence ("teh grand jury" completes as "the grand jury ..."); typed in capitals, its
words are read in the vocabulary's case and the word being typed is compared in its letters
("THE JURY RECIE" completes as "The jury received ..."). --json prints one JSON
object per prefix (JSON Lines). Control characters print escaped, as nplm score prints them.
"""

import json
import sys
from collections.abc import Sequence

from absl import flags

from nplm import cli
from nplm.cli.correct import (define_channel_flags, reading_lines,
                              refuse_unread_channel_flags)
from nplm.cli.score import define_input_flags, sentences_of
from nplm.display import printable
from nplm.stop_requests import interrupting
from nplm.use.completion import (DEFAULT_MAX_WORDS, MOST_K, MOST_WORDS, SENTENCE_END,
                                 Completer, Completion, check_bounds)
from nplm.use import answers
from nplm.use.misspelling_lists import read_pairs
from nplm.use.trained import load_trained

FLAGS = flags.FLAGS


def report(prefix: str, completions: Sequence[Completion], typing: bool = False) -> str:
  """A prefix's block: a line per continuation (with the prefix), p, ln p and how it
  ended; where a word was being typed with typos read, ln P(typed | its first word)."""
  width = max([16, *(len(printable(c.text)) for c in completions)])

  def line(c: Completion) -> str:
    ended = 'sentence end' if c.ended == SENTENCE_END else 'max words'
    shown = f'  {printable(c.text):{width}} {c.probability:9.2e} {c.log_prob:9.4f}  '
    return shown + (f'{ended:12}  ln P(typed | word) {c.channel_log_prob:.4f}' if typing
                    else ended)
  return '\n'.join([printable(prefix) if prefix else '(the start of a text)',
                    *map(line, completions)])


def main(argv):
  cli.show_progress_lines()
  with cli.failing_on_user_errors():
    check_bounds(FLAGS.k, FLAGS.max_words)
    prefixes = sentences_of(argv[1:], FLAGS.file, units='prefixes')
    refuse_unread_channel_flags()
    with interrupting(f'completing with {FLAGS.workdir}'):
      misspellings = read_pairs(FLAGS.misspellings) if FLAGS.misspellings else ()
      completer = Completer(load_trained(FLAGS.workdir), FLAGS.typos, FLAGS.alpha,
                            FLAGS.second_edit, misspellings)
      for number, prefix in enumerate(prefixes):
        typing = completer.typing(prefix)
        for line in reading_lines(completer.model, typing.prompt, completer.corrector):
          print(line, file=sys.stderr)
        completions = completer.complete(prefix, FLAGS.k, FLAGS.max_words)
        if FLAGS.json:
          print(json.dumps(answers.completions(prefix, completions), ensure_ascii=False),
                flush=True)
        else:
          print(('\n' if number else '') + report(
              prefix, completions, bool(typing.tokens and completer.prefix_channel)),
                flush=True)


def run_program(argv=None) -> None:
  define_input_flags()
  flags.DEFINE_integer('k', 10, f'How many of the most probable continuations to list (1 to '
                       f'{MOST_K:,}).')
  flags.DEFINE_integer('max_words', DEFAULT_MAX_WORDS,
                       f'The most words a continuation has (1 to {MOST_WORDS}). '
                       f'{DEFAULT_MAX_WORDS}: a search box suggests a few words; each word '
                       'more lowers every probability, and the best longer ones differ '
                       'mostly in their last words.')
  flags.DEFINE_bool('typos', True, 'Read the words typed as possibly misspelt, where each '
                    'token is a word: the word being typed completed by the words it may be '
                    'the misspelt beginning of too, weighed by P(typed | word), the words '
                    'before it corrected as nplm correct corrects the beginning of a sentence '
                    '(--notypos: read as typed).')
  define_channel_flags()
  flags.DEFINE_bool('json', False, 'Print one JSON object per prefix (JSON Lines): prefix, '
                    'completions (text, tokens, log_prob, probability, words, ended, '
                    'channel_log_prob).')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
