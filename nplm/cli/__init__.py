"""The command-line programs (`nplm <command>`, or `python -m experiments.<command>` in a
checkout) and what they share: flags from Config, progress lines, one-line errors."""

import contextlib
import dataclasses
import difflib
import errno
import functools
import os
import sys
import textwrap

from absl import app, flags

from nplm import display, host_memory, recipes
from nplm.flagfiles import CONFIG_FLAGS_MODULE, define_own_knob_flags, flagfiles_first
from nplm.run_files.checkpoint import CheckpointError, IncompatibleCheckpointError
from nplm.config import GROUP_HELP, GROUPS, Config, ConfigError, config_class
from nplm.errors import INTERRUPTED_EXIT_STATUS, quiet_when_stdout_closes
from nplm.data.acquire import CorpusError
from nplm.data.corpus import SPLITS
from nplm.use.trained import NoTrainedModelError
from nplm.stop_requests import Interrupted
from nplm.trainer import TrainingDiverged
from nplm.run_files.lock import WorkdirBusyError

# User mistakes print one line, not a traceback.
USER_ERRORS = (ConfigError, CorpusError, IncompatibleCheckpointError, TrainingDiverged,
               NoTrainedModelError, CheckpointError, WorkdirBusyError)
_HELP_FLAGS = ('--help', '-h', '-?', '--helpshort')


def config_from_flags(**overrides) -> Config:
  """The Config the command line sets (fields without a flag keep their defaults), with the
  knobs of a model, head or source of the user's own if it names one (nplm.config.config_class)."""
  named = {name: flags.FLAGS[name].value for name in ('model', 'head', 'dataset')
           if name in flags.FLAGS}
  config = config_class(**named)
  values = {f.name: flags.FLAGS[f.name].value for f in dataclasses.fields(config)
            if f.name in flags.FLAGS}
  return config(**{**values, **overrides})


show_progress_lines = display.show_progress_lines  # Every program's start-up lines.


def split_line(split: str, ppl: float, tokens: int, unk_rate: float,
               bpc: float | None = None, word_ppl: float | None = None,
               open_ppl: float | None = None, spelling_share: float | None = None) -> str:
  """One split's exact perplexity (and bits per character, per-word perplexity), tokens and
  <unk> rate; the open vocabulary's perplexity where it differs, with the share of its NLL
  that spelling unknown words costs (open_legend says which is which)."""
  bits = f'   {bpc:.4f} bits/char' if bpc is not None else ''
  per_word = f'   per word {word_ppl:9.2f}' if word_ppl is not None else ''
  opened = (f'   open {open_ppl:9.2f} (spelling {100 * spelling_share:.1f}%)'
            if open_ppl is not None and spelling_share else '')
  return (f'{split:>5}: perplexity {ppl:9.2f}{opened}{bits}{per_word}   tokens {tokens:>9,}   '
          f'<unk> rate {100 * unk_rate:.2f}%')


def open_legend(per_word: bool) -> str:
  """What the perplexities of split_line's are, where an open one differs."""
  return ('perplexity: closed vocabulary, an unknown word scored as <unk> (the class of every '
          'rare word); open: each unknown word also spelt, p(<unk> | h) · q(word), so that '
          'every character is paid for' + ('; per word: open, per whitespace word'
                                           if per_word else ''))


def summary_lines(summary: dict) -> list[str]:
  """split_line for each of train, valid and test that a summary (training's, or an
  n-gram's) holds: a training run's final evaluation scores those --eval_splits names; the
  legend where an open perplexity differs."""
  shares = summary.get('spelling_share', {})
  lines = [split_line(split, summary[f'{split}_ppl'], summary['tokens'][split],
                      summary['unk_rate'][split], summary.get('bpc', {}).get(split),
                      summary.get(f'{split}_word_ppl'), summary.get(f'{split}_open_ppl'),
                      shares.get(split))
           for split in SPLITS if f'{split}_ppl' in summary]
  per_word = any(f'{split}_word_ppl' in summary for split in SPLITS)
  return lines + ([open_legend(per_word)] if any(shares.values()) else [])


def start(main, argv=None) -> None:
  """app.run(main): --help shows the program's docstring, its own flags, then the Config
  flags by group in Config's order (absl's --helpfull shows every flag)."""
  command = main.__module__

  def parse(argv: list[str]) -> list[str]:
    if any(arg in _HELP_FLAGS for arg in argv[1:]):
      try:  # A model or head of the user's own named on the line: its knobs too.
        config = define_own_knob_flags(flagfiles_first(argv))
      except ConfigError as error:
        fail(error)
      print(grouped_help(sys.modules[command].__doc__ or '', command, config))
      sys.exit(0)
    return _parse_flags(argv)

  host_memory.keep_freed_blocks()  # Before JAX's first computation, as `nplm` does.
  quiet_when_stdout_closes(lambda: app.run(stops_when_interrupted(main), argv=argv,
                                           flags_parser=parse))


