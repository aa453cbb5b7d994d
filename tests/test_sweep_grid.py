"""Sweeps over anything: --grid read as the Config field's types, every `nplm train` flag as
the base of every point, the train split left unscored unless asked, a damaged summary.json
resumed rather than a traceback, and the results naming each point by its values."""

import csv
import json
import subprocess
from pathlib import Path

import pytest

from nplm.cli.sweep import SWEEPS, typed_workdir
from nplm.config import ConfigError
from nplm.run_files import plots
from nplm.studies.sweep import (crossed, grid, parse_grid, point_name, run_sweep,
                                write_results)
from tests.conftest import write_text_corpus
from tests.test_sweep import CountingRun
from tests.test_train import tiny_config
from tests import cli


def test_a_grid_reads_each_value_as_its_fields_type_and_crosses_the_fields():
  axes = parse_grid(['learning_rate=0.1,3e-2', 'direct=true,False', '--order=3,5',
                     'split_fractions=0.8,0.1,0.1|0.6,0.2,0.2'])
  assert axes == {'learning_rate': [0.1, 0.03], 'direct': [True, False], 'order': [3, 5],
                  'split_fractions': ['0.8,0.1,0.1', '0.6,0.2,0.2']}
  assert [type(v) for v in axes['learning_rate'] + axes['direct'] + axes['order']] == (
      [float] * 2 + [bool] * 2 + [int] * 2)
  points = grid(**parse_grid(['learning_rate=0.1,0.03', 'dropout=0,0.25']))
  assert points == [{'learning_rate': 0.1, 'dropout': 0.0},
                    {'learning_rate': 0.1, 'dropout': 0.25},
                    {'learning_rate': 0.03, 'dropout': 0.0},
                    {'learning_rate': 0.03, 'dropout': 0.25}]


def test_a_grid_names_its_points_as_the_named_sweep_of_the_same_values():
  """So a grid typed on the command line reuses the named sweep's finished points."""
  typed = grid(**parse_grid(['learning_rate=3e-4,1e-3,3e-3,1e-2']))
  assert [point_name(p) for p in typed] == [point_name(p) for p in SWEEPS['mlp9_lr'][1]] == [
      'learning_rate=0.0003', 'learning_rate=0.001', 'learning_rate=0.003',
      'learning_rate=0.01']


@pytest.mark.parametrize('axes, message', [
    (['learnig_rate=0.1'], r'no Config field learnig_rate \(did you mean learning_rate\?\)'),
    (['workdir=a,b'], '--workdir cannot vary in a sweep'),
    (['num_processes=1,2'], '--num_processes cannot vary in a sweep'),
    (['dropout=0,high'], "--dropout takes float values, got 'high'"),
    (['order=3.5'], "--order takes int values, got '3.5'"),
    (['direct=maybe'], "--direct takes bool values, got 'maybe'"),
    (['dropout'], 'give a field and its values'),
    (['dropout='], 'give a field and its values'),
    (['dropout=0', 'dropout=0.5'], 'names dropout twice'),
])
def test_a_bad_grid_is_one_line_naming_it(axes, message):
  with pytest.raises(ConfigError, match=message) as raised:
    parse_grid(axes)
  assert '\n' not in str(raised.value)


def test_a_named_sweeps_points_cross_a_grid_but_not_on_its_own_fields():
  assert crossed(grid(direct=[True, False]), {'seed': [0, 1]}) == [
      {'direct': True, 'seed': 0}, {'direct': True, 'seed': 1},
      {'direct': False, 'seed': 0}, {'direct': False, 'seed': 1}]
  with pytest.raises(ConfigError, match='already varies direct'):
    crossed(grid(direct=[True, False]), {'direct': [True]})


