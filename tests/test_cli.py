"""`nplm train` (`python -m experiments.train`): one-line errors for user mistakes, flagfiles
(recipes by name, typed flags winning, bad files), the Python API, and a smoke run on the
real Brown corpus."""

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nplm import recipes, trainer
from nplm.flagfiles import config_from_flagfile
from nplm.config import ConfigError
from tests import cli
from tests.conftest import write_text_corpus
from tests.test_train import tiny_config

ROOT = Path(__file__).parent.parent


def run_cli(*flags: str, timeout: int = 300) -> subprocess.CompletedProcess:
  return cli.run(*flags, module='experiments.train', timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess, *phrases: str) -> None:
  assert result.returncode == 2, result.stderr
  assert 'Traceback' not in result.stderr, result.stderr
  errors = [line for line in result.stderr.splitlines() if line.startswith('error: ')]
  assert len(errors) == 1 and result.stderr.rstrip().endswith(errors[0]), result.stderr
  for phrase in phrases:
    assert phrase in errors[0]


def test_the_suites_commands_run_in_children_of_the_workers_server(monkeypatch):
  """tests/cli.py's commands are forked by its server, which paid the imports once: pytest's
  per-test variable PYTEST_CURRENT_TEST once sent every one to a fresh Python (7 s each), and
  so did the variables torch and tensorboardX set in the worker, once a PyTorch peer's test
  compiles and once a test's run writes its events."""
  first = cli.run(code='import os; print(os.getppid())')
  # As they do, to values the session did not start with.
  monkeypatch.setenv('TORCHINDUCTOR_CACHE_DIR', '/tmp/torchinductor_tests')
  monkeypatch.setenv('CRC32C_SW_MODE', 'none' if os.environ.get('CRC32C_SW_MODE') else 'auto')
  second = cli.run(code='import os; print(os.getppid(), os.environ["TORCHINDUCTOR_CACHE_DIR"])')
  assert first.returncode == second.returncode == 0, first.stderr + second.stderr
  assert first.stdout.split() == [str(cli.server_pid())]
  assert second.stdout.split() == [str(cli.server_pid()), '/tmp/torchinductor_tests']


def test_invalid_flags_give_one_clear_line(tmp_path):
  result = run_cli('--flagfile=mlp9', '--order=1', f'--workdir={tmp_path}/run')
  assert_one_line_error(result, '--order must be at least 2')
  assert not (tmp_path / 'run').exists()


def test_a_missing_corpus_gives_one_clear_error(tmp_path):
  result = run_cli(f'--corpus_dir={tmp_path}/nowhere', f'--data_dir={tmp_path}/tfds',
                   f'--workdir={tmp_path}/run', '--max_steps=1')
  assert_one_line_error(result, str(tmp_path / 'nowhere'))


@pytest.mark.slow
def test_python_api_returns_the_summary(tiny_corpus, tmp_path):
  summary = trainer.run(tiny_config(tmp_path / 'run', epochs=1), tiny_corpus)
  assert summary['status'] == 'epochs_done' and summary['epochs'] == 1
  assert json.loads((tmp_path / 'run' / 'summary.json').read_text())['test_ppl'] == (
      summary['test_ppl'])
  assert (tmp_path / 'run' / 'learning_curve.png').read_bytes().startswith(b'\x89PNG')


def test_flagfiles_hold_the_table1_shapes():
  shapes = {'mlp1': (5, 50, 60, 'true'), 'mlp3': (5, 0, 60, 'true'), 'mlp5': (5, 50, 30, 'true'),
            'mlp7': (3, 50, 30, 'true'), 'mlp9': (5, 100, 30, 'false')}
  for row, (order, hidden, features, direct) in shapes.items():
    lines = (recipes.DIRECTORY / f'{row}.flags').read_text().splitlines()
    for flag in (f'--order={order}', f'--hidden_size={hidden}', f'--feature_size={features}',
                 f'--direct={direct}'):
      assert flag in lines, (row, flag)


