"""What README's commands meet in the suite (tests/test_readme.py) in place of what a user's
machine has, installed in the child process by the `nplm` and `python` wrappers the test
writes first on PATH:

- Brown: the tiny fixture (tests/fixtures/brown_tiny: 5 of the 500 files) instead of the real
  corpus, cut 420 / 120 / the rest (conftest.TINY_SPLIT) instead of 800,000 / 200,000;
- TFDS catalogue datasets: their downloads served from small local files that the test put
  in the TFDS download cache of ~/tensorflow_datasets (tests/tfds_offline.py), the builders
  themselves TFDS's own; a download from the network is an error.

Everything else is README's: the command and its flags as written, its relative paths, the
current directory (a fresh temporary one), `nplm` and `python -m` as the entry points.

  wrapper-nplm ARGS...       ->  python -m tests.readme_substitutions nplm ARGS...
  wrapper-python -m MOD ...  ->  python -m tests.readme_substitutions -m MOD ...
  wrapper-python -c CODE ... ->  python -m tests.readme_substitutions -c CODE ...
  (launch.local's processes are started the same way)
"""

import runpy
import sys


def install() -> None:
  from nplm.data import brown, brown_source
  from tests.conftest import FIXTURE_DIR, FIXTURE_FILES, FIXTURE_WORDS, TINY_SPLIT
  brown_source.PAPER_SPLIT.update(TINY_SPLIT)  # The Brown source's default split.
  load_texts = brown.load_texts

  def tiny_brown(data_dir=None, corpus_dir=None, expected_words=None, expected_files=None):
    del corpus_dir, expected_words, expected_files  # The real corpus's.
    return load_texts(data_dir, FIXTURE_DIR, FIXTURE_WORDS, FIXTURE_FILES)

  brown.load_texts = tiny_brown
  from tests import tfds_offline
  tfds_offline.forbid_downloads()


def _launch_local(args: list[str]) -> int:
  """launch.local, its processes started through this module too."""
  from launch import local
  command_lines = local.command_lines

  def substituted(*given, **named):
    return [[python, '-m', 'tests.readme_substitutions', *rest]
            for python, *rest in command_lines(*given, **named)]

  local.command_lines = substituted
  return local.main(args)


def main() -> None:
  install()
  if sys.argv[1] == 'nplm':
    from nplm.console import main as nplm_main
    sys.argv = sys.argv[1:]
    nplm_main()
  elif sys.argv[1:3] == ['-m', 'launch.local']:
    sys.exit(_launch_local(sys.argv[3:]))
  elif sys.argv[1] in ('-c', '-m'):
    run_python(sys.argv[1:])
  else:
    raise SystemExit(f'readme_substitutions: unexpected arguments {sys.argv[1:]}')


def run_python(argv: list[str]) -> None:
  """`python -c CODE ARGS` or `python -m MODULE ARGS` (argv: from -c or -m on), run here."""
  if argv[0] == '-c':
    sys.argv = ['-c', *argv[2:]]
    exec(compile(argv[1], '<string>', 'exec'), {'__name__': '__main__'})
    return
  sys.argv = argv[1:]
  # Preloaded (tests/prewarmed.py), it would be run again as __main__ with runpy's warning.
  sys.modules.pop(f'{argv[1]}.__main__', None)
  runpy.run_module(argv[1], run_name='__main__', alter_sys=True)


if __name__ == '__main__':
  main()