@pytest.mark.parametrize('damage', ['truncated', 'not an object', 'unknown status'])
@pytest.mark.slow
def test_a_damaged_summary_json_resumes_its_point_and_is_written_anew(tiny_corpus, tmp_path,
                                                                       damage):
  base = tiny_config(tmp_path / 'unused', epochs=1, max_steps=3, eval_splits='valid,test')
  points = grid(learning_rate=[1e-2, 3e-3])
  rows = run_sweep(base, points, tmp_path / 'sweep', tiny_corpus)
  summary_path = Path(rows[0]['workdir']) / 'summary.json'
  text = summary_path.read_text()
  summary_path.write_text({'truncated': text[:len(text) // 2], 'not an object': '[1, 2]',
                           'unknown status': json.dumps({**json.loads(text),
                                                         'status': 'half-written'})}[damage])
  counting = CountingRun()
  again = run_sweep(base, points, tmp_path / 'sweep', tiny_corpus, run=counting)
  assert counting.calls == 1  # The damaged point only; the other is reused.
  rewritten = json.loads(summary_path.read_text())
  assert rewritten['status'] == 'max_steps' and rewritten['steps'] == 3
  for mine, before in zip(again, rows):
    assert mine['point'] == before['point']
    assert mine['valid_ppl'] == pytest.approx(before['valid_ppl'], rel=1e-6)
    assert mine['test_ppl'] == pytest.approx(before['test_ppl'], rel=1e-6)


def _row(point: dict, **results) -> dict:
  return {'point': point_name(point), 'overrides': point, 'train_ppl': None, 'valid_ppl': 150.0,
          'test_ppl': 160.0, 'vocab_size': 10, 'epochs': 1, 'wall_seconds': 1.0,
          'train_examples_per_second': 5.0, 'status': 'epochs_done', 'workdir': '/w', **results}


def test_results_report_train_perplexity_only_where_every_point_scored_it(tmp_path):
  some = [_row({'seed': 0}, train_ppl=120.0), _row({'seed': 1})]
  every = [_row({'seed': 0}, train_ppl=120.0), _row({'seed': 1}, train_ppl=121.5)]
  for rows, header in ((some, ['point', 'seed', 'valid_ppl']),
                       (every, ['point', 'seed', 'train_ppl', 'valid_ppl'])):
    write_results(rows, tmp_path)
    with open(tmp_path / 'results.csv', newline='') as f:
      read = list(csv.DictReader(f))
    assert list(read[0])[:len(header)] == header
    assert [r.get('train_ppl') for r in read] == [
        None if 'train_ppl' not in header else str(row['train_ppl']) for row in rows]


def test_the_plot_names_each_point_by_its_values(tmp_path, monkeypatch):
  """A workdir's name replaces characters a path cannot hold; the plot shows the values."""
  shown = []
  monkeypatch.setattr(plots, 'sweep_results', lambda rows, *_: shown.extend(rows))
  rows = [_row({'tfds_splits': 'train[:90%],train[90%:],test', 'seed': 3}),
          _row({'tfds_splits': 'train,validation,test', 'seed': 3})]
  assert rows[0]['point'] == 'seed=3,tfds_splits=train__90__,train_90___,test'
  write_results(rows, tmp_path)
  assert [row['point'] for row in shown] == [
      'tfds_splits=train[:90%],train[90%:],test, seed=3',
      'tfds_splits=train,validation,test, seed=3']


# --- the command, as a user types it ----------------------------------------------------

def nplm(*args: str, cwd: Path) -> subprocess.CompletedProcess:
  return cli.run(*args, cwd=cwd)


@pytest.fixture(scope='module')
def user(tmp_path_factory) -> Path:
  """A user's directory holding a tiny text:DIR corpus (mixed case) at data/toy."""
  cwd = tmp_path_factory.mktemp('user')
  write_text_corpus(cwd / 'data' / 'toy')
  return cwd


TINY = ('--order=3', '--feature_size=8', '--hidden_size=8', '--batch_size=16')


@pytest.mark.slow
def test_a_grid_sweep_on_any_dataset_with_a_tokenizer_as_typed(user):
  result = nplm('sweep', '--dataset=text:data/toy', '--tokenizer=nltk', '--lowercase',
                '--grid=learning_rate=0.01,0.003', '--epochs=1', '--max_steps=2',
                '--out=sweeps/x', '--data_dir=tfds', *TINY, cwd=user)
  assert result.returncode == 0, result.stderr
  assert 'Traceback' not in result.stderr
  header = next(line for line in result.stderr.splitlines() if 'sweep of' in line)
  assert 'sweep of 2 points in sweeps/x,' in header and str(user) not in header
  points = ['learning_rate=0.01', 'learning_rate=0.003']
  made = sorted(path.name for path in (user / 'sweeps' / 'x').iterdir() if path.is_dir())
  assert made == sorted(points)
  with open(user / 'sweeps' / 'x' / 'results.csv', newline='') as f:
    read = list(csv.DictReader(f))
  assert [r['point'] for r in read] == points
  assert [float(r['learning_rate']) for r in read] == [0.01, 0.003]
  assert 'train_ppl' not in read[0]
  for r, point in zip(read, points):
    workdir = user / 'sweeps' / 'x' / point
    assert Path(r['workdir']) == workdir
    summary = json.loads((workdir / 'summary.json').read_text())
    assert set(summary['evaluated']) == {'valid', 'test'} and 'train_ppl' not in summary
    assert float(r['valid_ppl']) == summary['valid_ppl']
    assert float(r['test_ppl']) == summary['test_ppl']
    assert (summary['config']['tokenizer'], summary['config']['lowercase']) == ('nltk', True)
    assert summary['config']['learning_rate'] == float(r['learning_rate'])
    words = (workdir / 'vocab.txt').read_text().split()
    assert words and all(word == word.lower() for word in words)  # --lowercase was read.
  assert 'final evaluation: train' not in result.stderr
  assert (user / 'sweeps' / 'x' / 'results.png').read_bytes().startswith(b'\x89PNG')


@pytest.mark.slow
def test_a_named_sweep_takes_train_flags_and_a_workdir_as_its_directory(user):
  result = nplm('sweep', '--sweep=table1_direct', '--dataset=text:data/toy',
                '--unk_max_count=1', '--grid=seed=0', '--epochs=1', '--max_steps=1',
                '--batch_size=16', '--workdir=sweeps/named', '--data_dir=tfds',
                '--eval_splits=train,valid,test', cwd=user)
  assert result.returncode == 0, result.stderr
  points = ['direct=True,seed=0', 'direct=False,seed=0']
  with open(user / 'sweeps' / 'named' / 'results.csv', newline='') as f:
    read = list(csv.DictReader(f))
  assert [r['point'] for r in read] == points
  for r, point in zip(read, points):
    summary = json.loads((user / 'sweeps' / 'named' / point / 'summary.json').read_text())
    assert summary['config']['unk_max_count'] == 1 and summary['config']['hidden_size'] == 50
    assert float(r['train_ppl']) == summary['train_ppl']  # Asked for: scored and reported.


@pytest.mark.parametrize('args, message', [
    (['--grid=learnig_rate=0.1'], 'did you mean learning_rate?'),
    (['--grid=workdir=a,b'], '--workdir cannot vary in a sweep'),
    (['--dataset=text:data/toy'], 'nothing to sweep: give --grid=FIELD=V1,V2'),
    # The recipe's --workdir=runs/mlp1 is its own run's, not a second sweep directory.
    (['--flagfile=mlp1', '--grid=order=1', '--out=sweeps/o'], 'point order=1: --order must'),
    (['--grid=seed=1', '--workdir=sweeps/a', '--out=sweeps/b'], 'name two directories'),
])
@pytest.mark.slow
def test_the_command_refuses_a_bad_sweep_in_one_line(user, args, message):
  result = nplm('sweep', *args, cwd=user)
  assert result.returncode == 2, result.stderr
  assert result.stderr.startswith('error: ') and result.stderr.count('\n') == 1
  assert message in result.stderr


def test_only_a_typed_workdir_names_the_sweeps_directory():
  assert typed_workdir(['nplm sweep', '--grid=seed=1', '--workdir=runs/x'])
  assert typed_workdir(['nplm sweep', '-workdir', 'runs/x'])
  assert not typed_workdir(['nplm sweep', '--flagfile=mlp1', '--out=runs/x'])
  assert not typed_workdir(['nplm sweep', '--workdirs=x', '--', '--workdir=x'])
