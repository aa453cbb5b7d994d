"""experiments/benchmarks/word2vec_kernel.py as a user runs it: two builds of one source, timed
side by side, give the same tables (a build is deterministic) and one line each."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from nplm.training import word2vec_native

ROOT = Path(__file__).parent.parent


@pytest.mark.slow
def test_two_builds_of_one_source_give_the_same_step(tmp_path):
  if word2vec_native.unavailable():
    pytest.fail(f'the compiled update is needed here: {word2vec_native.unavailable()}')
  for path in (word2vec_native.SOURCE, *word2vec_native.HEADERS):  # Another directory.
    (tmp_path / path.name).write_bytes(path.read_bytes())
  sources = [str(word2vec_native.SOURCE.relative_to(ROOT)),
             str(tmp_path / 'word2vec_update.cc')]
  result = subprocess.run(
      [sys.executable, '-m', 'experiments.benchmarks.word2vec_kernel',
       f'--sources={",".join(sources)}', '--model=cbow', '--head=negative_sampling',
       '--batch_size=256', '--chunk_positions=32', '--repetitions=3'],
      cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-2000:]
  lines = result.stdout.strip().splitlines()
  assert lines[0] == ('cbow, negative_sampling, 256 positions, chunks of 32, 1 thread(s), '
                      '3 repetitions')
  pattern = (r'(.+): median [\d.]+ ms, least [\d.]+ ms, largest difference from the first '
             r'(\S+), first / this [\d.]+')
  found = [re.fullmatch(pattern, line).groups() for line in lines[1:]]
  assert found == [(sources[0], '0'), (sources[1], '0')]
