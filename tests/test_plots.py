"""The pictures: metrics read back as a resumed run wrote them, and whole PNGs."""

import json

import pytest

from nplm.run_files import plots

PNG = b'\x89PNG'


def write_metrics(workdir, records):
  (workdir / 'metrics.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in records))


def test_a_step_written_twice_counts_once_with_its_last_record(tmp_path):
  write_metrics(tmp_path, [
      {'kind': 'train', 'step': 2, 'loss': 3.0}, {'kind': 'train', 'step': 4, 'loss': 2.5},
      {'kind': 'valid', 'step': 4, 'ppl': 20.0, 'epoch': 1},
      {'kind': 'train', 'step': 4, 'loss': 2.4},  # Resumed from step 2: step 4 again.
      {'kind': 'train', 'step': 6, 'loss': 2.0}])
  metrics = plots.read_metrics(tmp_path)
  assert [(r['step'], r['loss']) for r in metrics['train']] == [(2, 3.0), (4, 2.4), (6, 2.0)]
  assert [r['ppl'] for r in metrics['valid']] == [20.0]


def test_learning_curve_and_sweep_results_are_whole_pngs(tmp_path):
  write_metrics(tmp_path, [{'kind': 'train', 'step': s, 'loss': 5.0 / s} for s in (1, 2, 3)])
  assert plots.learning_curve(tmp_path).read_bytes().startswith(PNG)  # No 'valid' yet.
  rows = [{'point': f'hidden_size={h}', 'valid_ppl': 100.0 + h, 'test_ppl': 90.0 + h}
          for h in (50, 100)]
  assert plots.sweep_results(rows, tmp_path / 'results.png').read_bytes().startswith(PNG)
  assert sorted(p.name for p in tmp_path.iterdir()) == [
      'learning_curve.png', 'metrics.jsonl', 'results.png']  # No temporary file left.


def test_the_sweep_axis_spans_the_data_not_zero():
  """A 159-192 spread (the table1_h sweep) with KN5 at 188 must fill the axis."""
  low, high = plots.value_range([159.5, 192.3, 173.3, 188.3])
  assert 140 < low < 159.5 and 192.3 < high < 210
  assert plots.value_range([5.0, 5.0]) == pytest.approx((4.925, 5.0625))  # One value: room.


def test_a_run_without_records_or_epochs_still_draws(tmp_path):
  (tmp_path / 'metrics.jsonl').write_text('')
  assert plots.learning_curve(tmp_path).read_bytes().startswith(PNG)
  rows = [{'point': 'lr=0.1', 'valid_ppl': None, 'test_ppl': None},  # Diverged: no bars.
          {'point': 'lr=0.01', 'valid_ppl': 170.0, 'test_ppl': 160.0}]
  path = plots.sweep_results(rows, tmp_path / 'results.png', baseline=('KN5', 188.3))
  assert path.read_bytes().startswith(PNG)
