"""`python -m experiments.brown`: one-line errors for user mistakes, the Python API, and a
smoke run on the real Brown corpus."""

import json
import math
import subprocess
import sys
from pathlib import Path

from nplm import train
from tests.test_train import tiny_config

ROOT = Path(__file__).parent.parent


def run_cli(*flags: str, timeout: int = 300) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, '-m', 'experiments.brown', *flags], cwd=ROOT,
                        capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess, *phrases: str) -> None:
  assert result.returncode == 2, result.stderr
  assert 'Traceback' not in result.stderr, result.stderr
  errors = [line for line in result.stderr.splitlines() if line.startswith('error: ')]
  assert len(errors) == 1 and result.stderr.rstrip().endswith(errors[0]), result.stderr
  for phrase in phrases:
    assert phrase in errors[0]


def test_invalid_flags_give_one_clear_line(tmp_path):
  result = run_cli('--flagfile=experiments/flags/mlp9.flags', '--order=1',
                   f'--workdir={tmp_path}/run')
  assert_one_line_error(result, '--order must be at least 2')
  assert not (tmp_path / 'run').exists()


def test_a_missing_corpus_gives_one_clear_error(tmp_path):
  result = run_cli(f'--corpus_dir={tmp_path}/nowhere', f'--data_dir={tmp_path}/tfds',
                   f'--workdir={tmp_path}/run', '--max_steps=1')
  assert_one_line_error(result, str(tmp_path / 'nowhere'))


def test_python_api_returns_the_summary(tiny_corpus, tmp_path):
  summary = train.run(tiny_config(tmp_path / 'run', epochs=1), tiny_corpus)
  assert summary['status'] == 'epochs_done' and summary['epochs'] == 1
  assert json.loads((tmp_path / 'run' / 'summary.json').read_text())['test_ppl'] == (
      summary['test_ppl'])
  assert (tmp_path / 'run' / 'learning_curve.png').read_bytes().startswith(b'\x89PNG')


def test_flagfiles_hold_the_table1_shapes():
  shapes = {'mlp1': (5, 50, 60, 'true'), 'mlp3': (5, 0, 60, 'true'), 'mlp5': (5, 50, 30, 'true'),
            'mlp7': (3, 50, 30, 'true'), 'mlp9': (5, 100, 30, 'false')}
  for row, (order, hidden, features, direct) in shapes.items():
    lines = (ROOT / 'experiments' / 'flags' / f'{row}.flags').read_text().splitlines()
    for flag in (f'--order={order}', f'--hidden_size={hidden}', f'--feature_size={features}',
                 f'--direct={direct}'):
      assert flag in lines, (row, flag)


def test_real_corpus_smoke_run(real_data_dir, tmp_path):
  """Prepares the real corpus (fetching it once if needed) and trains a few steps."""
  data_dir = real_data_dir
  workdir = tmp_path / 'run'
  result = run_cli(f'--data_dir={data_dir}', f'--workdir={workdir}', '--order=3',
                   '--feature_size=8', '--hidden_size=16', '--max_steps=10', '--log_every=1',
                   '--learning_rate=0.03',
                   '--eval_batch_size=8192', timeout=900)
  assert result.returncode == 0, result.stderr
  summary = json.loads((workdir / 'summary.json').read_text())
  assert summary['status'] == 'max_steps' and summary['steps'] == 10
  assert summary['tokens'] == {'train': 800_000, 'valid': 200_000, 'test': 177_359}
  assert 13_000 < summary['vocab_size'] < 18_000
  # Ten large updates learn at least the unigram frequencies: far below |V|.
  assert math.isfinite(summary['test_ppl']) and summary['test_ppl'] < summary['vocab_size'] / 2
  assert 'perplexity' in result.stdout and 'step 10' in result.stderr
