"""The commands of README.md and of every page of docs/, run as written: every line of every
```sh block (README's first excepted: the set-up commands, which .ci/run runs) and every
```python block, page by page. Each page's commands run in order, in a fresh temporary
current directory of the page's own, by bash, each to status 0 with no traceback. A new
command in README or docs/ is a new test here.

The small corpora are put at the paths the pages name (data/ptb, data/wikitext-2, my_book.txt,
letter.txt); HOME is a temporary directory, so TFDS's default data dir (~/tensorflow_datasets)
is too; `nplm` and `python` on PATH are wrappers that run the command through
tests/readme_substitutions.py, which gives Brown the tiny fixture corpus and serves TFDS
catalogue downloads from local files (its docstring says exactly what it replaces), each in a
child forked by the page's tests/prewarmed.py server, its imports paid once. `python -m
experiments.…` finds the checkout's experiments package as it would from the checkout.

Lines not run are matched by NOT_RUN below, each with why; test_not_run_patterns_are_current
keeps that list honest. test_relative_links_resolve checks the links of README, WORKSPACE and
docs/ (files, and the headings that anchors name).
"""

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import tfds_offline
from tests.conftest import write_text_corpus

ROOT = Path(__file__).parent.parent
README = ROOT / 'README.md'
# README first, then docs/'s pages: each runs on its own, in a directory of its own.
PAGES = [README, *sorted((ROOT / 'docs').glob('*.md'))]

NOT_RUN = {
    r'^pip install ': 'installs packages: .ci/run installs requirements-test.txt in a fresh venv '
                      'and tests/test_package.py checks the wheel',
    r'\.\.\.': 'a placeholder to fill in (the coordinator of a multi-host run)',
    r'-m experiments\.benchmarks\.': 'a benchmark (minutes): tests/test_*benchmark.py run '
                                     'each on tiny shapes',
    r'^nplm serve\b': 'a server, running until stopped: tests/test_serve.py starts it as '
                     'docs/serving.md does',
    r'^curl ': "a client of nplm serve: tests/test_serve.py runs docs/serving.md's curl lines "
               'against the server it starts',
    r'--flagfile=transformer_gpu\b': "a GPU's recipe (6 layers, 512 wide): minutes a step on "
                                      '2 CPU cores; tests/test_transformer.py covers the model',
}


def page_name(page: Path) -> str:
  return page.relative_to(ROOT).as_posix()


def page_lines(page: Path) -> list[str]:
  """The commands of a page's ```sh blocks (a line each) and ```python blocks (a block each,
  run as `python -c BLOCK`), in the page's order."""
  blocks = re.findall(r'^```(sh|python)\n(.*?)^```', page.read_text(), re.S | re.M)
  commands = []
  for index, (language, text) in enumerate(blocks):
    if language == 'python':
      commands.append(f'python -c {shlex.quote(text)}')
    elif index or page != README:  # README's first block: the set-up, which .ci/run runs.
      commands += [line.strip() for line in text.splitlines()
                   if line.strip() and not line.strip().startswith('#')]
  return commands


def all_lines() -> list[str]:
  return [line for page in PAGES for line in page_lines(page)]


def not_run_reason(line: str) -> str | None:
  return next((why for pattern, why in NOT_RUN.items() if re.search(pattern, line)), None)


COMMANDS = [pytest.param(page_name(page), line, id=f'{page_name(page)} {line}')
            for page in PAGES for line in page_lines(page) if not_run_reason(line) is None]
# The test file that runs each page's commands: pytest-xdist runs a file on one worker, so
# the pages (minutes of programs each) are spread over files that the workers share out.
PAGE_FILES = {
    'README.md': 'test_readme.py',
    'docs/devices-and-launch.md': 'test_readme.py',
    'docs/reliability.md': 'test_readme.py',
    'docs/using-a-model.md': 'test_docs_using_a_model.py',
    'docs/models-and-heads.md': 'test_docs_models_and_heads.py',
    'docs/datasets-and-tokenizers.md': 'test_docs_datasets.py',
    'docs/reproducing-the-papers.md': 'test_docs_reproducing.py',
}


def commands_of(test_file: str) -> list:
  """The commands of the pages that PAGE_FILES gives to `test_file` (its __file__)."""
  name = Path(test_file).name
  return [command for command in COMMANDS if PAGE_FILES.get(command.values[0]) == name]


def write_wrappers(bin_dir: Path, server: Path) -> None:
  """`nplm` and `python -m|-c` on PATH: the command run by the page's server (`server`, its
  socket; tests/prewarmed.py)."""
  bin_dir.mkdir()
  real, client = sys.executable, f'{sys.executable} -m tests.prewarmed {server}'
  scripts = {
      'nplm': f'exec {client} nplm "$@"\n',
      'python': f'case "$1" in -m|-c) exec {client} "$@";; esac\nexec {real} "$@"\n',
  }
  for name, body in scripts.items():
    (bin_dir / name).write_text('#!/bin/bash\n' + body)
    (bin_dir / name).chmod(0o755)


