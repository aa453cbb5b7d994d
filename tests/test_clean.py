"""nplm clean: a workdir's checkpoints and a data dir's prepared datasets listed with their
sizes; what is asked removed, never what a run needs, never under a trainer's or a
preparer's lock."""

import fcntl
import json
import shutil

import pytest

from nplm.config import Config
from nplm.data.datasets import load_dataset
from nplm.trainer import run
from tests.conftest import write_text_corpus
from tests.test_train import tiny_config
from tests import cli


def clean(*args):
  return cli.run('clean', *map(str, args), timeout=120)


def one_line_error(result, text: str) -> None:
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 2 and 'Traceback' not in result.stderr, result.stderr
  assert len(lines) == 1 and lines[0].startswith('error: ') and text in lines[0], lines


def steps(directory) -> list[int]:
  return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


@pytest.fixture(scope='module')
def workdir(tiny_corpus, tmp_path_factory):
  """A finished run, and in its checkpoints/ an older step it does not need (step 1: a copy
  of its newest, as an older nplm that kept more would have left)."""
  workdir = tmp_path_factory.mktemp('clean') / 'run'
  run(tiny_config(workdir, checkpoint_every=3), tiny_corpus)
  newest = max(steps(workdir / 'checkpoints'))
  shutil.copytree(workdir / 'checkpoints' / str(newest), workdir / 'checkpoints' / '1')
  return workdir


@pytest.mark.slow
def test_a_workdirs_checkpoints_are_listed_and_only_the_unneeded_removed(workdir, tmp_path):
  latest, best = steps(workdir / 'checkpoints'), steps(workdir / 'best')
  summary = json.loads((workdir / 'summary.json').read_text())
  assert len(latest) > 2 and best == [summary['best_step']]
  listed = clean(f'--workdir={workdir}')
  assert listed.returncode == 0, listed.stderr
  for step in latest:
    assert f'checkpoints/{step} ' in listed.stdout
  assert f'best/{best[0]} ' in listed.stdout
  needed = {f'checkpoints/{latest[-1]}', f'best/{best[0]}', f'checkpoints/{best[0]}'}
  refused = clean(f'--workdir={workdir}', f'--remove=checkpoints/{latest[-1]}')
  one_line_error(refused, 'the run resumes from it')
  one_line_error(clean(f'--workdir={workdir}', f'--remove=best/{best[0]}'), 'it is kept')
  one_line_error(clean(f'--workdir={workdir}', '--remove=checkpoints/99999'),
                 'not a checkpoint of')
  removed = clean(f'--workdir={workdir}', '--remove_unneeded')
  assert removed.returncode == 0, removed.stderr
  left = {f'checkpoints/{s}' for s in steps(workdir / 'checkpoints')} | {
      f'best/{s}' for s in steps(workdir / 'best')}
  assert left == {name for name in needed if (workdir / name).exists()} and len(left) >= 2
  assert 'removed checkpoints/1 ' in removed.stdout


@pytest.mark.slow
def test_nothing_is_removed_while_a_trainer_holds_the_workdir(workdir):
  with open(workdir / 'train.lock', 'a') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    one_line_error(clean(f'--workdir={workdir}', '--remove_unneeded'), 'is being trained')


@pytest.mark.slow
def test_prepared_datasets_are_listed_and_removed_by_name_unless_being_prepared(tmp_path):
  data_dir, text = tmp_path / 'tfds', write_text_corpus(tmp_path / 'text')
  load_dataset(Config(dataset=f'text:{text}', data_dir=str(data_dir),
                      workdir='unused').resolved())
  (name,) = [p.name for p in (data_dir / 'nplm_tokens').iterdir()]
  listed = clean(f'--data_dir={data_dir}')
  assert listed.returncode == 0 and name in listed.stdout, listed.stderr
  assert 'from text:text (words)' in listed.stdout, listed.stdout
  lock_file = data_dir / 'nplm_tokens' / name / '.prepare.lock'
  with open(lock_file, 'a') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    one_line_error(clean(f'--data_dir={data_dir}', f'--remove={name}'),
                   'is being prepared by another process')
  assert (data_dir / 'nplm_tokens' / name).is_dir()
  one_line_error(clean(f'--data_dir={data_dir}', '--remove=nothing_here'),
                 'no such prepared dataset')
  removed = clean(f'--data_dir={data_dir}', f'--remove={name}')
  assert removed.returncode == 0 and f'removed {name}' in removed.stdout, removed.stderr
  assert not (data_dir / 'nplm_tokens' / name).exists()


def test_clean_needs_one_directory():
  one_line_error(clean(), 'give --workdir=W')
