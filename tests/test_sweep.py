"""Sweeps: the points each definition gives, one run per point, reuse of finished points,
refusal of a bad point before any training, results files that read back, and the CLI."""

import csv
import math
from pathlib import Path

import pytest

from nplm.flagfiles import config_from_flagfile
from nplm.cli.sweep import SWEEPS
from nplm import trainer
from nplm.training import run_checks
from nplm.config import ConfigError
from nplm.studies.sweep import (grid, point_configs, point_name, random_search, run_sweep,
                        write_results, zipped)
from tests import cli
from tests.test_train import tiny_config


def test_grid_is_every_combination_the_last_axis_fastest():
  assert grid(hidden_size=[0, 50], direct=[True, False]) == [
      {'hidden_size': 0, 'direct': True}, {'hidden_size': 0, 'direct': False},
      {'hidden_size': 50, 'direct': True}, {'hidden_size': 50, 'direct': False}]
  assert grid(order=[3]) == [{'order': 3}]


def test_zipped_pairs_the_axes_and_refuses_unequal_lengths():
  assert zipped(order=[3, 5], feature_size=[30, 60]) == [
      {'order': 3, 'feature_size': 30}, {'order': 5, 'feature_size': 60}]
  with pytest.raises(ConfigError, match='differ in length'):
    zipped(order=[3, 5], feature_size=[30])


def test_unknown_fields_are_named():
  for make in (lambda: grid(hiden_size=[1], order=[3]), lambda: zipped(hiden_size=[1]),
               lambda: random_search(0, 2, hiden_size=[1])):
    with pytest.raises(ConfigError, match='hiden_size'):
      make()


def test_random_search_is_reproducible_and_within_its_ranges():
  axes = dict(learning_rate=(1e-4, 1e-1, 'log'), dropout=(0.0, 0.5, 'linear'),
              hidden_size=[50, 100, 200])
  points = random_search(7, 400, **axes)
  assert points == random_search(7, 400, **axes)
  assert points != random_search(8, 400, **axes)
  assert len(points) == 400
  rates = [p['learning_rate'] for p in points]
  assert all(1e-4 <= r <= 1e-1 for r in rates)
  assert all(0.0 <= p['dropout'] <= 0.5 for p in points)
  assert {p['hidden_size'] for p in points} == {50, 100, 200}
  # Log-uniform: each decade holds about a third of the draws (linear: the top one ~90%).
  decades = [sum(10 ** (k - 4) <= r < 10 ** (k - 3) for r in rates) for k in range(3)]
  assert all(100 <= count <= 170 for count in decades), decades
  logs = [math.log10(r) for r in rates]
  assert sum(logs) / len(logs) == pytest.approx(-2.5, abs=0.1)
  with pytest.raises(ConfigError, match='low > 0'):
    random_search(0, 1, learning_rate=(0.0, 1.0, 'log'))


def test_point_names_are_sorted_readable_and_path_safe():
  assert point_name({'hidden_size': 50, 'direct': True}) == 'direct=True,hidden_size=50'
  assert point_name({'mesh': 'data:2/model'}) == 'mesh=data_2_model'
  assert point_name({}) == 'base'
  assert len(point_name({'adaptive_cutoffs': ','.join(map(str, range(200)))})) <= 200


class CountingRun:
  """nplm.trainer.run, counting its calls."""

  def __init__(self):
    self.calls = 0

  def __call__(self, config, corpus=None):
    self.calls += 1
    return trainer.run(config, corpus)


