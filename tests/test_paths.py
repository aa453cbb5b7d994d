"""Paths as users type them (nplm.paths): relative --workdir, --dataset=text:..., --data_dir,
--out, --plot and --text_file, from the directory they were typed in, from another one, and
after the workdir moved; a run read against its own data only, unless told; one-line errors
for the mistakes met on the way.

One tiny model is trained once, through the Python API with relative paths; every program
is the installed `nplm` in a child process with its current directory set, several run at
once where they only read.
"""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nplm import trainer
from nplm.training import run_checks
from nplm.run_files.saved_params import saved_params
from nplm.cli import mix as mix_program
from nplm.config import Config, ConfigError
from nplm.use.evaluation import dataset_types, own_dataset_types, same_data
from nplm.use.trained import load_trained
from nplm.run_files.lock import prepare_workdir
from tests.conftest import write_text_corpus

NPLM = Path(sys.executable).parent / 'nplm'  # The installed program, as a user runs it.
TINY = dict(order=3, feature_size=8, hidden_size=8, batch_size=8, eval_batch_size=64, epochs=1)
TINY_FLAGS = [f'--{name}={value}' for name, value in TINY.items()]
RUN = 'runs/nnlm'
_LOG_LINE = re.compile(r'\d\d:\d\d:\d\d ')  # nplm's progress lines on stderr.


@pytest.fixture(scope='module')
def here(tmp_path_factory):
  """(directory, summary): data/toy (text:DIR) and runs/nnlm trained on it from that
  directory through the Python API, every path relative."""
  base = tmp_path_factory.mktemp('here')
  write_text_corpus(base / 'data' / 'toy')
  with contextlib.chdir(base):
    summary = trainer.run(Config(dataset='text:data/toy', data_dir='tfds', workdir=RUN, **TINY))
  return base, summary


