"""The pictures: metrics read back as a resumed run wrote them, and whole PNGs."""

import json

from nplm import plots

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