def run_experiment(main) -> None:
  """app.run(main) for a program under experiments/ (a benchmark, a check), its flags its
  own: Ctrl-C ends it with one line and INTERRUPTED_EXIT_STATUS, not a traceback from
  wherever the timing loop was, and a closed stdout quietly, as nplm's commands do. What it
  wrote before is kept: its reports are written whole (nplm.files), at its end."""
  spec = getattr(sys.modules.get(main.__module__), '__spec__', None)
  program = spec.name if spec else os.path.basename(sys.argv[0])  # `python -m` or a file.

  @functools.wraps(main)
  def run(argv):
    try:
      return stops_when_interrupted(main)(argv)
    except KeyboardInterrupt as interrupt:  # Its message, if it says what was left where.
      stop_interrupted(f'Interrupted; {program} stopped before its end: '
                       + (str(interrupt) or 'its report, if any, was not written; rerun it'))
  quiet_when_stdout_closes(lambda: app.run(run))


def stops_when_interrupted(main):
  """main, ending with its message and INTERRUPTED_EXIT_STATUS when a stop request comes in
  a phase with nothing to save (nplm.stop_requests.Interrupted: preparing a dataset)."""
  @functools.wraps(main)
  def run(argv):
    try:
      return main(argv)
    except Interrupted as interrupted:
      stop_interrupted(str(interrupted))
  return run


def grouped_help(doc: str, command: str, config=Config) -> str:
  """The program's docstring, its own flags, and the flags of `config` it takes, by group."""
  by_module = flags.FLAGS.flags_by_module_dict()
  config_flags = {flag.name for flag in by_module.get(CONFIG_FLAGS_MODULE, [])}
  lines = [doc.strip(), '']
  own = sorted(by_module.get(command, []), key=lambda flag: flag.name)
  if own:
    lines += ['This command:', *(line for flag in own for line in _flag_help(flag)), '']
  fields = dataclasses.fields(config)
  for group in GROUPS:
    names = [f.name for f in fields if f.name in config_flags and f.metadata['group'] == group]
    if names:
      lines += [f'{group.capitalize()}: {GROUP_HELP[group]}',
                *(line for name in names for line in _flag_help(flags.FLAGS[name])), '']
  lines += textwrap.wrap(
      '--flagfile=FILE reads flags from a file (one --flag=value a line): a path, relative '
      'to the current directory, or the name of a recipe shipped with nplm: '
      f'{", ".join(recipes.names())}. A flag typed on the command line wins over a '
      "flagfile's, wherever it stands on the line.", 96)
  lines += ["--helpfull lists every flag, absl's too."]
  return '\n'.join(lines)


def _flag_help(flag) -> list[str]:
  name = f'--[no]{flag.name}' if flag.flag_type() == 'bool' else f'--{flag.name}'
  value = flag.default
  shown = f"'{value}'" if isinstance(value, str) else str(value).lower()
  default = '' if value in (None, '') else f' (default: {shown})'
  return [f'  {name}{default}', *textwrap.wrap(flag.help, 96, initial_indent=' ' * 6,
                                                 subsequent_indent=' ' * 6)]


def _parse_flags(argv: list[str]) -> list[str]:
  """absl's parsing, with a bad flag (or flagfile line) a one-line error and status 2 like
  every other mistake (absl prints two lines and exits 1). Flagfiles are read first, so a
  typed flag wins wherever it stands (flagfiles_first)."""
  try:
    argv = flagfiles_first(argv)
    define_own_knob_flags(argv)
  except ConfigError as error:
    fail(error)
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    if isinstance(error, flags.UnrecognizedFlagError):
      error = _unknown_flag(error)
    message = ' '.join(str(error).split())
    fail(f'{message} (see --help)')


def _unknown_flag(error: flags.UnrecognizedFlagError) -> flags.UnrecognizedFlagError:
  """The error with its suggestions drawn from nplm's flags alone: absl's own draw on absl's
  too, and offer --run_with_pdb for --run."""
  ours = [flag.name for module, defined in flags.FLAGS.flags_by_module_dict().items()
          if not module.startswith('absl.') for flag in defined]
  return flags.UnrecognizedFlagError(error.flagname, error.flagvalue,
                                     difflib.get_close_matches(error.flagname, ours))


def refuse_arguments(argv: list[str]) -> None:
  """A program that takes only flags: a stray word (often a flagfile line without its --)
  is a one-line error rather than the usage text."""
  if len(argv) > 1:
    fail(f'unexpected arguments {" ".join(argv[1:])!r}: flags start with -- (in a flagfile '
         'too); see --help')


@contextlib.contextmanager
def failing_on_user_errors():
  """A user's mistake (USER_ERRORS) or a file that cannot be read (OSError) inside ends the
  program with its one line (`fail`); a closed stdout (BrokenPipeError, an OSError too) goes
  on to the dispatcher, which exits quietly, and a stop request to `start`'s wrapper."""
  try:
    yield
  except BrokenPipeError:
    raise
  except (*USER_ERRORS, OSError) as error:
    fail(error)


def fail(error: Exception | str) -> None:
  """Exits with status 2 after one line naming the mistake."""
  print(f'error: {error}', file=sys.stderr)
  sys.exit(2)


def stop_interrupted(message: str) -> None:
  """Exits with INTERRUPTED_EXIT_STATUS after saying how to resume."""
  print(message, file=sys.stderr)
  sys.exit(INTERRUPTED_EXIT_STATUS)


def disk_full(error: BaseException) -> bool:
  """Whether `error` (or what caused it: Orbax wraps the OSError) is a full disk."""
  while error is not None:
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
      return True
    if 'No space left on device' in str(error):
      return True
    error = error.__cause__ or error.__context__
  return False
