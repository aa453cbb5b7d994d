"""The `nplm` command (pyproject.toml's [project.scripts]; `python -m nplm` where the script is
not on PATH): every program by name; `nplm help COMMAND` is `nplm COMMAND --help`. `--version`,
`--help` and a mistyped command answer at once: this module imports only what `import nplm`
does. A program's module is imported while Ctrl-C ends the start with one line
(nplm.errors.interrupt_ends_the_start: its import is the command's first seconds, JAX, Flax
and Orbax), after malloc is told to keep the compiled steps' temporaries (nplm.host_memory:
before JAX starts its threads)."""

import difflib
import importlib
import sys

import nplm
from nplm import host_memory
from nplm.errors import interrupt_ends_the_start, quiet_when_stdout_closes

COMMANDS = {
    'train': 'Train (or resume) a model on any --dataset; exact perplexities at the end.',
    'evaluate': "A trained model's exact perplexity on a dataset's splits or a text file.",
    'ngram': 'Fit and score an n-gram baseline (Kneser-Ney, interpolated trigram).',
    'score': 'Log-probabilities of sentences (arguments, a file or stdin), one line each.',
    'rank': 'Alternative sentences ordered by their probability under a trained model.',
    'predict': 'The most probable next tokens after a prefix, with their probabilities.',
    'complete': 'Completions of a prefix as a search box offers them, with their probabilities.',
    'correct': 'Sentences with their misspelt words corrected (a noisy channel and the model).',
    'generate': 'Text sampled from a trained model.',
    'serve': 'A trained model behind HTTP: JSON answers, and a page that completes as you type.',
    'neighbours': 'Nearest words by their learned feature vectors.',
    'embeddings': 'Feature vectors in word2vec format, scored on similarity and analogies.',
    'mix': 'Trained models (neural or n-gram), two or more, mixed: equal, learned or binned '
           'weights.',
    'compare': 'Several runs side by side: a table of their numbers, one figure of curves.',
    'export': 'A dataset\'s token streams as text files.',
    'sweep': 'A named sweep over a recipe: one run per point, a results table and plot.',
    'table1': 'Table 1 of Bengio et al. (2003) on identical tokens, beside the paper.',
    'clean': "Prepared datasets' and a workdir's checkpoints' sizes; remove the unneeded.",
}
_VERSION_FLAGS = ('--version', '-V')


def usage() -> str:
  lines = ['usage: nplm <command> [--flags]   (nplm <command> --help for its flags)',
           '       nplm --version', '']
  lines += [f'  {name:11} {text}' for name, text in COMMANDS.items()]
  return '\n'.join(lines)


def unknown_command(command: str) -> str:
  """One line for a mistyped command, with the nearest one (difflib's close match): the
  whole usage after it would bury the line that says what went wrong."""
  close = difflib.get_close_matches(command, COMMANDS, n=1)
  guess = f"; did you mean '{close[0]}'?" if close else ''
  return f'unknown command {command!r}{guess} (nplm --help lists the commands)'


def main() -> None:
  quiet_when_stdout_closes(_main)  # `nplm | head -1`: no traceback.


def _main() -> None:
  if len(sys.argv) >= 2 and sys.argv[1] in _VERSION_FLAGS:
    print(f'nplm {nplm.__version__}')
    sys.exit(0)
  if len(sys.argv) > 2 and sys.argv[1] == 'help':  # git's habit: `nplm help train`.
    sys.argv[1:] = [sys.argv[2], '--help']
  if len(sys.argv) < 2 or sys.argv[1] in ('-h', '--help', 'help'):
    print(usage())
    sys.exit(0 if len(sys.argv) >= 2 else 2)
  command = sys.argv[1]
  if command not in COMMANDS:
    print(f'error: {unknown_command(command)}', file=sys.stderr)
    sys.exit(2)
  host_memory.keep_freed_blocks()
  with interrupt_ends_the_start():
    module = importlib.import_module(f'nplm.cli.{command}')
  module.run_program([f'nplm {command}', *sys.argv[2:]])
