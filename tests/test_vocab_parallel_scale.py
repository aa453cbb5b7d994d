"""The vocabulary-parallel scale benchmark at a tiny |V| (2,002): its corpus holds every type,
both runs give the same numbers, and each of 8 simulated devices holds 1/8 of the output
layer (counted here from the shapes) where one device holds all of it. Three child processes:
the preparation and the two runs."""

import math
from pathlib import Path

import numpy as np
import pytest

from experiments.benchmarks import vocab_parallel_scale as benchmark

pytestmark = pytest.mark.slow

TYPES, TRAIN_TOKENS, HELDOUT_TOKENS, STEPS, DEVICES = 2_000, 20_000, 500, 2, 8
VOCAB = TYPES + 2  # <unk> and <eos> beside the training types.
HIDDEN = 64  # The runs' --hidden_size: the width of an output row.
ROW_BYTES = (HIDDEN + 1) * 4  # One output row: its float32 embedding and bias.
RTOL = 1e-5


@pytest.fixture(scope='module')
def benchmark_run(tmp_path_factory) -> tuple[Path, dict]:
  out = tmp_path_factory.mktemp('vocab_parallel')
  return out, benchmark.run_benchmark(out, TYPES, TRAIN_TOKENS, HELDOUT_TOKENS, STEPS, DEVICES,
                                      RTOL)


def test_the_vocabulary_is_every_training_type_and_the_specials(benchmark_run):
  out, report = benchmark_run
  train = (out / 'corpus' / 'train.txt').read_text().split()
  assert len(train) == TRAIN_TOKENS and len(set(train)) == TYPES
  for split in ('valid', 'test'):
    held_out = (out / 'corpus' / f'{split}.txt').read_text().split()
    assert len(held_out) == HELDOUT_TOKENS and set(held_out) <= set(train)
  assert report['corpus']['vocab_size'] == VOCAB
  assert [run['vocab_size'] for run in report['runs']] == [VOCAB, VOCAB]
  assert '--hidden_size=64' in report['run_flags']


def test_both_runs_give_the_same_numbers(benchmark_run):
  _, report = benchmark_run
  one, many = report['runs']
  assert sorted(one['losses']) == sorted(many['losses']) == list(range(1, STEPS + 1))
  ones = [one['losses'][step] for step in range(1, STEPS + 1)] + [one['valid_ppl'],
                                                                   one['test_ppl']]
  manys = [many['losses'][step] for step in range(1, STEPS + 1)] + [many['valid_ppl'],
                                                                     many['test_ppl']]
  np.testing.assert_allclose(manys, ones, rtol=RTOL)
  # The first loss is a full softmax's over |V| words from a small initialization: ~ ln |V|.
  assert one['losses'][1] == pytest.approx(math.log(VOCAB), abs=0.1)
  verdict = report['comparison']
  assert [row[1:3] for row in verdict['rows']] == [list(pair) for pair in zip(ones, manys)]
  worst = max(abs(b - a) / abs(a) for a, b in zip(ones, manys))
  assert verdict['max_relative_difference'] == pytest.approx(worst) and verdict['same']


def test_each_device_holds_its_slice_of_the_output_layer(benchmark_run):
  _, report = benchmark_run
  one, many = report['runs']
  assert one['output_bytes'] == {0: VOCAB * ROW_BYTES}
  assert one['output_bytes_unpadded'] == many['output_bytes_unpadded'] == VOCAB * ROW_BYTES
  # 2,002 rows padded to 2,008: 251 rows on each device, 1/8 of the padded layer.
  per_device = math.ceil(VOCAB / DEVICES) * ROW_BYTES
  assert many['output_rows'] == math.ceil(VOCAB / DEVICES) * DEVICES
  assert many['output_bytes'] == {device: per_device for device in range(DEVICES)}
  # Everything else is replicated: each device holds what the one device holds beside it.
  rest = one['state_bytes'][0] - one['output_bytes'][0]
  assert many['state_bytes'] == {device: rest + per_device for device in range(DEVICES)}


def test_the_report_names_its_commands_times_and_memory(benchmark_run):
  _, report = benchmark_run
  prepare, one_device, eight = report['commands']
  assert 'prepare' in prepare and 'JAX_NUM_CPU_DEVICES=1' in one_device
  assert 'JAX_NUM_CPU_DEVICES=8' in eight and '--mesh=model:8' in eight
  assert [run['mesh'] for run in report['runs']] == [{'data': 1, 'model': 1},
                                                     {'data': 1, 'model': DEVICES}]
  for run in report['runs']:
    assert run['step_seconds'] > 0 and run['peak_rss'] > 0
  text = benchmark.format_report(report)
  assert 'the same numbers within 1e-05' in text and eight in text
  assert '| model:8 | 7 | 0.06 | 12.537% |' in benchmark.format_report(report, markdown=True)
