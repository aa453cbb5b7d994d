"""The benchmark's measurement functions on a tiny vocabulary: structure, FLOP counts, and
every rate and ratio of a report against counts by hand (on a clock whose runs last 0.5 s)."""

import json

import numpy as np
import pytest

from experiments.benchmarks import harness
from experiments.benchmarks import nnlm as benchmark
from experiments.benchmarks import nnlm_step
from tests.benchmark_clock import BenchmarkClock

TINY_SHAPE = dict(order=3, feature_size=2, hidden_size=3, direct=True)
TINY_VOCAB = 10


def test_analytic_flops_match_a_hand_count():
  # x: (n-1)·m = 4 features; hidden = concat(x, tanh) = 4 + 3 = 7; B = 4, |V| = 10.
  # Forward 2·4·(4·3 + 7·10) = 656 FLOPs; with the backward (twice the forward): 1968.
  assert benchmark.analytic_step_flops(harness.shape_config(TINY_SHAPE, 4), TINY_VOCAB) == 1968
  # Without direct connections the output layer sees only tanh: 3·(2·4·(4·3 + 3·10)) = 1008.
  no_direct = harness.shape_config({**TINY_SHAPE, 'direct': False}, 4)
  assert benchmark.analytic_step_flops(no_direct, TINY_VOCAB) == 1008


class _Compiled:
  def __init__(self, cost):
    self.cost = cost

  def cost_analysis(self):
    return self.cost


def test_xla_flops_reads_a_dict_or_a_list_of_dicts():
  assert benchmark.xla_flops(_Compiled({'flops': 5.0})) == 5.0
  assert benchmark.xla_flops(_Compiled([{'flops': 7.0}])) == 7.0
  assert benchmark.xla_flops(_Compiled({})) is None


def test_batches_continue_into_the_next_epoch_when_the_split_is_short():
  batches = harness.benchmark_batches(num_examples=10, batch_size=4, steps=5)
  assert len(batches) == 5
  assert [int(mask.sum()) for _, mask in batches] == [4, 4, 2, 4, 4]


def test_rates_count_the_real_examples_only():
  batches = harness.benchmark_batches(num_examples=10, batch_size=4, steps=3)  # 4 + 4 + 2 real.
  assert harness.rate_summary([2.0, 1.0, 4.0], batches, 0.5) == {
      'median': 5.0, 'min': 2.5, 'max': 10.0, 'runs': [5.0, 10.0, 2.5],
      'seconds_per_step': pytest.approx(2.0 / 3), 'last_loss': 0.5}


