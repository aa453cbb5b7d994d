"""nplm as installed: the wheel holds the recipes, the paper's Table 1 and the `nplm` command
(built here, not installed), and `nplm --version` names the installed version."""

import importlib.metadata
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import nplm
from nplm import recipes
from nplm.cli import __main__ as cli_main

ROOT = Path(__file__).parent.parent


def _ignored(directory: str, names: list[str]) -> list[str]:
  return [name for name in names if name == '__pycache__' or name.endswith('.egg-info')]


def test_the_wheel_holds_the_recipes_the_table_and_the_command(tmp_path):
  pytest.importorskip('setuptools')
  source = tmp_path / 'source'  # A copy: building writes build/ and nplm.egg-info there.
  source.mkdir()
  for name in ('pyproject.toml', 'README.md'):
    shutil.copy(ROOT / name, source / name)
  shutil.copytree(ROOT / 'nplm', source / 'nplm', ignore=_ignored)
  result = subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--quiet', '--no-deps',
                           '--no-build-isolation', '--wheel-dir', str(tmp_path / 'wheel'),
                           str(source)], capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr
  [wheel] = (tmp_path / 'wheel').glob('nplm-*.whl')
  with zipfile.ZipFile(wheel) as archive:
    names = set(archive.namelist())
    info = next(name.split('/')[0] for name in names if name.endswith('.dist-info/METADATA'))
    entry_points = archive.read(f'{info}/entry_points.txt').decode()
    metadata = archive.read(f'{info}/METADATA').decode()
    recipe = archive.read('nplm/recipes/mlp9.flags')
  shipped = {Path(name).stem for name in names if name.startswith('nplm/recipes/')
             and name.endswith('.flags')}
  assert shipped == set(recipes.names()) and {'fast', 'mlp1', 'mlp9'} <= shipped
  assert recipe == (recipes.DIRECTORY / 'mlp9.flags').read_bytes()
  assert 'nplm/reference/bengio2003_table1.csv' in names
  sources = {path.relative_to(ROOT).as_posix() for path in (ROOT / 'nplm').rglob('*.py')}
  assert sources <= names, sorted(sources - names)  # Every module (nplm.cli.sweep, ...).
  assert not any(name.startswith(('experiments/', 'tests/')) for name in names)
  assert 'nplm = nplm.cli.__main__:main' in entry_points.splitlines()
  assert f'Version: {nplm.__version__}' in metadata.splitlines()
  extras = {line.split(': ')[1] for line in metadata.splitlines()
            if line.startswith('Provides-Extra: ')}
  assert {'test', 'tensorboard', 'gpu', 'tpu'} <= extras


def test_version_names_the_installed_package(monkeypatch, capsys):
  version = importlib.metadata.version('nplm')
  assert nplm.__version__ == version
  result = subprocess.run([sys.executable, '-m', 'nplm.cli', '--version'], capture_output=True,
                          text=True, timeout=300)
  assert (result.returncode, result.stdout, result.stderr) == (0, f'nplm {version}\n', '')
  monkeypatch.setattr(sys, 'argv', ['nplm', '-V'])
  with pytest.raises(SystemExit) as exit:
    cli_main.main()
  assert exit.value.code == 0 and capsys.readouterr().out == f'nplm {version}\n'

