"""TFDS catalogue datasets by name: the real tiny_shakespeare and lm1b builders (TFDS's own
code) prepared offline, their downloads served from fixtures (tests/tfds_offline.py), and
trained through `nplm train --dataset=tfds:NAME` as a user types it (the prepared dataset then
read without TensorFlow); an unknown name and a builder without TensorFlow are one line each.

`nplm` runs in a child process through tests.tfds_offline.main (what `python -m
tests.tfds_offline <nplm arguments>` runs): it seeds the fixtures into --data_dir's TFDS
download cache, forbids network downloads and runs nplm's main. Every expected count is
computed here from the fixture text, by the documented rules: tiny_shakespeare's builder cuts
input.txt 90/5/5 by characters, one example per split; lm1b's is one example per sentence
(training shards: train, heldout shards: test); nplm cuts an example into lines at '\\n' and
counts each line's words and one <eos>.
"""

import collections
import json
import math
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import tensorflow_datasets as tfds

from tests import tfds_offline
from tests import cli

ROOT = Path(__file__).resolve().parent.parent
TINY_MODEL = ('--order=3', '--feature_size=8', '--hidden_size=8', '--batch_size=8')
# The lm1b line of docs/datasets-and-tokenizers.md, as the shell splits it.
README_LM1B = ("--dataset=tfds:lm1b --tfds_splits='train[:99%],train[99%:],test' --head=nce "
               '--workdir=runs/lm1b')


def nplm(*args: str, cwd: Path, prelude: str = '', **variables: str
         ) -> subprocess.CompletedProcess:
  """`nplm ARGS` in a child process, its TFDS downloads served by tests.tfds_offline
  (`prelude`: Python run first in the child; `variables` added to its environment)."""
  code = f'import sys; import tests.tfds_offline as t; {prelude}t.main(sys.argv[1:])'
  return cli.run(*args, code=code, cwd=cwd, **variables)


def line_tokens(text: str) -> int:
  """Tokens of an example's text: its lines (cut at '\\n'; a final '\\n' ends the last one),
  each one's words and an <eos>."""
  return sum(len(line.split()) + 1 for line in text.removesuffix('\n').split('\n'))


def assert_one_line_error(result, *phrases):
  assert result.returncode == 2, result.stdout + result.stderr
  assert 'Traceback' not in result.stderr + result.stdout, result.stderr
  lines = result.stderr.strip().splitlines()
  errors = [line for line in lines if line.startswith('error: ')]
  assert len(errors) == 1 and lines[-1] == errors[0], result.stderr
  assert '***' not in result.stdout, result.stdout  # No banner from TFDS's lazy imports.
  for phrase in phrases:
    assert phrase in errors[0], errors[0]
  return errors[0]


@pytest.mark.slow
def test_tiny_shakespeare_is_prepared_offline_and_trained(tmp_path):
  system_tmp = tmp_path / 'system_tmp'
  system_tmp.mkdir()
  result = nplm('train', '--dataset=tfds:tiny_shakespeare', '--data_dir=tfds',
                '--workdir=runs/shakespeare', '--max_steps=30', *TINY_MODEL, cwd=tmp_path,
                TMPDIR=str(system_tmp))
  assert result.returncode == 0, result.stderr[-3000:]
  assert not any(system_tmp.iterdir())  # Preparing left nothing there.
  assert 'Traceback' not in result.stderr and 'I0000' not in result.stderr, result.stderr
  summary = json.loads((tmp_path / 'runs/shakespeare/summary.json').read_text())

  text = tfds_offline.tiny_shakespeare_text()
  cut = int(len(text) * 0.9)
  train, rest = text[:cut], text[cut:]
  valid, test = rest[:int(len(rest) * 0.5)], rest[int(len(rest) * 0.5):]
  assert summary['tokens'] == {'train': line_tokens(train), 'valid': line_tokens(valid),
                               'test': line_tokens(test)}
  assert sum(summary['tokens'].values()) > 1500
  # The training types seen more than once (text and TFDS datasets: <unk> is trained on the
  # words seen once), with <eos>, and <unk>.
  counts = collections.Counter(w for line in train.split('\n') for w in line.split())
  assert summary['vocab_size'] == sum(n > 1 for n in counts.values()) + 2
  assert (tmp_path / 'tfds/tiny_shakespeare/1.0.0/dataset_info.json').is_file()

  # Only preparing needs TensorFlow: the prepared dataset is read (array_record) without it.
  result = nplm('evaluate', '--workdir=runs/shakespeare', cwd=tmp_path,
                prelude='t.hide_tensorflow(); ')
  assert result.returncode == 0, result.stderr[-3000:]
  counts = re.findall(r'^ *(valid|test): perplexity .* tokens +([\d,]+)', result.stdout, re.M)
  assert {split: int(n.replace(',', '')) for split, n in counts} == {
      'valid': line_tokens(valid), 'test': line_tokens(test)}


