r"""Sentences with their misspelt words corrected by a trained word-level model.

  nplm correct --workdir=runs/mlp9 "The office is about 15 minuets from my home ."
  nplm correct --workdir=runs/mlp9 --details --file=typed.txt
  nplm correct --workdir=runs/mlp9 --misspellings=pairs.txt "I am greatful ."
  nplm correct --workdir=runs/mlp9 --misspellings=codespell "I am greatful ."
  cat typed.txt | nplm correct --workdir=runs/lstm - > corrected.txt

The noisy channel of Mays, Damerau and Mercer (1991) over the model's open vocabulary
(nplm.use.correction): a word is typed as meant with probability --alpha, else as any string
one edit away (a letter inserted, deleted, replaced, or two adjacent letters swapped), and with
probability --second_edit one more edit after that; the correction is the sentence w that
maximizes P(w) · P(typed | w), found greedily, one word more a round, at most --max_changes
words a sentence (a line of several is corrected a sentence at a time, each read alone; a
sentence of more than 20 tokens, text without end marks, has --max_changes for each 20
begun). With --misspellings=FILE each edit is drawn as often as a list of misspellings makes
it, not uniformly ("recieve": i and e swapped is common); --misspellings=codespell learns
from the codespell package's list (pip install codespell). A word outside the vocabulary is
looked up two edits away ("htikn" for "think"), one in it one edit away. A word not in the
vocabulary (a misspelling, or a name typed right) and a real word that its context rejects
("minuets" for "minutes") are corrected alike; a name the model finds likely as spelt stays.
A sentence typed in capitals ("THE GOVERMENT SAID") has its words read in the case the
vocabulary holds them in, the likeliest where it holds several ("The", "the"), compared with
the words meant in their letters alone, and is printed in capitals ("THE GOVERNMENT SAID");
in a sentence with small letters, capitals are the writer's ("the FBI").
Prints each sentence corrected, one per line, as typed with only the changed words replaced (a
filter: sentences in, sentences out); --details adds a line per change with the gain in ln P;
--json one JSON object per sentence. Sentences come as for nplm score: arguments, --file or
stdin; one with no word in the vocabulary comes out as it went in.
"""

import json

from absl import flags

from nplm import cli
from nplm.cli.score import define_input_flags, sentences_of
from nplm.display import printable
from nplm.errors import ConfigError
from nplm.stop_requests import check_interrupted, interrupting
from nplm.use import answers
from nplm.use.correction import (MAX_CHANGES, SENTENCE_TOKENS, Correction, Corrector,
                                 reads_words, typed_in_capitals)
from nplm.use.misspelling_lists import read_pairs
from nplm.use.prompts import Prompt, correction_note, unknown_note
from nplm.use.learned_channel import LEARNED_ALPHA
from nplm.use.spelling_channel import ALPHA, SECOND_EDIT
from nplm.use.trained import load_trained

FLAGS = flags.FLAGS


def report_lines(correction: Correction, details: bool = False) -> list[str]:
  """The corrected sentence; with `details`, a line per change under it."""
  lines = [printable(correction.corrected)]
  if details:
    lines += [f'    {printable(c.typed)} -> {printable(c.corrected)}'
              for c in correction.changes]
    if correction.changes:
      lines.append(f'    gain in ln P(w) P(typed | w): '
                   f'{correction.log_prob - correction.typed_log_prob:.2f}')
  return lines


def main(argv):
  cli.show_progress_lines()
  with cli.failing_on_user_errors():
    sentences = sentences_of(argv[1:], FLAGS.file)
    with interrupting(f'correcting with {FLAGS.workdir}'):
      misspellings = read_pairs(FLAGS.misspellings) if FLAGS.misspellings else ()
      corrector = Corrector(load_trained(FLAGS.workdir), FLAGS.alpha, FLAGS.max_changes,
                            FLAGS.second_edit, misspellings)
      for sentence in sentences:
        check_interrupted()  # One dropped inside a garbage collector's callback.
        if FLAGS.json:
          print(json.dumps(answers.correction(corrector, sentence), ensure_ascii=False),
                flush=True)
        else:
          print('\n'.join(report_lines(corrector.correct(sentence), FLAGS.details)),
                flush=True)


