"""The pictures: metrics read back as a resumed run wrote them, the figures drawing exactly the
numbers they were given, and whole PNGs that are not blank."""

import json
import math

import numpy as np
import pytest
from matplotlib import image

from nplm.run_files import plots

PNG = b'\x89PNG'


def write_metrics(workdir, records):
  (workdir / 'metrics.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in records))


@pytest.fixture
def drawn(monkeypatch):
  """The figures the plots save, in order (saved as they would be)."""
  figures = []

  def save(figure, path):
    figures.append(figure)
    save_figure_atomically(figure, path)

  save_figure_atomically = plots.save_figure_atomically
  monkeypatch.setattr(plots, 'save_figure_atomically', save)
  return figures


def assert_a_drawing(path):
  """A whole PNG, read back: RGB(A) pixels, not all one colour."""
  assert path.read_bytes().startswith(PNG)
  pixels = image.imread(path)
  assert pixels.ndim == 3 and pixels.shape[2] in (3, 4) and min(pixels.shape[:2]) > 100
  assert len(np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)) > 2


def panel_texts(axes) -> list[str]:
  return [text.get_text() for text in axes.texts]


def test_a_step_written_twice_counts_once_with_its_last_record(tmp_path):
  write_metrics(tmp_path, [
      {'kind': 'train', 'step': 2, 'loss': 3.0}, {'kind': 'train', 'step': 4, 'loss': 2.5},
      {'kind': 'valid', 'step': 4, 'ppl': 20.0, 'epoch': 1},
      {'kind': 'train', 'step': 4, 'loss': 2.4},  # Resumed from step 2: step 4 again.
      {'kind': 'train', 'step': 6, 'loss': 2.0}])
  metrics = plots.read_metrics(tmp_path)
  assert [(r['step'], r['loss']) for r in metrics['train']] == [(2, 3.0), (4, 2.4), (6, 2.0)]
  assert [r['ppl'] for r in metrics['valid']] == [20.0]


def test_the_learning_curve_draws_the_losses_and_perplexities_written(tmp_path, drawn):
  write_metrics(tmp_path, [
      {'kind': 'train', 'step': 2, 'loss': 3.0}, {'kind': 'train', 'step': 4, 'loss': 2.5},
      {'kind': 'valid', 'step': 4, 'ppl': 20.0, 'epoch': 1},
      {'kind': 'train', 'step': 4, 'loss': 2.4},  # Resumed: the last record of step 4.
      {'kind': 'train', 'step': 6, 'loss': 2.0},
      {'kind': 'valid', 'step': 6, 'ppl': 15.5, 'epoch': 2}])
  assert_a_drawing(plots.learning_curve(tmp_path))
  (figure,) = drawn
  loss, perplexity = figure.axes
  (loss_line,) = loss.lines
  assert list(loss_line.get_xdata()) == [2, 4, 6] and list(loss_line.get_ydata()) == [3.0, 2.4, 2.0]
  (ppl_line,) = perplexity.lines
  assert list(ppl_line.get_xdata()) == [4, 6] and list(ppl_line.get_ydata()) == [20.0, 15.5]
  assert panel_texts(perplexity) == ['epoch 1', 'epoch 2']
  assert [text.xy for text in perplexity.texts] == [(4, 20.0), (6, 15.5)]
  assert panel_texts(loss) == []  # Nothing to excuse.


def test_sweep_results_draw_each_points_perplexities_and_the_baseline(tmp_path, drawn):
  rows = [{'point': f'hidden_size={h}', 'valid_ppl': 100.0 + h, 'test_ppl': 90.0 + h}
          for h in (50, 100)]
  rows.append({'point': 'lr=0.1', 'valid_ppl': None, 'test_ppl': None})  # Diverged.
  path = plots.sweep_results(rows, tmp_path / 'results.png', baseline=('KN5', 188.3))
  assert path == tmp_path / 'results.png'
  assert_a_drawing(path)
  (figure,) = drawn
  (axes,) = figure.axes
  valid, test = axes.containers
  for bars, split in ((valid, 'valid'), (test, 'test')):
    widths = [bar.get_width() for bar in bars]
    assert widths[:2] == [r[f'{split}_ppl'] for r in rows[:2]] and math.isnan(widths[2])
  # Each point's pair of bars straddles its tick, the first point on top.
  assert [bar.get_y() + bar.get_height() / 2 for bar in valid] == [-0.2, 0.8, 1.8]
  assert [label.get_text() for label in axes.get_yticklabels()] == [r['point'] for r in rows]
  assert axes.yaxis_inverted()
  assert panel_texts(axes) == ['150.0', '200.0', '', '140.0', '190.0', '']  # The bar labels.
  (kn5,) = axes.lines
  assert list(kn5.get_xdata()) == [188.3, 188.3]
  assert [t.get_text() for t in axes.get_legend().get_texts()] == ['KN5 test 188.3', 'valid',
                                                                  'test']
  assert axes.get_xlim() == pytest.approx(plots.value_range([150.0, 200.0, 140.0, 190.0, 188.3]))


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


def test_a_run_without_records_or_epochs_still_draws(tmp_path, drawn):
  (tmp_path / 'metrics.jsonl').write_text('')
  path = plots.learning_curve(tmp_path)
  assert path.read_bytes().startswith(PNG)
  assert_a_drawing(path)
  loss, perplexity = drawn[0].axes
  assert panel_texts(loss) == ['no progress record yet']
  assert panel_texts(perplexity) == ['no epoch has finished yet:\nno validation perplexity']
  rows = [{'point': 'lr=0.1', 'valid_ppl': None, 'test_ppl': None},  # Diverged: no bars.
          {'point': 'lr=0.01', 'valid_ppl': 170.0, 'test_ppl': 160.0}]
  path = plots.sweep_results(rows, tmp_path / 'results.png', baseline=('KN5', 188.3))
  assert path.read_bytes().startswith(PNG)
  assert_a_drawing(path)


def test_only_a_learning_curve_without_validation_says_so(tmp_path, drawn):
  write_metrics(tmp_path, [{'kind': 'train', 'step': s, 'loss': 5.0 / s} for s in (1, 2, 3)])
  plots.learning_curve(tmp_path)
  loss, perplexity = drawn[0].axes
  assert list(loss.lines[0].get_ydata()) == [5.0, 2.5, 5.0 / 3] and panel_texts(loss) == []
  assert panel_texts(perplexity) == ['no epoch has finished yet:\nno validation perplexity']