# Parses each argv as `nplm train` does (cli._parse_flags on the global flags) and prints
# the Config fields it sets; one process for every case.
_PARSE = '''
import json, sys
from absl import flags
from nplm import cli, flagfiles
flagfiles.define_config_flags()
for argv in json.loads(sys.argv[1]):
  cli._parse_flags(['nplm train', *argv])
  config = cli.config_from_flags()
  print(json.dumps([config.workdir, config.order, config.epochs]))
  flags.FLAGS.unparse_flags()
'''


def test_a_typed_flag_wins_over_a_flagfiles_wherever_it_stands(tmp_path):
  """Every recipe sets --workdir; absl alone would let the flagfile's win when it comes
  after the typed one (`--workdir=runs/mine --flagfile=...` trained into runs/cbow_ns)."""
  mine = tmp_path / 'mine.flags'
  mine.write_text('# a recipe, changed\n--flagfile=mlp9\n--epochs=7\n')
  cases = {  # argv: (workdir, order, epochs)
      ('--workdir=runs/mine', '--flagfile=cbow_ns'): ['runs/mine', 5, 5],
      ('--flagfile=cbow_ns', '--workdir=runs/mine'): ['runs/mine', 5, 5],
      ('--flagfile=cbow_ns',): ['runs/cbow_ns', 5, 5],
      # Later flagfiles win over earlier ones; typed flags over both, either form.
      ('--epochs=3', '--flagfile', 'fast', '--flagfile=mlp9'): ['runs/mlp9', 5, 3],
      ('--order=4', f'--flagfile={mine}'): ['runs/mlp9', 4, 7],
      (f'--flagfile={mine}', '--epochs=2', '--workdir=w'): ['w', 5, 2],
  }
  result = cli.run(json.dumps(list(cases)), code=_PARSE, cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  parsed = [json.loads(line) for line in result.stdout.splitlines()]
  assert dict(zip(cases, parsed)) == cases


@pytest.mark.slow
def test_nplm_train_applies_a_typed_flag_before_the_flagfile(tmp_path):
  """--order=1 typed before a recipe that sets --order=5 is the one validated."""
  result = subprocess.run(
      [sys.executable, '-m', 'nplm.cli', 'train', '--order=1', '--flagfile=mlp9',
       f'--corpus_dir={tmp_path}/nowhere', f'--data_dir={tmp_path}/tfds',
       f'--workdir={tmp_path}/run'], cwd=tmp_path, capture_output=True, text=True, timeout=300)
  assert_one_line_error(result, '--order must be at least 2')


def test_recipes_are_found_by_name_and_a_file_by_its_path(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  mlp9 = config_from_flagfile(recipes.DIRECTORY / 'mlp9.flags')
  assert mlp9.order == 5 and mlp9.hidden_size == 100 and not mlp9.direct
  assert config_from_flagfile('mlp9') == config_from_flagfile('mlp9.flags') == mlp9
  assert {'fast', 'mlp1', 'mlp9', 'lstm', 'cbow_ns'} <= set(recipes.names())
  # A file of that name in the current directory comes first (a directory does not); other
  # paths are relative to the current directory.
  (tmp_path / 'fast').mkdir()
  assert config_from_flagfile('fast').workdir == 'runs/fast'
  (tmp_path / 'mlp9').write_text('--order=4\n')
  (tmp_path / 'sub').mkdir()
  (tmp_path / 'sub' / 'x.flags').write_text('--flagfile=fast\n--epochs=9\n')
  assert config_from_flagfile('mlp9').order == 4
  nested = config_from_flagfile('sub/x.flags')
  assert (nested.order, nested.epochs, nested.workdir) == (3, 9, 'runs/fast')
  with pytest.raises(ConfigError, match=r'--flagfile=sub/mlp9: no such file \(recipes: '):
    config_from_flagfile('sub/mlp9')


@pytest.mark.slow
def test_missing_and_binary_flagfiles_are_one_line_errors(tmp_path):
  """Before: `error: ERROR:: Unable to open flagfile: [Errno 2] ...`, and a
  UnicodeDecodeError traceback (status 1)."""
  (tmp_path / 'binary.flags').write_bytes(b'\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR')
  known = ', '.join(recipes.names())
  cases = {'nope': f'error: --flagfile=nope: no such file (recipes: {known})',
           'binary.flags': 'error: --flagfile=binary.flags: not a text file of flags '
                           '(byte 0x89 at offset 0)'}
  running = {name: cli.start('train', f'--flagfile={name}', f'--workdir={tmp_path}/run',
                             cwd=tmp_path) for name in cases}
  for name, process in running.items():
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 2, (name, stderr)
    assert stderr.splitlines() == [cases[name]], (name, stderr)
  assert not (tmp_path / 'run').exists()


@pytest.mark.parametrize('name, content, message', [
    ('runs/mlp9.flags', None, r'--flagfile=runs/mlp9.flags: no such file \(recipes: cbow_hs, '),
    ('nul.flags', b'--epochs=1\n\x00\n', r'not a text file of flags \(byte 0x00 at offset 11\)'),
    ('latin1.flags', '# caf\xe9\n'.encode('latin-1'), r'\(byte 0xe9 at offset 5\)'),
    ('.', None, r'--flagfile=\.: cannot be read \(Is a directory\)'),
    ('loop.flags', b'--flagfile=loop.flags\n', '--flagfile=loop.flags includes itself'),
    ('bad.flags', b'--no_such_flag=1\n', r'--flagfile=bad.flags: .*no_such_flag'),
])
def test_every_flagfile_mistake_is_a_config_error_naming_it(tmp_path, monkeypatch, name,
                                                           content, message):
  monkeypatch.chdir(tmp_path)
  if content is not None:
    (tmp_path / name).write_bytes(content)
  with pytest.raises(ConfigError, match=message):
    config_from_flagfile(name)


@pytest.mark.parametrize('command', [
    pytest.param(['-m', 'nplm.cli', 'export', '--help'], marks=pytest.mark.slow),
    [str(Path(sys.executable).with_name('nplm')), '--help']])  # Without JAX: at once.
def test_help_into_a_closed_pipe_ends_without_a_traceback(command):
  """`nplm export --help | head -1`: the reader is gone before the help is written (both
  ends of the pipe closed here at once, so the write fails every time, not by chance)."""
  read_end, write_end = os.pipe()
  process = subprocess.Popen([sys.executable, *command],
                             cwd=ROOT, stdout=write_end, stderr=subprocess.PIPE, text=True)
  os.close(read_end)
  os.close(write_end)
  _, stderr = process.communicate(timeout=300)
  assert stderr == '' and process.returncode == 141, stderr  # 141: as if killed by SIGPIPE.


@pytest.mark.slow  # Reads a quick run.
def test_a_ctrl_c_after_the_output_lets_the_command_end_quietly_with_its_status(quick_runs):
  """A Ctrl-C as soon as a command's whole output has come: the process is then in its
  teardown (JAX's clean-up, about 0.35 s), where it printed a KeyboardInterrupt traceback
  from an atexit callback. Now it ends as it would have: no line on stderr, status 0, the
  output whole. Its own process (cli.start's children skip the teardown), stdout a pipe so
  the output comes at the end, as a user's does."""
  workdir = Path(quick_runs('nnlm').config.workdir)
  for _ in range(2):
    process = subprocess.Popen(
        [sys.executable, str(Path(sys.executable).with_name('nplm')), 'predict',
         f'--workdir={workdir.name}', '--k=2', 'The jury'], cwd=workdir.parent,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [process.stdout.readline() for _ in range(3)]  # The prefix, then 2 tokens.
    process.send_signal(signal.SIGINT)
    rest, stderr = process.communicate(timeout=60)
    assert stderr == '' and process.returncode == 0, stderr
    assert lines[0] == 'The jury\n' and all(lines[1:]) and rest == '', (lines, rest)


@pytest.mark.slow  # A fresh Python importing every command: 7 s.
def test_no_command_imports_pytorch_or_tensorflow_to_start(tmp_path):
  """Every command's module imported with a PyTorch and a TensorFlow that say when they are
  imported (and then fail, as if absent): tensorboardX imports PyTorch where it is installed,
  2 s at every command's start, `--help` included, unless nplm imports it when a run writes."""
  for name in ('torch', 'tensorflow'):
    (tmp_path / name).mkdir()
    (tmp_path / name / '__init__.py').write_text(
        f'import sys\nprint("imported {name}", file=sys.stderr)\nraise ImportError\n')
  code = ('import importlib\nfrom nplm.console import COMMANDS\n'
          'for command in COMMANDS:\n  importlib.import_module(f"nplm.cli.{command}")\n')
  done = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
                        timeout=300, env={**os.environ, 'PYTHONPATH': f'{tmp_path}:{ROOT}'})
  assert done.returncode == 0, done.stderr
  assert 'imported' not in done.stderr, done.stderr


@pytest.mark.slow  # A fresh Python training a few steps: 10 s.
def test_a_run_writes_its_tensorboard_events_without_importing_pytorch(tmp_path):
  """`nplm train` with a PyTorch that says when it is imported: tensorboardX's writer tries to
  import it as it loads (1 s where PyTorch is installed, at every run's start); the run's
  events are written without it, and the PyTorch a user imports afterwards is theirs."""
  (tmp_path / 'torch').mkdir()
  (tmp_path / 'torch' / '__init__.py').write_text(
      'import sys\nprint("imported torch", file=sys.stderr)\nTensor = type("Tensor", (), {})\n')
  corpus = write_text_corpus(tmp_path / 'corpus')
  code = ('import sys\nfrom nplm.console import main\n'
          'try:\n  main()\nexcept SystemExit as done:\n  assert not done.code, done.code\n'
          'import torch\n')
  done = subprocess.run(
      [sys.executable, '-c', code, 'train', f'--dataset=text:{corpus}', '--flagfile=fast',
       '--max_steps=2', '--eval_splits=valid', f'--workdir={tmp_path / "run"}',
       f'--data_dir={tmp_path / "tfds"}'], cwd=tmp_path, capture_output=True, text=True,
      timeout=300, env={**os.environ, 'PYTHONPATH': f'{tmp_path}:{ROOT}'})
  assert done.returncode == 0, done.stderr[-3000:]
  assert done.stderr.count('imported torch') == 1, done.stderr[-3000:]  # The user's import.
  assert done.stderr.rstrip().endswith('imported torch'), done.stderr[-3000:]
  assert list((tmp_path / 'run' / 'tensorboard').glob('events.out.tfevents.*'))


@pytest.mark.slow
def test_real_corpus_smoke_run(real_data_dir, tmp_path):
  """Prepares the real corpus (fetching it once if needed), trains a few steps and scores
  valid and test (train's 800,000 tokens, half its time, are left out: --eval_splits)."""
  data_dir = real_data_dir
  workdir = tmp_path / 'run'
  result = run_cli(f'--data_dir={data_dir}', f'--workdir={workdir}', '--order=3',
                   '--feature_size=8', '--hidden_size=16', '--max_steps=10', '--log_every=1',
                   '--learning_rate=0.03', '--eval_splits=valid,test',
                   '--eval_batch_size=8192', timeout=900)
  assert result.returncode == 0, result.stderr
  summary = json.loads((workdir / 'summary.json').read_text())
  assert summary['status'] == 'max_steps' and summary['steps'] == 10
  assert summary['split_tokens'] == {'train': 800_000, 'valid': 200_000, 'test': 177_359}
  assert summary['tokens'] == {'valid': 200_000, 'test': 177_359}  # The splits scored.
  assert 13_000 < summary['vocab_size'] < 18_000
  # Ten large updates learn at least the unigram frequencies: far below |V|.
  assert math.isfinite(summary['test_ppl']) and summary['test_ppl'] < summary['vocab_size'] / 2
  assert 'perplexity' in result.stdout and 'step 10' in result.stderr


def test_a_mistyped_flag_is_offered_nplms_flags_not_absls():
  """absl alone offers its own flags: --run got "Did you mean: run_with_pdb,
  run_with_profiling ?"."""
  for typed, said in [('--run=runs/mlp9', "Unknown command line flag 'run' (see --help)"),
                      ('--wrkdir=runs/mlp9', "Unknown command line flag 'wrkdir'. Did you mean: "
                                             'workdir ? (see --help)')]:
    done = cli.run('predict', typed, 'the')
    assert done.returncode == 2 and done.stderr.splitlines() == [f'error: {said}'], done.stderr
