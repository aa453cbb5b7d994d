r"""The most probable next tokens after a prefix, with their exact probabilities.

  nplm predict --workdir=runs/mlp9 "the cat sat on the"
  nplm predict --workdir=runs/lstm --k=5 --json "The jury said" "It was"
  nplm predict --workdir=runs/mlp9 --typos "the jury sayd that"
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
coming next and spelling the word out ("▁church" for "the chur"). With --typos, the words
before the one being typed are read as possibly misspelt, corrected as nplm correct corrects
the beginning of a sentence (nplm.use.correction), and the tokens listed are those after the
prefix as read, shown under it ("the jury sayd" read as "the jury said"), words typed in
capitals read in the case the vocabulary holds them in ("THE JURY" as "The jury"); the word
being typed may be a misspelt beginning of words too, as nplm complete reads it ("the jury
recie"): each word it may begin is listed with its probability and, in a last column, ln
P(typed | word), ranked by their sum. Off by default, where they are the probabilities
after the text as typed. Control characters print escaped,
as nplm score prints them.
"""

import json
import sys
from collections.abc import Sequence

from absl import flags

from nplm import cli
from nplm.cli.correct import define_typos_flag, typo_corrector, unknown_warning
from nplm.cli.score import define_input_flags, sentences_of
from nplm.display import printable
from nplm.errors import ConfigError
from nplm.data.vocab import UNK
from nplm.use import answers
from nplm.use.prediction import Prediction, predictions
from nplm.use.prompts import Prompt
from nplm.use.trained import load_trained
from nplm.stop_requests import Interrupted, interrupting

FLAGS = flags.FLAGS


def _label(token: str) -> str:
  if token == UNK:  # Not a word: the mass every word outside the vocabulary shares.
    return f'{UNK} (every unknown word)'
  return '␣' if token == ' ' else printable(token)  # A character model's space, visible.


def report(prefixes: Sequence[str], found: Sequence[Sequence[Prediction]],
           prompts: Sequence[Prompt]) -> str:
  """One block per prefix: a line per token, p and ln p, and where a word being typed was
  read with typos, ln P(typed | token); under the prefix, the text as read where typos were
  corrected in it."""
  blocks = []
  for prefix, best, prompt in zip(prefixes, found, prompts):
    width = max(12, *(len(_label(p.token)) for p in best))
    lines = [printable(prefix) if prefix else '(the start of a text)']
    lines += [f'(read as: {printable(prompt.read_as)})'] if prompt.read_as else []
    typed = any(p.channel_log_prob for p in best)
    lines += [f'  {_label(p.token):{width}} {p.probability:8.5f} {p.log_prob:9.4f}'
              + (f'  ln P(typed | word) {p.channel_log_prob:.4f}' if typed else '')
              for p in best]
    blocks.append('\n'.join(lines))
  return '\n\n'.join(blocks)


def as_json(prefixes: Sequence[str], found: Sequence[Sequence[Prediction]],
            prompts: Sequence[Prompt]) -> str:
  return json.dumps([answers.with_note(answers.prediction(prefix, best), prompt)
                     for prefix, best, prompt in zip(prefixes, found, prompts)], indent=2)


def main(argv):
  cli.show_progress_lines()
  try:
    if FLAGS.k < 1:
      raise ConfigError(f'--k must be at least 1, not {FLAGS.k}')
    prefixes = list(sentences_of(argv[1:], FLAGS.file, units='prefixes'))
    with interrupting(f'predicting with {FLAGS.workdir}'):
      model = load_trained(FLAGS.workdir)
      model.require_language_model()
      corrector = typo_corrector(model)
      found, prompts = [], []
      for prefix in prefixes:
        prompt, best = predictions(model, prefix, FLAGS.k, corrector)
        warning = unknown_warning(model, prompt, corrector)
        if warning:
          print(warning, file=sys.stderr)
        found.append(best)
        prompts.append(prompt)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  print(as_json(prefixes, found, prompts) if FLAGS.json
        else report(prefixes, found, prompts))


def run_program(argv=None) -> None:
  define_input_flags()
  flags.DEFINE_integer('k', 10, 'How many of the most probable next tokens to list.')
  define_typos_flag(False, ': predicting after the prefix as read, corrected; as typed '
                    'by default, whose probabilities they are')
  flags.DEFINE_bool('json', False, 'Print JSON: per prefix its text and predictions (token, '
                    'probability, log_prob, channel_log_prob); with typos corrected, read_as and '
                    'changes.')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