@pytest.mark.slow
def test_a_tfds_dataset_is_cut_into_learned_subwords(tmp_path):
  """tiny_shakespeare's raw, cased text under --tokenizer=bpe --lowercase: more tokens than
  words, per-word perplexity over the words counted here, typed text read by the run."""
  result = nplm('train', '--dataset=tfds:tiny_shakespeare', '--data_dir=tfds',
                '--tokenizer=bpe', '--subword_vocab_size=200', '--lowercase',
                '--workdir=runs/bpe', '--max_steps=10', *TINY_MODEL, cwd=tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  summary = json.loads((tmp_path / 'runs/bpe/summary.json').read_text())
  text = tfds_offline.tiny_shakespeare_text()
  cut = int(len(text) * 0.9)
  valid = text[cut:][:int(len(text[cut:]) * 0.5)]
  assert summary['tokens']['valid'] > line_tokens(valid)
  assert summary['valid_word_ppl'] == pytest.approx(
      math.exp(summary['nll']['valid'] / line_tokens(valid)), rel=1e-12)
  assert (tmp_path / 'runs/bpe/tokenizer.model').is_file()
  scored = nplm('score', '--workdir=runs/bpe', 'First Citizen: Speak, speak.', cwd=tmp_path,
                prelude='t.hide_tensorflow(); ')
  assert scored.returncode == 0, scored.stderr[-3000:]
  assert ' oov   0 ' in scored.stdout, scored.stdout


@pytest.mark.slow
def test_lm1b_trains_with_readme_splits(tmp_path):
  args = [a for a in shlex.split(README_LM1B) if not a.startswith('--workdir')]
  result = nplm('train', *args, '--workdir=runs/lm1b', '--data_dir=tfds', '--max_steps=30',
                '--num_samples=5', *TINY_MODEL, cwd=tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  summary = json.loads((tmp_path / 'runs/lm1b/summary.json').read_text())

  files = tfds_offline.lm1b_files()
  train_lines = [line for path, text in files.items() if '/training-' in path
                 for line in text.splitlines()]
  heldout_lines = [line for path, text in files.items() if '/heldout-' in path
                   for line in text.splitlines()]
  assert len(train_lines) == 300 and len(heldout_lines) == 40
  tokens = summary['tokens']
  assert tokens['train'] + tokens['valid'] == sum(len(l.split()) + 1 for l in train_lines)
  assert tokens['test'] == sum(len(l.split()) + 1 for l in heldout_lines)
  # train[99%:] is the last 1% of the 300 sentences, 3 of them, as TFDS stored them: read
  # them back here and count them.
  valid = tfds.data_source('lm1b', split='train[99%:]', data_dir=str(tmp_path / 'tfds'))
  texts = [valid[i]['text'].decode() for i in range(len(valid))]
  assert len(texts) == 3 and set(texts) <= set(train_lines)
  assert tokens['valid'] == sum(len(t.split()) + 1 for t in texts)
  # The archive was extracted from the served tar.gz, in the real one's layout.
  (extracted,) = (tmp_path / 'tfds/downloads/extracted').iterdir()
  shards = sorted(p.name for p in extracted.glob(f'{tfds_offline.LM1B_TOP}/*/news.en*'))
  assert shards == ['news.en-00001-of-00100', 'news.en-00002-of-00100',
                    'news.en.heldout-00000-of-00050', 'news.en.heldout-00001-of-00050']


def test_an_unknown_tfds_name_is_one_line_with_a_close_match(tmp_path):
  result = nplm('train', '--dataset=tfds:tiny_shakespear', '--data_dir=tfds',
                '--workdir=runs/x', *TINY_MODEL, cwd=tmp_path)
  error = assert_one_line_error(result, 'tfds:tiny_shakespear: no such TFDS dataset',
                                'did you mean tiny_shakespeare?')
  assert 'abstract_reasoning' not in result.stderr  # Not TFDS's catalogue.
  assert len(error) < 200
  assert not (tmp_path / 'runs/x').exists()


def test_unknown_config_names_the_configs(tmp_path):
  from nplm.data import tfds_source
  from nplm.data.acquire import CorpusNotFoundError
  for name, phrases in [('wiki40b/EN', ["no config 'EN' (did you mean en?)", 'en, ar']),
                        ('lm1b/en', ['lm1b has no configs; name it tfds:lm1b'])]:
    try:
      tfds_source.TfdsText(name, 'text', ('train', 'validation', 'test'), 'words',
                            str(tmp_path))
    except CorpusNotFoundError as error:
      assert all(p in str(error) for p in phrases) and '\n' not in str(error), error
    else:
      raise AssertionError(f'tfds:{name} was accepted')
  assert not any(tmp_path.iterdir())  # Nothing downloaded or prepared.


def test_a_builder_that_needs_tensorflow_without_it_is_one_line(tmp_path):
  system_tmp = tmp_path / 'system_tmp'
  system_tmp.mkdir()
  result = nplm('train', '--dataset=tfds:lm1b', '--data_dir=tfds', '--workdir=runs/x',
                *TINY_MODEL, cwd=tmp_path, prelude='t.hide_tensorflow(); ',
                TMPDIR=str(system_tmp))
  assert_one_line_error(result, 'tfds:lm1b', 'needs TensorFlow', 'pip install "nplm[tf]"')
  # Refused before its download is used: nothing extracted, nothing prepared.
  assert not (tmp_path / 'tfds/downloads/extracted').exists()
  assert not (tmp_path / 'tfds/lm1b').exists()  # Not even its lock: nothing left behind.
  assert not any(system_tmp.iterdir())  # Nor TFDS's temporary directory of its builder.


def test_what_preparing_catalogue_builders_imports_is_declared():
  """TFDS's download_and_prepare imports importlib_resources (dataset_builder.py), which TFDS
  does not require on Python 3.9+: a dependency of nplm. tiny_shakespeare's and lm1b's
  builders read their downloads with tf.io.gfile: TensorFlow is the `tf` extra."""
  import tomllib
  project = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']
  def names(requirements):
    return {r.split(';')[0].split('>')[0].split('=')[0].split('[')[0].strip().lower()
            for r in requirements}
  assert 'importlib_resources' in names(project['dependencies'])
  assert names(project['optional-dependencies']['tf']) <= {'tensorflow-cpu', 'tensorflow'}
  assert 'tensorflow-cpu' in names(project['optional-dependencies']['tf'])
  import importlib_resources  # pylint: disable=unused-import  # Installed, as declared.
