r"""The most probable next tokens after a prefix, with their exact probabilities.

  nplm predict --workdir=runs/mlp9 "the cat sat on the"
  nplm predict --workdir=runs/lstm --k=5 --json "The jury said" "It was"
  printf 'the cat\nof the\n' | nplm predict --workdir=runs/kn5

Per prefix (each argument, or each line of --file or stdin): the --k most probable tokens, one
per line, with p and ln p, from the model's exact distribution over its whole vocabulary
(nplm.use.prediction). The prefix is tokenized as the model's dataset was and read after the
start-of-split context; an empty one asks for the first token of a text. Tokens outside the
vocabulary are read as <unk> (named on stderr), but for a word being typed, read as nplm
complete reads it: where each token is a word, a last word with no space after it that the
vocabulary lacks but begins words of ("the old m") lists the words it begins, each with its
probability after the prefix before it ("man", "men"); for subwords, the last word's pieces
are read back and the list is of the pieces that spell it out, each with its probability of
coming next and spelling the word out ("▁church" for "the chur"). Control characters print
escaped, as nplm score prints them.
"""

import json
import sys
from collections.abc import Sequence

from absl import flags

from nplm import cli
from nplm.cli.score import define_input_flags, sentences_of
from nplm.display import printable
from nplm.errors import ConfigError
from nplm.data.vocab import UNK
from nplm.use import answers
from nplm.use.prediction import Prediction, predictions
from nplm.use.prompts import unknown_note
from nplm.use.trained import load_trained
from nplm.stop_requests import Interrupted, interrupting

FLAGS = flags.FLAGS


def _label(token: str) -> str:
  if token == UNK:  # Not a word: the mass every word outside the vocabulary shares.
    return f'{UNK} (every unknown word)'
  return '␣' if token == ' ' else printable(token)  # A character model's space, visible.


def report(prefixes: Sequence[str], found: Sequence[Sequence[Prediction]]) -> str:
  """One block per prefix: a line per token, p and ln p."""
  blocks = []
  for prefix, best in zip(prefixes, found):
    width = max(12, *(len(_label(p.token)) for p in best))
    lines = [printable(prefix) if prefix else '(the start of a text)']
    lines += [f'  {_label(p.token):{width}} {p.probability:8.5f} {p.log_prob:9.4f}'
              for p in best]
    blocks.append('\n'.join(lines))
  return '\n\n'.join(blocks)


def as_json(prefixes: Sequence[str], found: Sequence[Sequence[Prediction]]) -> str:
  return json.dumps([answers.prediction(prefix, best)
                     for prefix, best in zip(prefixes, found)], indent=2)


def main(argv):
  cli.show_progress_lines()
  try:
    if FLAGS.k < 1:
      raise ConfigError(f'--k must be at least 1, not {FLAGS.k}')
    prefixes = list(sentences_of(argv[1:], FLAGS.file, units='prefixes'))
    with interrupting(f'predicting with {FLAGS.workdir}'):
      model = load_trained(FLAGS.workdir)
      model.require_language_model()
      found = []
      for prefix in prefixes:
        prompt, best = predictions(model, prefix, FLAGS.k)
        note = unknown_note(prompt)
        if note:
          print(f'warning: {printable(note)}', file=sys.stderr)
        found.append(best)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  print(as_json(prefixes, found) if FLAGS.json else report(prefixes, found))


def run_program(argv=None) -> None:
  define_input_flags()
  flags.DEFINE_integer('k', 10, 'How many of the most probable next tokens to list.')
  flags.DEFINE_bool('json', False, 'Print JSON: per prefix its text and predictions (token, '
                    'probability, log_prob).')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