def write_corpora(cwd: Path) -> None:
  """The files the pages' commands name, small."""
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


def user_machine(root: Path) -> tuple[Path, dict]:
  """A current directory with the pages' corpora, and the environment the commands run in
  (their server's socket: root/prewarmed)."""
  cwd, home = root / 'work', root / 'home'
  cwd.mkdir()
  home.mkdir()
  write_corpora(cwd)
  write_wrappers(root / 'bin', root / 'prewarmed')
  env = {**os.environ, 'HOME': str(home), 'PATH': f'{root / "bin"}:{os.environ["PATH"]}',
         'PYTHONPATH': str(ROOT), 'PYTHONUNBUFFERED': '1'}
  env.pop('TFDS_DATA_DIR', None)
  tfds_offline.seed_downloads(home / 'tensorflow_datasets')
  return cwd, env


@pytest.fixture(scope='module')
def machine_of(tmp_path_factory):
  """A page's user machine, made when its first command runs: a fresh one per page, with its
  server (tests/prewarmed.py), ended with the module."""
  machines, servers = {}, []

  def machine(page: str) -> tuple[Path, dict]:
    if page not in machines:
      root = tmp_path_factory.mktemp(re.sub(r'\W+', '_', page))
      machines[page] = cwd, env = user_machine(root)
      servers.append(subprocess.Popen(
          [sys.executable, '-m', 'tests.prewarmed', 'serve', str(root / 'prewarmed')],
          cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
      while not (root / 'prewarmed').exists() and servers[-1].poll() is None:
        time.sleep(0.01)  # Bound: the commands wait for its imports, not for its start.
    return machines[page]

  yield machine
  for server in servers:
    server.terminate()
    server.wait()


def run_page_command(machine_of, page: str, command: str) -> None:
  """`command` run by bash in `page`'s user machine: status 0, no traceback."""
  cwd, env = machine_of(page)
  result = subprocess.run(['bash', '-c', command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
  output = result.stdout + result.stderr
  assert result.returncode == 0, f'{page}: {command}\n{output[-3000:]}'
  assert 'Traceback' not in output, f'{page}: {command}\n{output[-3000:]}'


@pytest.mark.slow
@pytest.mark.parametrize('page, command', commands_of(__file__))
def test_page_command(machine_of, page, command):
  run_page_command(machine_of, page, command)


def test_every_page_with_commands_has_a_test_file():
  pages = {page_name(page) for page in PAGES
           if any(not_run_reason(line) is None for line in page_lines(page))}
  assert pages <= set(PAGE_FILES), f'add {sorted(pages - set(PAGE_FILES))} to PAGE_FILES'
  assert all((Path(__file__).parent / name).exists() for name in PAGE_FILES.values())


def test_not_run_patterns_are_current():
  """Each pattern still matches a line of README or docs/, and the run lines are most of
  theirs."""
  lines = all_lines()
  for pattern in NOT_RUN:
    assert any(re.search(pattern, line) for line in lines), pattern
  assert len(COMMANDS) >= 0.7 * len(lines)


def prose(page: Path) -> str:
  """A page without its fenced blocks."""
  kept, fenced = [], False
  for line in page.read_text().splitlines():
    if re.fullmatch(r'```[\w-]*\s*', line):
      fenced = not fenced
    elif not fenced:
      kept.append(line)
  return '\n'.join(kept)


def slug(heading: str) -> str:
  """A heading's anchor as GitHub makes it."""
  heading = re.sub(r'[^\w\- ]', '', heading.strip().lower())
  return heading.replace(' ', '-')


def anchors(page: Path) -> set[str]:
  return {slug(heading) for heading in re.findall(r'^#+ (.*)$', prose(page), re.M)}


def test_relative_links_resolve():
  """Every relative link of README, WORKSPACE and docs/ names a file that is there, and an
  anchor a heading of its page."""
  broken = []
  for page in [README, ROOT / 'WORKSPACE.md', *sorted((ROOT / 'docs').glob('*.md'))]:
    for target in re.findall(r'\]\(([^)\s]+)\)', prose(page)):
      if re.match(r'[a-z]+:', target):
        continue
      path, _, anchor = target.partition('#')
      linked = (page.parent / path).resolve() if path else page
      if not linked.exists():
        broken.append(f'{page_name(page)}: {target}')
      elif anchor and linked.suffix == '.md' and anchor not in anchors(linked):
        broken.append(f'{page_name(page)}: {target} (no such heading)')
  assert not broken, broken
