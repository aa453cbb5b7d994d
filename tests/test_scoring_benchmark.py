"""The scoring benchmark on a tiny model and file: what it prints, and that it counts the
file's tokens as nplm scores them (each line's words and its <eos>)."""

import importlib.util
import re

import pytest

from experiments.benchmarks import scoring
from nplm.trainer import run
from tests.conftest import write_text_corpus
from tests.test_train import tiny_config

pytestmark = pytest.mark.slow


def test_the_benchmark_times_every_token_of_its_file(tmp_path):
  config = tiny_config(tmp_path / 'run', dataset=f'text:{write_text_corpus(tmp_path / "text")}',
                       data_dir=str(tmp_path / 'tfds'), train_tokens=0, valid_tokens=0,
                       max_steps=3, eval_batch_size=64)
  run(config)
  file = tmp_path / 'sentences.txt'
  report = scoring.benchmark(config.workdir, 3000, 1, str(file), tmp_path)
  lines = file.read_text().splitlines()
  tokens = sum(len(line.split()) + 1 for line in lines)  # Its words, then <eos>.
  assert 3000 <= tokens < 3000 + 42 and all(5 <= len(line.split()) <= 40 for line in lines)
  assert report['nplm']['tokens'] == tokens and report['sentences'] == len(lines)
  printed = scoring.formatted(report)
  assert f'{len(lines):,} sentences, {tokens:,} tokens' in printed
  rate = re.search(r'score_sentences, nnlm order 3, --head=softmax: ([\d,]+) tokens/s', printed)
  assert rate and float(rate.group(1).replace(',', '')) > 0, printed
  assert 'cores' in printed.splitlines()[0]
  if importlib.util.find_spec('kenlm'):  # The optional peer: its rate and the ratio.
    assert report['kenlm']['tokens'] == tokens and 'nplm KN5 / KenLM: ' in printed
    # The peer scored the same model: nplm's KN5 and KenLM's reading of its ARPA agree.
    assert abs(report['kenlm']['log10_prob'] - report['nplm_kn5']['log10_prob']) < 1e-2
  else:
    assert 'KenLM: not installed' in printed
