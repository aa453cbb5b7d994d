"""The heads benchmark on tiny data: every head timed and reported, training reused.

Building one head's real runner (eager init, then XLA compiling its train step) takes 3-5
seconds on 2 cores, so the report's structure is checked with stand-in runners, and only
two heads run their real steps; training uses only the softmax. The timed runs last what the
tests say (tests/benchmark_clock.py): rates and speed-ups are checked against hand counts.
"""

import json

import numpy as np
import pytest

from experiments.benchmarks import heads as heads_benchmark
from nplm.config import Config
from nplm.heads import HEADS
from tests.benchmark_clock import BenchmarkClock
from tests.conftest import TINY_SPLIT

TINY_SHAPE = dict(order=3, feature_size=2, hidden_size=3, direct=True)
TINY_VOCAB = 40
# The default cutoffs (80% and 95% of the tokens) suit Brown; a 40-word vocabulary gets its
# own, explicitly: a shortlist of 8 and two tails.
TINY_OVERRIDES = {'adaptive_cutoffs': '8,20'}


def zipf_counts(size: int) -> np.ndarray:
  return np.maximum(1000 // np.arange(1, size + 1), 1)


def tiny_ids(size: int, seed: int = 0) -> np.ndarray:
  return np.random.default_rng(seed).integers(0, TINY_VOCAB, size).astype(np.int32)


# Each stand-in run of the i-th head of HEADS lasts 2^-i seconds (its output layer's, 4^-i):
# head i is 2^i (4^i) times as fast as the softmax.
STEP_SECONDS = {head: 2.0 ** -i for i, head in enumerate(HEADS)}
LAYER_SECONDS = {head: 4.0 ** -i for i, head in enumerate(HEADS)}


class FakeRunners:
  """Stands in for benchmark.jax_runner: records which head ran when, and takes
  STEP_SECONDS (LAYER_SECONDS) on the benchmark's clock."""

  def install(self, monkeypatch):
    """Both the train-step and the output-layer runners record into the same list."""
    monkeypatch.setattr(heads_benchmark, 'jax_runner', self)
    monkeypatch.setattr(heads_benchmark, 'output_layer_runner',
                        lambda *args: self(*args, seconds=LAYER_SECONDS)[0])
    self.clock.install(monkeypatch)

  def __init__(self):
    self.calls = []
    self.clock = BenchmarkClock()

  def __call__(self, config, counts, padded_split, seconds=STEP_SECONDS):
    def run_steps(batches):
      self.calls.append(config.head)
      self.clock.elapse(seconds[config.head])
      return 1.0
    return run_steps, None


def test_every_head_is_reported_and_the_repeats_are_interleaved(monkeypatch, tmp_path):
  runners = FakeRunners()
  runners.install(monkeypatch)
  heads = [h for h in HEADS if h != 'softmax']  # The baseline is added, first.
  report = heads_benchmark.run_heads_benchmark(
      tiny_ids(200), zipf_counts(TINY_VOCAB), boundary_id=1, heads=heads,
      shapes={'tiny': TINY_SHAPE}, batch_size=8, steps=2, repeats=3, epochs=0, num_samples=5,
      out=str(tmp_path), overrides=TINY_OVERRIDES, command='pytest')
  # One warm-up each, then repeat r of every head before repeat r + 1: the train steps,
  # then the output layers alone.
  assert runners.calls == list(HEADS) * 4 * 2
  assert report['vocab_size'] == TINY_VOCAB and not report['trained']
  (shape,) = report['shapes']
  results = {r['head']: r for r in shape['heads']}
  assert list(results) == list(HEADS)
  assert results['softmax']['speedup'] == 1.0
  for r in results.values():
    rate = r['rate']
    assert len(rate['runs']) == 3 and 0 < rate['min'] <= rate['median'] <= rate['max']
    assert r['speedup'] == rate['median'] / results['softmax']['rate']['median']
    layer = r['output_layer_rate']
    assert r['output_layer_speedup'] == (
        layer['median'] / results['softmax']['output_layer_rate']['median'])
    # Each head's config holds the settings it reads, the defaults of the others.
    sampling = r['head'] in ('is', 'nce', 'negative_sampling')
    assert r['config']['head'] == r['head'] and r['config']['num_samples'] == (
        5 if sampling else 100)
    assert r['config']['adaptive_cutoffs'] == ('8,20' if r['head'] == 'adaptive' else '')
    assert r['config']['optimizer'] == 'adamw'
    assert r['summary'] is None and r['test_ppl_ratio'] is None
  # 2 steps of 8 examples a run, at the seconds each head's stand-in takes.
  for i, r in enumerate(results.values()):
    assert r['rate']['runs'] == [16 * 2**i] * 3 and r['speedup'] == 2**i
    assert r['output_layer_rate']['runs'] == [16 * 4**i] * 3
    assert r['output_layer_speedup'] == 4**i

  markdown = heads_benchmark.format_report(report)
  for head in HEADS:
    assert f'| {head} ' in markdown
  second = list(HEADS)[1]
  assert f'| {second} | 32 [32–32] | 2.00× | 64 | 4.0× | — | — | — |' in markdown
  assert markdown.count('\n| ') == 1 + len(HEADS)  # The header and a row per head.
  assert 'negative_sampling (not a LM)' in markdown and '`pytest`' in markdown
  assert '| 1.00× |' in markdown and '| 1.0× | — | — | — |' in markdown and 'interleaved' in markdown

  heads_benchmark.write_report(report, str(tmp_path / 'out'))
  assert json.loads((tmp_path / 'out' / 'heads_benchmark.json').read_text()) == report
  assert (tmp_path / 'out' / 'heads_benchmark.md').read_text() == markdown


def test_shapes_get_a_table_each_and_sequential_timing_takes_one_head_at_a_time(monkeypatch):
  runners = FakeRunners()
  runners.install(monkeypatch)
  shapes = {'a': TINY_SHAPE, 'b': {**TINY_SHAPE, 'direct': False}}
  report = heads_benchmark.run_heads_benchmark(
      tiny_ids(100), zipf_counts(TINY_VOCAB), boundary_id=1, heads=['tree'], shapes=shapes,
      batch_size=8, steps=2, repeats=2, epochs=0, interleave=False)
  one_shape = (['softmax'] * 3 + ['tree'] * 3) * 2  # Train steps, then output layers.
  assert runners.calls == one_shape * 2
  assert [s['shape'] for s in report['shapes']] == ['a', 'b']
  markdown = heads_benchmark.format_report(report)
  assert '### a (' in markdown and '### b (' in markdown and 'interleaved' not in markdown


@pytest.mark.slow
def test_real_train_steps_are_timed(monkeypatch):
  """The real jitted steps, of the softmax and of the head that needs the tiny cutoffs."""
  BenchmarkClock(tick=0.5).install(monkeypatch)  # Every timed run takes 0.5 s.
  report = heads_benchmark.run_heads_benchmark(
      tiny_ids(200), zipf_counts(TINY_VOCAB), boundary_id=1,
      heads=['adaptive'], shapes={'tiny': TINY_SHAPE}, batch_size=8,
      steps=2, repeats=2, epochs=0, num_samples=5, overrides=TINY_OVERRIDES)
  results = report['shapes'][0]['heads']
  assert [r['head'] for r in results] == ['softmax', 'adaptive']
  assert results[0]['speedup'] == 1.0
  for r in results:
    assert r['rate']['min'] > 0 and np.isfinite(r['rate']['last_loss'])
    for rate in (r['rate'], r['output_layer_rate']):
      assert set(rate) == {'median', 'min', 'max', 'runs', 'seconds_per_step', 'last_loss'}
      assert rate['min'] > 0 and np.isfinite(rate['last_loss'])
      assert rate['runs'] == [32.0, 32.0]  # 2 steps of 8 examples in 0.5 s.


@pytest.mark.slow
def test_training_reports_exact_perplexities_and_reuses_finished_runs(tiny_corpus, tmp_path):
  corpus = tiny_corpus
  boundary = int(corpus.vocab.encode(['</text>'])[0])
  args = (corpus.splits['train'], corpus.vocab.counts, boundary, corpus)
  kwargs = dict(heads=['softmax'], shapes={'tiny': TINY_SHAPE}, batch_size=16, steps=1,
                repeats=1, epochs=1, learning_rate=1e-2, out=str(tmp_path),
                overrides={'unk_max_count': 1, **TINY_SPLIT})
  report = heads_benchmark.run_heads_benchmark(*args, **kwargs)
  assert report['trained']
  (softmax,) = report['shapes'][0]['heads']
  summary = softmax['summary']
  assert summary['epochs'] == 1 and not summary['reused']
  assert summary['config']['patience'] == 1 and summary['config']['optimizer'] == 'adamw'
  assert np.isfinite(summary['valid_ppl']) and summary['test_ppl'] > 1
  assert softmax['test_ppl_ratio'] == 1.0
  assert (tmp_path / 'runs' / 'tiny_softmax' / 'summary.json').exists()
  written = json.loads((tmp_path / 'runs' / 'tiny_softmax' / 'summary.json').read_text())
  assert (written['valid_ppl'], written['test_ppl']) == (summary['valid_ppl'], summary['test_ppl'])
  markdown = heads_benchmark.format_report(report)
  assert 'valid ppl after 1 epochs' in markdown and f'{summary["test_ppl"]:.1f}' in markdown

  again = heads_benchmark.run_heads_benchmark(*args, **kwargs)
  reused = again['shapes'][0]['heads'][0]['summary']
  assert reused['reused'] and reused['test_ppl'] == summary['test_ppl']


def test_ratios_divide_by_the_softmax_test_perplexity():
  results = [{'head': 'class', 'summary': {'test_ppl': 300.0}},
             {'head': 'softmax', 'summary': {'test_ppl': 200.0}}]
  heads_benchmark.add_ppl_ratios(results)
  assert [r['test_ppl_ratio'] for r in results] == [1.5, 1.0]


def test_a_workdir_trained_longer_than_asked_is_refused(monkeypatch, tmp_path):
  # What nplm.trainer.run returns for a workdir an earlier --epochs=2 finished.
  monkeypatch.setattr(heads_benchmark.trainer, 'run',
                      lambda config, corpus: {'status': 'epochs_done', 'epochs': 2})
  config = Config(workdir='unused', **TINY_SHAPE)
  with pytest.raises(RuntimeError, match='holds 2 epochs, not 1'):
    heads_benchmark.train_head(config, None, 1, tmp_path / 'run')
