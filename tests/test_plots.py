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


@pytest.mark.slow
def test_the_learning_curve_draws_the_losses_perplexities_and_rates_written(tmp_path, drawn):
  write_metrics(tmp_path, [
      {'kind': 'train', 'step': 2, 'loss': 3.0, 'learning_rate': 0.1},
      {'kind': 'train', 'step': 4, 'loss': 2.5, 'learning_rate': 0.2},
      {'kind': 'valid', 'step': 4, 'ppl': 20.0, 'epoch': 1},
      {'kind': 'train', 'step': 4, 'loss': 2.4, 'learning_rate': 0.15},  # Resumed: the last.
      {'kind': 'train', 'step': 6, 'loss': 2.0, 'learning_rate': 0.05},
      {'kind': 'valid', 'step': 6, 'ppl': 15.5, 'epoch': 2}])
  assert_a_drawing(plots.learning_curve(tmp_path))
  (figure,) = drawn
  loss, perplexity, rate = figure.axes
  (loss_line,) = loss.lines
  assert list(loss_line.get_xdata()) == [2, 4, 6] and list(loss_line.get_ydata()) == [3.0, 2.4, 2.0]
  (ppl_line,) = perplexity.lines
  assert list(ppl_line.get_xdata()) == [4, 6] and list(ppl_line.get_ydata()) == [20.0, 15.5]
  assert panel_texts(perplexity) == ['epoch 1', 'epoch 2']
  assert [text.xy for text in perplexity.texts] == [(4, 20.0), (6, 15.5)]
  (rate_line,) = rate.lines
  assert list(rate_line.get_xdata()) == [2, 4, 6]
  assert list(rate_line.get_ydata()) == [0.1, 0.15, 0.05]
  assert rate.get_title() == 'Learning rate' and rate.get_yscale() == 'linear'  # 3× apart.
  assert panel_texts(loss) == [] and panel_texts(rate) == []  # Nothing to excuse.


def rate_panel(rates):
  """The learning-rate panel of a run whose updates 1, 2, … had these rates."""
  train = [{'kind': 'train', 'step': step, 'loss': 1.0, 'learning_rate': value}
           for step, value in enumerate(rates, 1)]
  return plots.learning_curve_figure({'train': train}).axes[2]


@pytest.mark.parametrize('rates, scale', [
    ([1e-4, 5e-4, 1e-3, 1.01e-3], 'log'),  # A warm-up from a tenth of the peak and a little.
    ([0.1, 1.0, 0.5, 0.01], 'log'),  # Warm-up, then decay to a hundredth of the peak.
    ([0.1, 1.0, 0.5], 'linear'),  # Exactly 10× is not more than 10×.
    ([0.5, 0.4, 0.3], 'linear'),
    ([0.0, 1.0, 0.001], 'linear'),  # A rate of 0 cannot sit on a log axis.
    ([0.25], 'linear')])
def test_the_rate_axis_is_logarithmic_only_where_the_rates_span_more_than_10x(rates, scale):
  axes = rate_panel(rates)
  assert axes.get_yscale() == scale
  assert list(axes.lines[0].get_ydata()) == rates


def valid_records(epochs):
  return [{'kind': 'valid', 'step': 10 * k, 'ppl': 100.0 - k, 'epoch': epoch}
          for k, epoch in enumerate(epochs, 1)]


def test_validations_are_labelled_with_their_epoch_whole_or_part_way():
  figure = plots.learning_curve_figure({'valid': valid_records([0.5, 1, 1.5, 2, 2.25])})
  perplexity = figure.axes[1]
  assert panel_texts(perplexity) == ['epoch 0.50', 'epoch 1', 'epoch 1.50', 'epoch 2',
                                     'epoch 2.25']
  assert [text.xy for text in perplexity.texts] == [(10 * k, 100.0 - k) for k in range(1, 6)]


def test_twelve_validations_are_labelled_and_thirteen_are_not():
  twelve = [k / 4 for k in range(1, 13)]
  figure = plots.learning_curve_figure({'valid': valid_records(twelve)})
  assert len(panel_texts(figure.axes[1])) == 12
  figure = plots.learning_curve_figure({'valid': valid_records(twelve + [3.25])})
  perplexity = figure.axes[1]
  assert panel_texts(perplexity) == []  # Labels would pile up: the curve alone.
  assert list(perplexity.lines[0].get_ydata()) == [100.0 - k for k in range(1, 14)]


def test_records_without_a_learning_rate_say_so_in_its_panel():
  """metrics.jsonl from before the rate was recorded; a resumed run's later records have it."""
  old = [{'kind': 'train', 'step': s, 'loss': 5.0 / s} for s in (1, 2, 3)]
  rate = plots.learning_curve_figure({'train': old}).axes[2]
  assert panel_texts(rate) == ['no learning rate in these records\n'
                               '(written before nplm recorded it)']
  assert list(rate.lines[0].get_ydata()) == []
  resumed = old + [{'kind': 'train', 'step': 4, 'loss': 1.0, 'learning_rate': 0.3}]
  rate = plots.learning_curve_figure({'train': resumed}).axes[2]
  assert panel_texts(rate) == [] and list(rate.lines[0].get_xdata()) == [4]


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


@pytest.mark.slow
def test_a_run_without_records_or_epochs_still_draws(tmp_path, drawn):
  (tmp_path / 'metrics.jsonl').write_text('')
  path = plots.learning_curve(tmp_path)
  assert path.read_bytes().startswith(PNG)
  assert_a_drawing(path)
  loss, perplexity, rate = drawn[0].axes
  assert panel_texts(loss) == panel_texts(rate) == ['no progress record yet']
  assert panel_texts(perplexity) == ['no validation record']
  rows = [{'point': 'lr=0.1', 'valid_ppl': None, 'test_ppl': None},  # Diverged: no bars.
          {'point': 'lr=0.01', 'valid_ppl': 170.0, 'test_ppl': 160.0}]
  path = plots.sweep_results(rows, tmp_path / 'results.png', baseline=('KN5', 188.3))
  assert path.read_bytes().startswith(PNG)
  assert_a_drawing(path)


def test_only_a_learning_curve_without_validation_says_so(tmp_path, drawn):
  write_metrics(tmp_path, [{'kind': 'train', 'step': s, 'loss': 5.0 / s} for s in (1, 2, 3)])
  plots.learning_curve(tmp_path)
  loss, perplexity, _ = drawn[0].axes
  assert list(loss.lines[0].get_ydata()) == [5.0, 2.5, 5.0 / 3] and panel_texts(loss) == []
  assert panel_texts(perplexity) == ['no validation record']