@pytest.mark.slow
def test_run_benchmark_reports_every_measurement(tmp_path, monkeypatch):
  BenchmarkClock(tick=0.5).install(monkeypatch)  # Every timed run (or matmul) takes 0.5 s.
  ids = np.random.default_rng(0).integers(0, TINY_VOCAB, 100).astype(np.int32)
  report = benchmark.run_benchmark(ids, np.ones(TINY_VOCAB), boundary_id=1, batch_size=4, steps=2,
                                   repeats=2, shapes={'tiny': TINY_SHAPE}, with_torch=False,
                                   square=16, updates_per_call=2)
  assert report['machine']['cores'] >= 1 and report['settings']['repeats'] == 2
  assert report['square_matmul']['gflops_per_s'] > 0
  assert report['square_matmul']['gflops_per_s'] == pytest.approx(2 * 16**3 / 0.5 / 1e9)
  (result,) = report['shapes']
  rate = result['jax']
  assert len(rate['runs']) == 2 and rate['min'] <= rate['median'] <= rate['max']
  # A run: 2 steps of 4 examples in 0.5 s.
  assert rate['runs'] == [16.0, 16.0] and rate['seconds_per_step'] == 0.25
  assert np.isfinite(rate['last_loss'])
  # XLA counts the matmuls and also the softmax, tanh and AdamW element-wise work.
  assert result['step_flops']['analytic'] == 1968
  assert result['step_flops']['xla'] >= result['step_flops']['analytic']
  assert result['step_gflops_per_s'] > 0 and result['share_of_matmul'] > 0
  step_gflops = result['step_flops']['xla'] / 0.25 / 1e9
  assert result['step_gflops_per_s'] == pytest.approx(step_gflops)
  # The forward output layer's dot, [B, D]·[D, |V|]: D = (n-1)·m + h = 4 + 3.
  output_gflops = 2 * 4 * 7 * TINY_VOCAB / 0.5 / 1e9
  # And in bfloat16, as is and with D and |V| rounded up to multiples of 8: [4, 8]·[8, 16].
  assert result['output_matmul'] == {
      'dims': [4, 7, TINY_VOCAB], 'gflops_per_s': pytest.approx(output_gflops),
      'bfloat16': {'gflops_per_s': pytest.approx(output_gflops), 'aligned_dims': [4, 8, 16],
                   'aligned_gflops_per_s': pytest.approx(2 * 4 * 8 * 16 / 0.5 / 1e9)}}
  assert result['share_of_matmul'] == pytest.approx(step_gflops / output_gflops)
  assert result['torch'] is None and 'notorch' in result['torch_skipped']
  assert result['jax_bfloat16']['median'] > 0 and result['bfloat16_over_float32'] > 0
  assert result['jax_bfloat16']['runs'] == [16.0, 16.0] and result['bfloat16_over_float32'] == 1
  # The 2 steps in one call: the same losses as one a call, from the same state and batches.
  grouped = result['grouped']
  assert grouped['runs'] == [16.0, 16.0] and grouped['over_one_a_call'] == 1
  assert grouped['last_loss'] == rate['last_loss'] and 'over_torch' not in grouped
  assert ('nplm 2 updates a call (nplm train --updates_per_call), float32: tiny 16 '
          'examples/s [16–16], 1.00× one a call.') in benchmark.format_report(report)
  assert 'tiny' in benchmark.format_report(report)
  assert f'{2 * 16**3 / 0.5 / 1e9:.1f} GFLOP/s' in benchmark.format_report(report)
  assert (f'multiples of 8: tiny {output_gflops:.1f}, at [4, 8, 16] '
          f'{2 * 4 * 8 * 16 / 0.5 / 1e9:.1f} GFLOP/s.') in benchmark.format_report(report)

  benchmark.write_report(report, str(tmp_path / 'bench' / 'out.json'))
  assert json.loads((tmp_path / 'bench' / 'out.json').read_text())['shapes'][0]['shape'] == 'tiny'
  assert '| tiny |' in (tmp_path / 'bench' / 'out.md').read_text()
  assert (f'| tiny | 16 [16–16] | {result["step_flops"]["xla"] / 1e9:.3f} / 0.000 | '
          f'{step_gflops:.1f} | {output_gflops:.1f} | {step_gflops / output_gflops:.0%} | '
          'skipped | – | 16 | 1.00 |') in (tmp_path / 'bench' / 'out.md').read_text()
  assert sorted(p.name for p in (tmp_path / 'bench').iterdir()) == ['out.json', 'out.md']


def test_a_step_rate_counts_the_matmuls_at_least():
  """XLA's count of the whole update where it covers the matmuls (the CPU); the count by hand
  where XLA's falls short of it (its GPU cost analysis skips cuBLAS's products) or is missing."""
  assert benchmark.counted_flops({'xla': 6.379e9, 'analytic': 6.272e9}) == (6.379e9, 'XLA')
  assert benchmark.counted_flops({'xla': 5.577e9, 'analytic': 200.7e9}) == (200.7e9, 'by hand')
  assert benchmark.counted_flops({'xla': None, 'analytic': 2e9}) == (2e9, 'by hand')


def test_torch_comparison_runs_or_says_why_not():
  """Holds with and without PyTorch installed: a result, or the reason it was skipped."""
  config = harness.shape_config(TINY_SHAPE, 4)
  ids = np.arange(20, dtype=np.int32) % TINY_VOCAB
  padded = np.concatenate([np.ones(2, np.int32), ids])
  batches = harness.benchmark_batches(len(ids), 4, 2)
  run_steps, about = benchmark.torch_runner(config, TINY_VOCAB, padded)
  if run_steps is not None:
    assert np.isfinite(run_steps(batches)) and about['threads'] >= 1
  else:
    assert 'torch' in about.lower()