def start(*args: str, cwd: Path, env=None) -> subprocess.Popen:
  assert NPLM.exists(), f'{NPLM} is not installed (pip install -e .)'
  return subprocess.Popen([str(NPLM), *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def finish(child: subprocess.Popen) -> tuple[int, str, str]:
  stdout, stderr = child.communicate(timeout=300)
  return child.returncode, stdout, stderr


def succeeded(child: subprocess.Popen) -> str:
  code, stdout, stderr = finish(child)
  assert code == 0 and 'Traceback' not in stderr, stderr
  return stdout


def one_line_error(child: subprocess.Popen, phrase: str, status: int = 2,
                   case: str = '') -> str:
  """The last line of stderr (the only one for status 2, an error), which holds `phrase`."""
  code, _, stderr = finish(child)
  lines = stderr.strip().splitlines()
  assert code == status and 'Traceback' not in stderr, (case, stderr)
  assert lines and phrase in lines[-1], (case, stderr)
  assert status != 2 or lines[-1].startswith('error: '), (case, stderr)
  assert all(_LOG_LINE.match(line) for line in lines[:-1]), (case, stderr)  # Progress only.
  return lines[-1]


def assert_own_numbers(results: dict, summary: dict) -> None:
  """evaluate --json gave the trained model's own exact numbers on its own data."""
  for split in ('valid', 'test'):
    assert results[split]['ppl'] == pytest.approx(summary[f'{split}_ppl'], rel=1e-6)
    assert results[split]['tokens'] == summary['tokens'][split]


def copy_run(base: Path, name: str) -> Path:
  """A copy of the trained workdir (the tests that alter one alter a copy)."""
  return Path(shutil.copytree(base / RUN, base / 'runs' / name))


# --- relative paths, other directories, a moved workdir -------------------------------------

@pytest.mark.slow
def test_run_json_records_where_the_data_lies_absolute(here):
  base, summary = here
  config = json.loads((base / RUN / 'run.json').read_text())['config']
  assert config['dataset'] == f'text:{base}/data/toy' == summary['dataset']
  assert config['data_dir'] == str(base / 'tfds')
  assert config['workdir'] == str(base / RUN)


@pytest.mark.slow
def test_every_reader_reads_a_relative_workdir(here):
  base, summary = here
  (base / 'plots').mkdir(exist_ok=True)
  children = {
      'evaluate': start('evaluate', f'--workdir={RUN}', '--json', cwd=base),
      'score': start('score', f'--workdir={RUN}', 'the jury said', cwd=base),
      'generate': start('generate', f'--workdir={RUN}', '--length=5', cwd=base),
      'neighbours': start('neighbours', f'--workdir={RUN}', '--words=the',
                          '--plot=plots/c.png', cwd=base),
      'embeddings': start('embeddings', f'--workdir={RUN}', '--out=vectors', cwd=base),
      'mix': start('mix', f'--workdir={RUN}', cwd=base)}
  out = {name: succeeded(child) for name, child in children.items()}
  assert_own_numbers(json.loads(out['evaluate']), summary)
  assert out['score'].startswith('ln ') and out['generate'].strip()
  assert (base / 'plots' / 'c.png').read_bytes()[:4] == b'\x89PNG'
  assert (base / 'vectors' / 'embeddings.txt').is_file()
  network = next(line for line in out['mix'].splitlines() if line.startswith('network alone'))
  assert network.split()[-2:] == [f'{summary["valid_ppl"]:.2f}', f'{summary["test_ppl"]:.2f}']
  assert out['mix'].startswith(f'{RUN}: nnlm') and 'text:data/toy' in out['mix']


@pytest.mark.slow
def test_a_workdir_reads_from_another_directory_and_moved(here, tmp_path):
  base, summary = here
  # Where the old code looked for the relative dataset: another, smaller corpus.
  elsewhere = tmp_path / 'elsewhere'
  write_text_corpus(elsewhere / 'data' / 'toy')
  for split in ('valid', 'test'):
    path = elsewhere / 'data' / 'toy' / f'{split}.txt'
    path.write_text(''.join(path.read_text().splitlines(keepends=True)[::2]))
  moved = tmp_path / 'moved'
  shutil.move(copy_run(base, 'to_move'), moved / 'run')
  children = [
      start('evaluate', f'--workdir={os.path.relpath(base / RUN, elsewhere)}', '--json',
            cwd=elsewhere),
      start('score', f'--workdir={base / RUN}', 'the jury said', cwd=elsewhere),
      start('evaluate', '--workdir=run', '--json', cwd=moved)]
  relative, score, after_move = [succeeded(child) for child in children]
  for stdout in (relative, after_move):
    assert_own_numbers(json.loads(stdout), summary)
  assert score.startswith('ln ')
  assert not (elsewhere / 'tfds').exists()  # Nothing prepared where it was read from.
  with contextlib.chdir(moved):  # The Python API, a relative path too.
    trained = load_trained('run')
  assert trained.config.workdir == str(moved / 'run')
  assert trained.config.dataset == f'text:{base}/data/toy'


@pytest.mark.slow
def test_the_python_api_takes_relative_paths(here, tmp_path):
  base, _ = here
  with contextlib.chdir(base):
    trained = load_trained(RUN)
    assert saved_params(RUN) is not None  # Orbax reads absolute paths only: made so.
    own_dataset_types(trained)  # Its own data, found where run.json says, is unchanged.
    typed = Config(dataset='text:data/toy', workdir=RUN, data_dir='tfds', **TINY)
    recorded = json.loads((base / RUN / 'run.json').read_text())['config']  # Absolute.
    assert typed.same_run(recorded) and typed.incompatibilities(recorded) == []
    assert typed.replace(dataset='text:data/other').incompatibilities(recorded) == [
        f"dataset: checkpoint has 'text:{base}/data/toy', this run has "
        f"'text:{base}/data/other'"]
  assert trained.config.workdir == str(base / RUN)
  with contextlib.chdir(tmp_path):
    config = Config(dataset='text:~/x', workdir='a/../b', data_dir='d').absolute_paths()
  assert config.workdir == str(tmp_path / 'b') and config.data_dir == str(tmp_path / 'd')
  assert config.dataset == f'text:{Path.home() / "x"}'
  assert config.absolute_paths() == config


@pytest.mark.slow
def test_an_old_workdir_with_relative_paths_resumes_and_reads_from_its_directory(here):
  """Runs recorded before paths were made absolute hold them as typed: read from where
  they were typed, they resume and read as before."""
  base, summary = here
  old = copy_run(base, 'old')
  for name in ('run.json', 'summary.json'):
    record = json.loads((old / name).read_text())
    record['config'].update(dataset='text:data/toy', data_dir='tfds', workdir='runs/old')
    record.pop('checksum', None)  # A summary's: older ones had none.
    (old / name).write_text(json.dumps(record))
  with contextlib.chdir(base):
    trained = load_trained('runs/old')
    own_dataset_types(trained)  # Its data, found from here, is the data it was trained on.
    again = trainer.run(Config(dataset='text:data/toy', data_dir='tfds', workdir='runs/old',
                             **TINY))
  assert again['status'] == 'epochs_done'
  assert again['valid_ppl'] == pytest.approx(summary['valid_ppl'], rel=1e-6)


# --- its own data, unless told ------------------------------------------------------------

@pytest.mark.slow
def test_evaluate_refuses_data_other_than_its_own_unless_named(here):
  base, summary = here
  toy, away = base / 'data' / 'toy', base / 'data' / 'toy_moved'
  with contextlib.chdir(base):
    trained = load_trained(RUN)
  toy.rename(away)
  try:
    gone = one_line_error(start('evaluate', f'--workdir={RUN}', cwd=base),
                          f'{RUN} was trained on --dataset=text:data/toy, which cannot be '
                          'read now')
    assert '--dataset=text:NEW_PATH' in gone
    with pytest.raises(ConfigError, match='which cannot be read now'):
      mix_program.corpus_of(trained)
    # Named where it went, it is the data the model was trained on (what evaluate's heading
    # says beside --dataset).
    assert same_data(trained, *dataset_types(trained.config.replace(dataset=f'text:{away}')))
  finally:
    away.rename(toy)

  valid = toy / 'valid.txt'
  text = valid.read_text()
  valid.write_text(text + 'the jury said so\n')  # Edited since training.
  try:
    children = [start('evaluate', f'--workdir={RUN}', cwd=base),
                start('evaluate', f'--workdir={RUN}', '--dataset=text:data/toy', cwd=base)]
    one_line_error(children[0], f'--dataset=text:data/toy holds other data than {RUN} was '
                   'trained on')
    named = succeeded(children[1]).splitlines()
    with pytest.raises(ConfigError, match='holds other data than'):
      mix_program.corpus_of(trained)
  finally:
    valid.write_text(text)
  assert named[0].endswith('on --dataset=text:data/toy (words; not the data it was trained '
                           'on)')
  assert f'tokens {summary["tokens"]["valid"] + 5:>9,}' in named[1]
  assert f'tokens {summary["tokens"]["test"]:>9,}' in named[3]
  assert mix_program.corpus_of(trained).fingerprint == trained.data_fingerprint  # Restored.


# --- one-line errors ----------------------------------------------------------------------

@pytest.mark.slow
def test_mistakes_are_one_line_errors(here, tmp_path):
  base, _ = here
  edited, broken = copy_run(base, 'edited'), copy_run(base, 'broken')
  identity = json.loads((edited / 'run.json').read_text())
  identity['config']['hidden_size'] = 9
  (edited / 'run.json').write_text(json.dumps(identity))
  (broken / 'run.json').write_text((broken / 'run.json').read_text()[:200])
  (tmp_path / 'empty.txt').write_text('')
  (tmp_path / 'loop').symlink_to('loop')
  cases = {
      'hidden_size=8 in its checkpoint, 9 in run.json': (
          start('score', '--workdir=runs/edited', 'the jury', cwd=base),
          "runs/edited/run.json does not match the checkpoint's parameters ("),
      'malformed run.json': (start('evaluate', '--workdir=runs/broken', cwd=base),
                             'runs/broken/run.json is damaged (JSONDecodeError'),
      'an empty --text_file': (
          start('evaluate', f'--workdir={base / RUN}', '--text_file=empty.txt', cwd=tmp_path),
          '--text_file=empty.txt is empty'),
      'a workdir that is a symbolic link loop': (
          start('train', '--workdir=loop', f'--dataset=text:{base}/data/toy', *TINY_FLAGS,
                cwd=tmp_path),
          '--workdir=loop is a symbolic link that leads nowhere'),
  }
  for case, (child, phrase) in cases.items():
    one_line_error(child, phrase, case=case)


def test_a_workdir_that_cannot_hold_a_run_is_refused_where_it_is_made(tmp_path, monkeypatch):
  """The root and the home directory (a run writes its files straight into its workdir),
  a link that leads nowhere: refused by the config (before any data is read) and where a
  workdir is made. (The command line turns a ConfigError into one line, status 2.)"""
  monkeypatch.setenv('HOME', str(tmp_path))
  for workdir, phrase in (('/', '--workdir=/ is the root directory'),
                          (f'{tmp_path}/.', 'is your home directory itself')):
    with pytest.raises(ConfigError, match=phrase):
      prepare_workdir(Path(workdir))
    with pytest.raises(ConfigError, match=phrase):
      trainer.run(Config(workdir=workdir, dataset='text:nowhere'))  # The data is not read.
  assert list(tmp_path.iterdir()) == []
  (tmp_path / 'loop').symlink_to('loop')
  with pytest.raises(ConfigError, match='loop is a symbolic link that leads nowhere'):
    prepare_workdir(tmp_path / 'loop' / 'run')
  with pytest.raises(ConfigError, match='each model trained together needs a --workdir'):
    run_checks.check_together([Config(workdir=str(tmp_path / 'a')),
                          Config(workdir=str(tmp_path / 'b' / '..' / 'a'))])


@pytest.mark.slow
def test_ctrl_c_in_evaluate_is_status_75_with_a_message(here, tmp_path):
  base, _ = here
  text = (base / 'data' / 'toy' / 'train.txt').read_text()
  big = tmp_path / 'big.txt'
  big.write_text(text * 400)  # Read and scored for a few seconds.
  child = start('evaluate', f'--workdir={base / RUN}', f'--text_file={big}', cwd=tmp_path)
  deadline = time.monotonic() + 120
  while not _has_open(child.pid, big):  # Inside evaluate's main: the file is being read.
    assert child.poll() is None and time.monotonic() < deadline, child.communicate()
    time.sleep(0.005)
  child.send_signal(signal.SIGINT)
  message = one_line_error(child, 'Interrupted (SIGINT) while evaluating', status=75)
  assert 'KeyboardInterrupt' not in message


def _has_open(pid: int, path: Path) -> bool:
  """Whether process `pid` has `path` open (Linux: /proc/PID/fd)."""
  with contextlib.suppress(OSError):
    return any(os.readlink(f'/proc/{pid}/fd/{fd}') == str(path)
               for fd in os.listdir(f'/proc/{pid}/fd'))
  return False
