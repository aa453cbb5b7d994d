"""The scale benchmark's whole path on a tiny corpus (20,000 tokens, 2 heads, 3 steps): every
phase measured, the evaluated tokens counted from the text files, each figure and goal
recomputed from the measured ones."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests import cli

pytestmark = pytest.mark.slow

HEADS = ('nce', 'tree')
HIDDEN = 128  # The benchmark's --hidden_size; no direct connections: D = 128.
MATMUL_SIZE = 256
FLAGS = ['--tokens=20000', '--types=300', '--baseline_tokens=20000', '--baseline_types=100',
         '--max_steps=3', f'--heads={",".join(HEADS)}', f'--matmul_size={MATMUL_SIZE}']


def benchmark(*flags: str) -> subprocess.CompletedProcess:
  return cli.run(*flags, module='experiments.benchmarks.scale', timeout=600)


def split_tokens(corpus_dir: Path) -> dict:
  """A text:DIR split's tokens: each line's whitespace words and its end (<eos>)."""
  return {split: sum(len(line.split()) + 1 for line in
                     (corpus_dir / f'{split}.txt').read_text().splitlines())
          for split in ('train', 'valid', 'test')}


@pytest.fixture(scope='module')
def measured(tmp_path_factory):
  out = tmp_path_factory.mktemp('scale')
  result = benchmark(f'--out={out}', *FLAGS)
  assert result.returncode == 0, result.stderr[-3000:]
  return out, json.loads((out / 'scale.json').read_text()), result.stdout


def test_every_phase_is_measured(measured):
  _, report, _ = measured
  for corpus in ('scale', 'baseline'):
    for step in ('prepare', 'load'):
      assert report[corpus][step]['seconds'] > 0 and report[corpus][step]['peak'] > 0
    for head in HEADS:
      phases = report[corpus]['runs'][head]['phase_seconds']
      assert set(phases) == {'load', 'build', 'compile', 'train', 'checkpoints', 'validation',
                             'evaluation'}
      assert all(phases[p] > 0 for p in ('load', 'build', 'compile', 'train'))
      assert phases['validation'] == 0  # 3 steps end no epoch: nothing validated.
      assert set(phases['evaluation']) == {'valid', 'test'}
      assert all(seconds > 0 for seconds in phases['evaluation'].values())
      assert report[corpus]['runs'][head]['steps'] == 3


def test_the_evaluated_tokens_are_the_splits_of_the_text(measured):
  out, report, _ = measured
  for corpus, where in (('scale', out), ('baseline', out / 'baseline')):
    tokens = split_tokens(where / 'corpus')
    assert report[corpus]['load']['tokens'] == tokens
    for head in HEADS:
      assert report[corpus]['runs'][head]['tokens'] == {s: tokens[s] for s in ('valid', 'test')}


def test_peak_memory_is_read_per_process(measured):
  _, report, _ = measured
  physical = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
  for corpus in ('scale', 'baseline'):
    for head in HEADS:
      peak = report[corpus]['runs'][head]['peak']
      assert 100 << 20 < peak < physical  # An interpreter with JAX; less than the machine.


def test_figures_and_goals_follow_from_the_measurements(measured):
  out, report, _ = measured
  tokens = split_tokens(out / 'corpus')
  matmul = report['matmul']
  assert matmul['shape'] == [MATMUL_SIZE] * 3 and matmul['flops_per_second'] > 0
  for head in HEADS:
    run, f = report['scale']['runs'][head], report['figures'][head]
    baseline = report['baseline']['runs'][head]
    assert f['slowdown'] == pytest.approx(baseline['train_examples_per_second']
                                          / run['train_examples_per_second'])
    for split in ('valid', 'test'):
      rate = tokens[split] / run['phase_seconds']['evaluation'][split]
      assert f['evaluation_tokens_per_second'][split] == pytest.approx(rate)
      if head == 'nce':  # Scored through every output row: 2·D·|V| FLOPs per token.
        flops = 2 * HIDDEN * run['vocab_size'] * rate
        assert f['output_flops_per_second'][split] == pytest.approx(flops)
        assert f['matmul_share'][split] == pytest.approx(flops / matmul['flops_per_second'])
    assert f['full_softmax'] == (head == 'nce')
    ids = 4 * sum(tokens.values())
    assert f['beyond_ids'] == run['peak'] - ids
    assert f['memory']['batch order'] == 4 * tokens['train']
    assert f['memory']['model state'] >= 4 * run['parameters']  # float32 parameters at least
    assert sum(f['memory'].values()) == run['peak']
  met = {(g['head'], g['goal'][:12]): g['met'] for g in report['goals']}
  for head in HEADS:
    f = report['figures'][head]
    assert met[head, 'peak RSS bey'] == (f['beyond_ids'] < 2e9)
    assert met[head, 'examples/s a'] == (f['slowdown'] <= 2)
  assert met['nce', 'exact evalua'] == (min(report['figures']['nce']['matmul_share'].values())
                                        >= 0.5)
  assert ('tree', 'exact evalua') not in met  # No full softmax to compare.


def test_the_report_names_every_command_it_ran(measured):
  out, report, printed = measured
  steps = [c['step'] for c in report['commands']]
  assert steps == [f'{step} ({name})' for name in ('scale', 'baseline')
                   for step in ('prepare', 'load', *(f'train {h}' for h in HEADS))]
  trains = [c['argv'] for c in report['commands'] if c['step'].startswith('train')]
  assert all('--eval_splits=valid,test' in argv and '--max_steps=3' in argv for argv in trains)
  markdown = (out / 'scale.md').read_text()
  for text in (printed, markdown):
    assert 'exact evaluation ≥ 50% of the matmul rate' in text
    assert 'nplm.cli train' in text


def test_an_unknown_head_is_one_line_and_status_2(tmp_path):
  result = benchmark(f'--out={tmp_path}', '--heads=nce,bogus')
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      'error: --heads: unknown bogus; known: softmax, class, tree, is, nce, '
      'negative_sampling, adaptive']


@pytest.mark.parametrize('item', ['adaptive', 'adaptive:0', 'bogus:5', 'tree:x'])
def test_a_malformed_steps_per_head_is_one_line_and_status_2(tmp_path, item):
  result = benchmark(f'--out={tmp_path}', f'--steps_per_head={item}')
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      f"error: --steps_per_head: {item!r} is not HEAD:STEPS (a known head, a positive count)"]
  assert not (tmp_path / 'corpus').exists()  # Refused before anything was written.


def test_runs_take_more_flags_and_may_score_no_split(tmp_path):
  """--train_flags reach every run (a checkpoint each update: the cadence before and after
  checkpoints by time set side by side); --eval_splits=none scores nothing at the end, and
  the report says so instead of failing on the missing figures."""
  flags = [f for f in FLAGS if not f.startswith('--heads')]
  result = benchmark(f'--out={tmp_path}', *flags, '--heads=nce', '--eval_splits=none',
                     '--train_flags=--checkpoint_every=1,--checkpoint_minutes=0')
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((tmp_path / 'scale.json').read_text())
  run = report['scale']['runs']['nce']
  assert run['phase_seconds']['evaluation'] == {} and run['valid_ppl'] is None
  assert run['phase_seconds']['checkpoints'] > 0
  trains = [c['argv'] for c in report['commands'] if c['step'].startswith('train')]
  assert all(argv[-2:] == ['--checkpoint_every=1', '--checkpoint_minutes=0'] for argv in trains)
  assert not any(g['goal'].startswith('exact evaluation') for g in report['goals'])
  assert 'more flags: --checkpoint_every=1 --checkpoint_minutes=0' in result.stdout
  assert 'Exact evaluation: none (--eval_splits=none).' in result.stdout
