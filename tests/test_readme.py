"""README's commands, run as written: every line of every ```sh block after the first (the
set-up commands, which .ci/run runs) and every ```python block, in order, in one fresh temporary current directory, by
bash, each to status 0 with no traceback. A new README command is a new test here.

The small corpora are put at the paths README names (data/ptb, data/wikitext-2, my_book.txt,
letter.txt); HOME is a temporary directory, so TFDS's default data dir (~/tensorflow_datasets)
is too; `nplm` and `python` on PATH are wrappers that run the command through
tests/readme_substitutions.py, which gives Brown the tiny fixture corpus and serves TFDS
catalogue downloads from local files (its docstring says exactly what it replaces). `python -m
experiments.…` finds the checkout's experiments package as it would from the checkout.

Lines not run are matched by NOT_RUN below, each with why; test_not_run_patterns_are_current
keeps that list honest.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests import tfds_offline
from tests.conftest import write_text_corpus

ROOT = Path(__file__).parent.parent
README = ROOT / 'README.md'

NOT_RUN = {
    r'^pip install ': 'installs packages: .ci/run installs requirements.txt in a fresh venv '
                      'and tests/test_package.py checks the wheel',
    r'\.\.\.': 'a placeholder to fill in (the coordinator of a multi-host run)',
    r'-m experiments\.benchmarks\.': 'a benchmark (minutes): tests/test_*benchmark.py run '
                                     'each on tiny shapes',
    r'--flagfile=transformer_gpu\b': "a GPU's recipe (6 layers, 512 wide): minutes a step on "
                                      '2 CPU cores; tests/test_transformer.py covers the model',
}


def readme_lines() -> list[str]:
  """The commands of README's ```sh blocks (a line each) and ```python blocks (a block each,
  run as `python -c BLOCK`), in README's order."""
  blocks = re.findall(r'^```(sh|python)\n(.*?)^```', README.read_text(), re.S | re.M)
  commands = []
  for index, (language, text) in enumerate(blocks):
    if language == 'python':
      commands.append(f'python -c {shlex.quote(text)}')
    elif index:  # The first block: the set-up commands, which .ci/run runs.
      commands += [line.strip() for line in text.splitlines()
                   if line.strip() and not line.strip().startswith('#')]
  return commands


def not_run_reason(line: str) -> str | None:
  return next((why for pattern, why in NOT_RUN.items() if re.search(pattern, line)), None)


COMMANDS = [line for line in readme_lines() if not_run_reason(line) is None]


def write_wrappers(bin_dir: Path) -> None:
  bin_dir.mkdir()
  real = sys.executable
  scripts = {
      'nplm': f'exec {real} -m tests.readme_substitutions nplm "$@"\n',
      'python': (f'case "$1" in -m|-c) exec {real} -m tests.readme_substitutions "$@";; '
                 f'esac\nexec {real} "$@"\n'),
  }
  for name, body in scripts.items():
    (bin_dir / name).write_text('#!/bin/bash\n' + body)
    (bin_dir / name).chmod(0o755)


def write_corpora(cwd: Path) -> None:
  """The files README's commands name, small."""
  ptb = write_text_corpus(cwd / 'data' / 'ptb')
  wikitext = cwd / 'data' / 'wikitext-2'
  wikitext.mkdir(parents=True)
  for split in ('train', 'valid', 'test'):
    lines = (ptb / f'{split}.txt').read_text().splitlines()
    (wikitext / f'wiki.{split}.tokens').write_text(
        ''.join(line.lower() + '\n' for line in reversed(lines)))
  words = ' '.join((ptb / f'{split}.txt').read_text() for split in ('train', 'valid')).split()
  (cwd / 'my_book.txt').write_text(''.join(' '.join(words[i:i + 8]) + '\n'
                                           for i in range(0, len(words), 8)))
  (cwd / 'letter.txt').write_text('Dear jury, the county said it was fine.\n'
                                  'The election was held in Atlanta.\n')


@pytest.fixture(scope='module')
def user_machine(tmp_path_factory):
  """A current directory with README's corpora, and the environment the commands run in."""
  root = tmp_path_factory.mktemp('readme')
  cwd, home = root / 'work', root / 'home'
  cwd.mkdir()
  home.mkdir()
  write_corpora(cwd)
  write_wrappers(root / 'bin')
  env = {**os.environ, 'HOME': str(home), 'PATH': f'{root / "bin"}:{os.environ["PATH"]}',
         'PYTHONPATH': str(ROOT), 'PYTHONUNBUFFERED': '1'}
  env.pop('TFDS_DATA_DIR', None)
  tfds_offline.seed_downloads(home / 'tensorflow_datasets')
  return cwd, env


@pytest.mark.parametrize('command', COMMANDS)
def test_readme_command(user_machine, command):
  cwd, env = user_machine
  result = subprocess.run(['bash', '-c', command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
  output = result.stdout + result.stderr
  assert result.returncode == 0, f'{command}\n{output[-3000:]}'
  assert 'Traceback' not in output, f'{command}\n{output[-3000:]}'


def test_not_run_patterns_are_current():
  """Each pattern still matches a README line, and the run lines are most of README's."""
  lines = readme_lines()
  for pattern in NOT_RUN:
    assert any(re.search(pattern, line) for line in lines), pattern
  assert len(COMMANDS) >= 0.7 * len(lines)
