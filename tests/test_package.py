"""nplm as installed: the wheel holds the recipes, the paper's Table 1, word2vec's C++ source
and the `nplm` command (built here, not installed), and `nplm --version` names the installed
version."""

import importlib.metadata
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import nplm
from nplm import recipes
from nplm import console
from nplm.training import word2vec_native
from tests import cli

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
  # word2vec's C++ update, built where it runs: its source and what that #includes.
  native = {path.relative_to(ROOT).as_posix() for path in (word2vec_native.SOURCE,
                                                           *word2vec_native.HEADERS)}
  assert native <= names, sorted(native - names)
  included = {name for path in (word2vec_native.SOURCE, *word2vec_native.HEADERS)
              for name in re.findall(r'#include "(word2vec_[^"]+)"', path.read_text())}
  assert included == {path.name for path in word2vec_native.HEADERS}  # The build's key.
  assert not any(name.startswith(('experiments/', 'tests/')) for name in names)
  assert 'nplm = nplm.console:main' in entry_points.splitlines()
  assert f'Version: {nplm.__version__}' in metadata.splitlines()
  extras = {line.split(': ')[1] for line in metadata.splitlines()
            if line.startswith('Provides-Extra: ')}
  assert {'test', 'tensorboard', 'gpu', 'tpu'} <= extras


def test_version_names_the_installed_package(monkeypatch, capsys):
  version = importlib.metadata.version('nplm')
  assert nplm.__version__ == version
  result = cli.run('--version')
  assert (result.returncode, result.stdout, result.stderr) == (0, f'nplm {version}\n', '')
  monkeypatch.setattr(sys, 'argv', ['nplm', '-V'])
  with pytest.raises(SystemExit) as exit:
    console.main()
  assert exit.value.code == 0 and capsys.readouterr().out == f'nplm {version}\n'


def test_python_dash_m_nplm_and_nplm_help_command_are_the_command_and_its_help():
  """`python -m nplm` where the script is not on PATH; `nplm help train` as git's habit has it:
  the same output as `nplm train --help`, and a mistyped command's one line either way."""
  version = cli.run('--version', module='nplm')
  assert (version.returncode, version.stdout) == (0, f'nplm {nplm.__version__}\n')
  helped, asked = cli.run('help', 'train'), cli.run('train', '--help', module='nplm')
  assert helped.returncode == asked.returncode == 0
  assert helped.stdout == asked.stdout and '--flagfile' in helped.stdout
  mistyped = cli.run('help', 'trian')
  assert mistyped.returncode == 2 and mistyped.stderr.startswith(
      "error: unknown command 'trian'; did you mean 'train'?")


HEAVY = {'jax', 'flax', 'optax', 'orbax', 'tensorflow_datasets', 'absl', 'torch'}


@pytest.mark.parametrize('args,status,says', [
    (['--version'], 0, 'nplm '), (['--help'], 0, 'usage: nplm <command>'),
    (['trian'], 2, "error: unknown command 'trian'; did you mean 'train'?")])
def test_the_installed_command_answers_at_once_without_jax(args, status, says, tmp_path):
  """`nplm --version`, `--help` and a mistyped command took 7 s on a 2-core machine, the
  import of JAX, Flax, Orbax and TFDS for nothing: Python's import log says what they load."""
  script = Path(sys.executable).with_name('nplm')
  assert script.exists(), f'{script}: nplm is not installed beside {sys.executable}'
  result = subprocess.run([sys.executable, '-X', 'importtime', str(script), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
  logged = [line for line in result.stderr.splitlines() if line.startswith('import time:')]
  imported = {line.split('|')[-1].strip().split('.')[0] for line in logged[1:]}
  errors = ''.join(f'{line}\n' for line in result.stderr.splitlines() if line not in logged)
  assert result.returncode == status and says in result.stdout + errors, result.stderr[-2000:]
  assert 'nplm' in imported
  assert not imported & HEAVY, f'{args} imported {sorted(imported & HEAVY)}'


# The package's layers, lower first (docs/architecture.md's file map): a module imports only
# from its own layer or lower ones, so data flows one way and any layer can be read without
# the ones above it.
LAYERS = (
    ('errors', 'knobs', 'paths', 'files', 'components', 'display', 'perplexity', 'parallel',
     'stop_requests', 'sparse_rows', 'precision', 'config', 'recipes', 'flagfiles',
     'host_memory'),
    ('data',),
    ('models', 'heads', 'lm', 'ngram'),
    ('run_files',),
    ('training',),
    ('trainer',),
    ('use',),
    ('api',),
    ('studies',),
    ('serve',),
    # The `nplm` command, `python -m nplm` and `python -m nplm.cli`: one dispatcher.
    ('cli', 'console', '__main__'),
)
# The config names the registries' entries in its help (nplm.models, nplm.heads: names and
# import paths, no component imported) and asks the dataset's source for its defaults
# (Config.resolved, lazily): the one place a lower layer reaches up.
ASKED_BY_CONFIG = {'models', 'heads', 'data'}


def _layer(module: str) -> int:
  top = module.split('.')[1]
  layers = [i for i, names in enumerate(LAYERS) if top in names]
  assert layers, f'{module} is in no layer: add nplm.{top} to LAYERS and docs/architecture.md'
  return layers[0]


def _imported(path: Path, module: str):
  """(line, nplm module) of every import in the file, at any depth."""
  import ast
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      # 'from nplm.data import corpus' imports nplm.data.corpus; 'from nplm.data.corpus
      # import SPLITS' is owned by nplm.data.corpus (test_no_import_circle's owner()).
      names = [f'{node.module}.{alias.name}' for alias in node.names]
    elif isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    else:
      continue
    yield from ((node.lineno, name) for name in names if name.startswith('nplm.'))


def _module_name(path: Path, package: Path) -> str:
  parts = path.relative_to(package.parent).with_suffix('').parts
  return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def test_no_import_circle():
  """No module reaches itself through imports at any depth (a circle: each of its modules
  can be read only with all the others). Tarjan's strongly connected components."""
  package = Path(nplm.__file__).parent
  modules = {_module_name(path, package): path for path in package.rglob('*.py')}

  def owner(name: str) -> str:  # 'nplm.data.corpus.SPLITS' -> 'nplm.data.corpus'
    while name not in modules:
      name = name.rpartition('.')[0]
    return name

  graph = {module: {owner(name) for _, name in _imported(path, module)} - {module, 'nplm'}
           for module, path in modules.items()}
  index, low, stack, circles = {}, {}, [], []

  def visit(module: str) -> None:
    index[module] = low[module] = len(index)
    stack.append(module)
    for other in graph[module]:
      if other not in index:
        visit(other)
        low[module] = min(low[module], low[other])
      elif other in stack:
        low[module] = min(low[module], index[other])
    if low[module] == index[module]:
      component = stack[stack.index(module):]
      del stack[stack.index(module):]
      if len(component) > 1:
        circles.append(sorted(component))

  for module in sorted(graph):
    if module not in index:
      visit(module)
  assert circles == []


def test_no_module_imports_from_a_higher_layer():
  package = Path(nplm.__file__).parent
  upward = []
  for path in sorted(package.rglob('*.py')):
    parts = path.relative_to(package.parent).with_suffix('').parts
    module = '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)
    if module == 'nplm':
      continue
    for line, imported in _imported(path, module):
      allowed = module == 'nplm.config' and imported.split('.')[1] in ASKED_BY_CONFIG
      if _layer(imported) > _layer(module) and not allowed:
        upward.append(f'{path.relative_to(package.parent)}:{line} imports {imported}')
  assert upward == []