def test_the_peers_matmul_rate_is_timed_as_xlas_or_is_none_without_pytorch(monkeypatch):
  """Holds with and without PyTorch installed: its rate counted as harness.matmul_gflops
  counts XLA's (2·m·k·n FLOPs over the median run), or None."""
  BenchmarkClock(tick=0.5).install(monkeypatch)  # Every timed run takes 0.5 s.
  rate = benchmark.peer_matmul_gflops([4, 5, 6], repeats=2)
  try:
    import torch  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError:
    assert rate is None
    return
  assert rate == pytest.approx(2 * 4 * 5 * 6 / 0.5 / 1e9)


def test_the_report_sets_the_peers_matmul_rates_beside_xlas():
  rate = {'median': 30.0, 'min': 20.0, 'max': 40.0}
  shape = {'shape': 'MLP9', 'jax': rate, 'jax_bfloat16': rate, 'bfloat16_over_float32': 1.0,
           'torch': {**rate, 'version': '2.13.0', 'device': 'cpu', 'threads': 2},
           'jax_over_torch': 1.0, 'torch_skipped': None, 'step_gflops_per_s': 1.0,
           'step_flops': {'xla': 2e9, 'analytic': 2e9, 'counted_by': 'XLA'},
           'output_matmul': {'dims': [256, 101, 14039], 'gflops_per_s': 250.0,
                             'torch_gflops_per_s': 330.5},
           'share_of_matmul': 0.5}
  report = {'machine': {'cpu': 'a CPU', 'cores': 2, 'jax': '0', 'backend': 'cpu',
                        'device': '1 × cpu device', 'python': '3'},
            'vocab_size': 14039, 'settings': {'batch_size': 256, 'steps': 2, 'repeats': 2},
            'square_matmul': {'size': 2048, 'gflops_per_s': 296.25, 'torch_gflops_per_s': 345.0},
            'shapes': [shape]}
  text = benchmark.format_report(report)
  assert 'Float32 matmul 2048²: 296.2 GFLOP/s (PyTorch\'s: 345.0).' in text
  assert "output layer [B, D]·[D, |V|] timed alone: MLP9 330.5 GFLOP/s" in text
  # A report without them (PyTorch not installed, or written before they were measured).
  del report['square_matmul']['torch_gflops_per_s'], shape['output_matmul']['torch_gflops_per_s']
  text = benchmark.format_report(report)
  assert 'Float32 matmul 2048²: 296.2 GFLOP/s.' in text and 'timed alone: ' not in text


def test_an_unprepared_corpus_is_a_clear_error(tmp_path):
  with pytest.raises(harness.CorpusNotPrepared, match='not prepared'):
    harness.load_training_ids(str(tmp_path))


def test_the_step_parts_are_each_timed_and_the_step_both_ways(monkeypatch):
  """nnlm_step's report: every part timed once per block, the matmuls' rates from their
  FLOPs (2·B·D·|V|), the step as one program and as two."""
  monkeypatch.setitem(harness.SHAPES, 'TINY', TINY_SHAPE)
  ids = np.random.default_rng(0).integers(2, TINY_VOCAB, 200).astype(np.int32)
  report = nnlm_step.measure(ids, np.ones(TINY_VOCAB), 1, 'TINY', batch_size=4, steps=2,
                             repeats=1)
  parts = report['parts']
  assert len(parts) == 6 and all(part['seconds'] > 0 for part in parts.values())
  width = report['output_width']
  assert width == 7 and report['vocab_size'] == TINY_VOCAB  # (n-1)·m + h: direct.
  for name in ('output forward [B,D]·[D,|V|]', 'output gradient [|V|,B]·[B,D]',
               'hidden gradient [B,|V|]·[|V|,D]'):
    assert parts[name]['gflops_per_s'] == pytest.approx(
        2 * 4 * width * TINY_VOCAB / parts[name]['seconds'] / 1e9)
  assert set(report['whole_step']) == {'one program', 'two programs'}
  assert 'whole step, two programs' in nnlm_step.format_report(report, markdown=True)
