r"""Text sampled from a trained model, token by token from its exact distribution.

  nplm generate --workdir=runs/mlp9 --length=50 --temperature=0.8 --top_p=0.9
  nplm generate --workdir=runs/lstm "The jury said" --sentences=2 --samples=3
  python -m experiments.generate --workdir=runs/kn5 --temperature=0   # greedy

Each sample continues the prompt (the argument, as nplm predict and complete take theirs, or
--prompt; read after the start-of-split context, as scoring reads a
split) for --length tokens, across sentence and text ends, or until the end of its
--sentences-th sentence when that comes first. The prompt and the sample print as text, as
the model's tokenizer writes it, a line per line (or paragraph) of the dataset, as they are
drawn: a line at its end, a long one in pieces, so that any --length prints as it goes and
holds no more than a line's last tokens; Ctrl-C or SIGTERM stops it at once (status 75).
Several --samples print one after the other, each as it would be drawn beside the others.
Control characters print escaped, as nplm score prints them. Temperature, then top-k, then
top-p reshape each draw, as in Hugging Face's generate; --temperature=0 is greedy. A drawn
<unk> prints as a word outside the vocabulary drawn from the open vocabulary's spelling
model (--spell_unk; nplm.use.generation.shown_unknowns). The same --seed gives the same text.
With --typos the prompt's misspelt words are read corrected, as nplm predict --typos reads a
prefix: the samples continue it as read, and it prints so.
"""

import sys

from absl import flags

from nplm import cli
from nplm.cli.correct import define_typos_flag, reading_lines, typo_corrector
from nplm.display import printable
from nplm.use.generation import Sampling, text_pieces
from nplm.use import answers
from nplm.use.trained import load_trained
from nplm.stop_requests import Interrupted, interrupting

FLAGS = flags.FLAGS


_line_open = False  # Whether what was written last ends amid a line.


def write(text: str) -> None:
  """Text on stdout at once (a pipe, a file or a terminal alike), control characters
  escaped but the line breaks kept."""
  global _line_open
  sys.stdout.write('\n'.join(printable(line) for line in text.split('\n')))
  sys.stdout.flush()
  _line_open = not text.endswith('\n') if text else _line_open


def prompt_of(arguments: list[str]) -> str:
  """The one prompt: the argument, or --prompt (a user typing predict's habit, or a script
  the flag)."""
  if len(arguments) > 1:
    cli.fail(f'one prompt, quoted, not {len(arguments)} arguments: nplm generate '
             f'--workdir=... "{" ".join(arguments)}"')
  if arguments and FLAGS.prompt:
    cli.fail('the prompt twice: give it as the argument or as --prompt, not both')
  return arguments[0] if arguments else FLAGS.prompt


def write_samples(model, prompt: str, sampling: Sampling, corrector=None) -> None:
  """Each sample as it is drawn, headed by its number when there are several, each ending
  its last line."""
  for sample in range(sampling.samples):
    if sampling.samples > 1:
      write(f'--- sample {sample + 1} ---\n')
    for piece in text_pieces(model, prompt, sampling, FLAGS.seed, sample, corrector=corrector):
      write(piece)
    write('\n')


def main(argv):
  prompt = prompt_of(argv[1:])
  cli.show_progress_lines()
  try:
    sampling = Sampling(length=FLAGS.length, temperature=FLAGS.temperature, top_k=FLAGS.top_k,
                        top_p=FLAGS.top_p, no_unk=FLAGS.no_unk, spell_unk=FLAGS.spell_unk,
                        samples=FLAGS.samples,
                        sentences=FLAGS.sentences).validate()
    with interrupting(f'sampling from {FLAGS.workdir}'):
      model = load_trained(FLAGS.workdir)
      model.require_language_model()
      corrector = typo_corrector(model)
      for line in reading_lines(model, answers.read(model, prompt, corrector).prompt,
                                corrector):
        print(line, file=sys.stderr)
      write_samples(model, prompt, sampling, corrector)
  except Interrupted as stop:
    if _line_open:
      write('\n')  # The line cut short ends before the message.
    cli.stop_interrupted(str(stop))
  except BrokenPipeError:
    raise  # A reader that stopped reading (`| head`): the dispatcher exits quietly.
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train or nplm ngram).')
  flags.DEFINE_integer('length', 50, 'Tokens to draw per sample (fewer if --sentences ends it '
                       'first).')
  flags.DEFINE_integer('sentences', 0, 'Stop a sample after this many sentences, counted as '
                       "a reader counts them: a sentence ends at '.', '!' or '?' (closing "
                       'quotes and brackets included) followed by a space or a line end, and '
                       'at the dataset\'s sentence end (<eos>; Brown: the paragraph\'s </p>); '
                       '0 = --length alone decides.')
  flags.DEFINE_float('temperature', 1.0, 'T: draw from p(w)^(1/T) renormalized; 1 = the '
                     'model, smaller = surer, larger = flatter, 0 = greedy (the most probable).')
  flags.DEFINE_integer('top_k', 0, 'Draw from the k most probable tokens only; 0 = all.')
  flags.DEFINE_float('top_p', 1.0, 'Nucleus sampling: draw from the smallest set of most '
                     'probable tokens whose probability reaches p, in (0, 1]; 1 = all.')
  flags.DEFINE_integer('seed', 0, 'Random seed: the same seed gives the same samples.')
  flags.DEFINE_string('prompt', '', 'Text the samples continue (or give it as the argument), '
                      'tokenized as the model\'s dataset was; a word being typed at its end (no space after it; for '
                      'words, one the vocabulary lacks) is spelt out first, as nplm complete '
                      'reads it.')
  flags.DEFINE_integer('samples', 1, 'How many samples to draw.')
  define_typos_flag(False, ' in the prompt: the samples continue it as read, corrected, and '
                    'it prints so; as typed by default')
  flags.DEFINE_bool('no_unk', False, 'Never draw <unk> (the class of all rare words).')
  flags.DEFINE_bool('spell_unk', True, 'Print a drawn <unk> as a word drawn from the open '
                    "vocabulary's spelling model q (the model gives a word w outside the "
                    'vocabulary p(<unk> | h) q(w)); false prints <unk>. Greedy '
                    '(--temperature=0) prints <unk>.')
  flags.mark_flag_as_required('workdir')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