def define_channel_flags() -> None:
  """The spelling channel's flags (nplm correct's, and nplm complete's for typos)."""
  flags.DEFINE_float('alpha', None, f'P(a word is typed as meant), in (0, 1): higher changes '
                     f'fewer words (Mays, Damerau and Mercer 1991 tried 0.9 to 0.9999); '
                     f'default {ALPHA:g}, {LEARNED_ALPHA:g} with --misspellings.')
  flags.DEFINE_float('second_edit', SECOND_EDIT, 'P(a misspelt word has a second edit), in '
                     '[0, 1): 0 reaches one edit only, as Mays et al.\'s channel.')
  flags.DEFINE_string('misspellings', '', 'A list of misspellings (lines "typed meant", '
                      '"typed->meant" as Wikipedia\'s and codespell\'s, "meant: typed typed" '
                      'as Norvig\'s, Birkbeck\'s "$meant" then typed lines, or a JSON object '
                      'typed -> meant), or "codespell" for the codespell package\'s: each edit '
                      'is drawn as often as they make it (Kernighan, Church and Gale 1990), not '
                      'uniformly.')


def define_typos_flag(default: bool, what: str) -> None:
  """--typos, and the channel's flags it reads (predict's, generate's and complete's)."""
  flags.DEFINE_bool('typos', default, f'Read the words typed as possibly misspelt{what}, '
                    'the words before a word being typed corrected as nplm correct corrects '
                    'the beginning of a sentence (a word-level model\'s; words in capitals '
                    'read in the vocabulary\'s case), through the channel of --alpha, '
                    '--second_edit and --misspellings.')
  define_channel_flags()


def refuse_unread_channel_flags() -> None:
  """A channel flag given without --typos weighs nothing: a ConfigError that says so."""
  unread = [f'--{name}' for name in ('alpha', 'second_edit', 'misspellings')
            if FLAGS[name].present and not FLAGS.typos]
  if unread:
    how = ('--notypos leaves unread: leave out one or the other' if FLAGS['typos'].default
           else 'only --typos reads: add it, or leave them out')
    raise ConfigError(f'{" and ".join(unread)} weigh{"s" if len(unread) == 1 else ""} typos, '
                      f'which {how}')


def typo_corrector(model) -> Corrector | None:
  """The corrector that reads typos, by --typos and the channel's flags; None without
  --typos."""
  refuse_unread_channel_flags()
  if not FLAGS.typos:
    return None
  misspellings = read_pairs(FLAGS.misspellings) if FLAGS.misspellings else ()
  return Corrector(model, FLAGS.alpha, MAX_CHANGES, FLAGS.second_edit, misspellings)


def unknown_warning(model, prompt: Prompt, corrector: Corrector | None) -> str | None:
  """predict's and generate's warning where typed words fell to <unk>: without --typos, for
  a word-level model, saying that --typos would read a misspelt one (and text in capitals)
  as the words meant."""
  note = unknown_note(prompt)
  if note is None:
    return None
  read = ('a misspelt word, and text in capitals, as the words meant'
          if typed_in_capitals(prompt.tokens) else 'a misspelt word as the word meant')
  hint = f' (--typos reads {read})' if (
      corrector is None and reads_words(model)) else ''
  return f'warning: {printable(note)}{hint}'


def reading_lines(model, prompt: Prompt, corrector: Corrector | None) -> list[str]:
  """generate's and complete's lines on stderr of how the text was read: its typos
  corrected, then its words read as <unk>."""
  note = correction_note(prompt)
  lines = [f'note: {printable(note)}'] if note else []
  warning = unknown_warning(model, prompt, corrector)
  return lines + [warning] if warning else lines


def run_program(argv=None) -> None:
  define_input_flags()
  define_channel_flags()
  flags.DEFINE_integer('max_changes', MAX_CHANGES, f'At most this many words changed per '
                       f'sentence, per {SENTENCE_TOKENS} tokens begun of a longer one.')
  flags.DEFINE_bool('details', False, 'Print each change under its sentence, and the gain '
                    'in ln P(w) P(typed | w).')
  flags.DEFINE_bool('json', False, 'Print one JSON object per sentence (JSON Lines): text, '
                    'corrected, changes (position, typed, corrected), log_prob, '
                    'typed_log_prob.')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