@pytest.mark.slow
def test_a_grid_sweep_runs_each_point_writes_results_and_reuses_them(tiny_corpus, tmp_path):
  base = tiny_config(tmp_path / 'unused', epochs=1, max_steps=4)
  points = grid(hidden_size=[4, 8])
  counting = CountingRun()
  rows = run_sweep(base, points, tmp_path / 'sweep', tiny_corpus, run=counting)
  assert counting.calls == 2
  assert [row['overrides'] for row in rows] == points
  for row, hidden in zip(rows, (4, 8)):
    assert row['workdir'] == str(tmp_path / 'sweep' / f'hidden_size={hidden}')
    assert (Path(row['workdir']) / 'summary.json').exists()
    assert row['status'] == 'max_steps' and row['vocab_size'] == tiny_corpus.vocab.size
    assert math.isfinite(row['valid_ppl']) and math.isfinite(row['test_ppl'])
  assert rows[0]['valid_ppl'] != rows[1]['valid_ppl']

  write_results(rows, tmp_path / 'sweep')
  with open(tmp_path / 'sweep' / 'results.csv', newline='') as f:
    read = list(csv.DictReader(f))
  assert [r['hidden_size'] for r in read] == ['4', '8']
  for r, row in zip(read, rows):
    for key in ('train_ppl', 'valid_ppl', 'test_ppl', 'wall_seconds',
                'train_examples_per_second'):
      assert float(r[key]) == row[key]
    for key in ('vocab_size', 'epochs'):
      assert int(r[key]) == row[key]
    assert (r['point'], r['status'], r['workdir']) == (row['point'], row['status'],
                                                        row['workdir'])
  table = (tmp_path / 'sweep' / 'results.md').read_text().splitlines()
  # --eval_splits=auto scored the tiny train split: the table reports it.
  assert table[0].startswith('| point | hidden_size | train_ppl | valid_ppl | test_ppl |')
  assert [line.split(' | ')[1] for line in table[2:]] == ['4', '8']
  assert (tmp_path / 'sweep' / 'results.png').read_bytes().startswith(b'\x89PNG')

  again = CountingRun()
  assert run_sweep(base, points, tmp_path / 'sweep', tiny_corpus, run=again) == rows
  assert again.calls == 0


def test_an_invalid_point_fails_the_sweep_before_any_run(tiny_corpus, tmp_path):
  counting = CountingRun()
  points = [{'order': 3}, {'order': 1}]
  with pytest.raises(ConfigError, match=r'point order=1: --order must be at least 2'):
    run_sweep(tiny_config(tmp_path / 'unused'), points, tmp_path / 'sweep', tiny_corpus,
              run=counting)
  assert counting.calls == 0
  assert not (tmp_path / 'sweep').exists()


@pytest.mark.slow
def test_cli_names_the_known_sweeps_for_an_unknown_one(tmp_path):
  """`nplm sweep`, run outside the checkout: it needs no `experiments` package."""
  result = cli.run('sweep', '--sweep=nonexistent', cwd=tmp_path, timeout=120)
  assert result.returncode == 2, result.stderr
  assert 'Traceback' not in result.stderr
  assert result.stderr.startswith('error: ') and result.stderr.count('\n') == 1
  assert 'table1_direct' in result.stderr and 'table1_h' in result.stderr


def test_every_named_sweep_is_valid_on_its_flagfile(tmp_path):
  for name, (flagfile, points) in SWEEPS.items():
    base = config_from_flagfile(flagfile)  # A recipe's name.
    configs = point_configs(base, points, tmp_path)
    assert len({config.workdir for config in configs}) == len(points)
  flagfile, points = SWEEPS['mlp9_lr_seed']  # Meant to be trained --together.
  base = config_from_flagfile(flagfile)
  shared_order = base.replace(data_seed=base.batch_order_seed)
  assert len(run_checks.check_together(point_configs(shared_order, points, tmp_path))) == 16


@pytest.mark.slow
def test_a_sweep_trained_together_equals_it_trained_point_by_point(tiny_corpus, tmp_path,
                                                                   monkeypatch):
  base = tiny_config(tmp_path / 'unused', epochs=2, data_seed=3)
  points = grid(seed=[1, 2], learning_rate=[1e-2, 3e-3])
  counting = CountingRun()
  alone = run_sweep(base, points, tmp_path / 'alone', tiny_corpus, run=counting)
  together = run_sweep(base, points, tmp_path / 'together', tiny_corpus, run=counting,
                       together=True)
  assert counting.calls == 4  # The point-by-point sweep's; together, none.
  for mine, theirs in zip(together, alone):
    assert mine['point'] == theirs['point'] and mine['epochs'] == theirs['epochs']
    for key in ('valid_ppl', 'test_ppl'):
      assert mine[key] == pytest.approx(theirs[key], rel=1e-5)

  calls = []
  monkeypatch.setattr(trainer, 'run',
                      lambda *args: calls.append(args) or [])
  assert run_sweep(base, points, tmp_path / 'together', tiny_corpus, together=True) == together
  assert calls == []  # Every point reused.


def test_a_sweep_together_refuses_points_of_different_shapes(tiny_corpus, tmp_path):
  with pytest.raises(ConfigError, match='their --hidden_size differ'):
    run_sweep(tiny_config(tmp_path / 'unused'), grid(hidden_size=[4, 8]), tmp_path / 'sweep',
              tiny_corpus, together=True)
