"""The contract for a user's own components: a model with a knob of its own, two heads (one
with output rows, tied and split over a mesh) and a source written by WORKSPACE's recipe in a
package outside nplm/ (tests/toy_components.py), named by import path on the command line and
from Python, trained, and read back by the tools, with numbers that numpy confirms."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nplm.config import Config, ConfigError
from nplm.data.datasets import load_dataset
from nplm.use.trained import load_trained
from tests import toy_components
from tests import cli

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TOY = 'tests.toy_components'
FLAGS = [f'--model={TOY}:MeanOfContext', f'--head={TOY}:PlainSoftmax',
         f'--dataset={TOY}:Rhymes:150', '--order=3', '--feature_size=8', '--batch_size=16',
         '--epochs=2', '--learning_rate=0.05', '--log_every=5', '--context_scale=2',
         '--line_words=3']
SCALE = 2.0  # --context_scale: the model's own knob.
LINE_WORDS = 3  # --line_words: the source's own knob.


def nplm(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
  """`nplm ARGS` typed in `cwd`, the user's package (here the checkout) on PYTHONPATH."""
  return cli.run(*args, cwd=cwd, timeout=600, **env)


def numpy_log_probs(params: dict, ids: np.ndarray, boundary_id: int, order: int,
                    tied: bool = False) -> np.ndarray:
  """log p(w_t | its n-1 previous words) of every token, by numpy from the parameters: the
  mean of the context vectors times SCALE, a dense layer (tied: C's rows and a bias), a
  log-softmax; the split's start padded with the boundary token."""
  vectors = np.asarray(params['model']['C']['embedding'], np.float64)
  if tied:
    kernel = vectors.T
    bias = np.asarray(params['head']['output']['bias'], np.float64)[:len(vectors)]
  else:
    kernel = np.asarray(params['head']['scores']['kernel'], np.float64)
    bias = np.asarray(params['head']['scores']['bias'], np.float64)
  padded = np.concatenate([np.full(order - 1, boundary_id), ids])
  log_probs = []
  for t, target in enumerate(ids):
    scores = SCALE * vectors[padded[t:t + order - 1]].mean(axis=0) @ kernel + bias
    log_probs.append(scores[target] - np.logaddexp.reduce(scores))
  return np.array(log_probs)


def test_a_users_model_head_and_source_train_and_are_read_back(tmp_path):
  trained_run = nplm(tmp_path, 'train', *FLAGS, '--workdir=runs/toy',
                     f'--data_dir={tmp_path / "data"}')
  assert trained_run.returncode == 0, trained_run.stderr[-2000:]
  assert 'mean of context (n=3, m=8)' in trained_run.stderr  # Its describe(), in the start-up.
  saved = json.loads((tmp_path / 'runs/toy/run.json').read_text())['config']
  assert (saved['context_scale'], saved['line_words']) == (SCALE, LINE_WORDS)
  summary = json.loads((tmp_path / 'runs/toy/summary.json').read_text())

  config = Config.from_saved(json.loads((tmp_path / 'runs/toy/run.json').read_text())['config'])
  assert (config.train_tokens, config.valid_tokens) == (300, 100)  # The source's own split.
  corpus = load_dataset(config)
  assert corpus.vocab.words[corpus.boundary_id] == toy_components.LINE_END
  ends = np.flatnonzero(np.asarray(corpus.splits['train']) == corpus.boundary_id)
  assert np.diff(ends).max() - 1 == LINE_WORDS  # The longest line: the source read its knob.
  trained = load_trained(tmp_path / 'runs/toy')
  for split in ('train', 'valid', 'test'):
    ids = np.asarray(corpus.splits[split])
    nll = -numpy_log_probs(trained.params, ids, corpus.boundary_id, 3).sum()
    np.testing.assert_allclose(summary[f'{split}_ppl'], np.exp(nll / len(ids)), rtol=1e-5)

  # Read where the user's package is not importable: one line naming it, not "edited".
  env = {key: value for key, value in os.environ.items() if key != 'PYTHONPATH'}
  unreadable = subprocess.run([sys.executable, '-m', 'nplm.cli', 'evaluate',
                               f'--workdir={tmp_path / "runs/toy"}'], cwd=ROOT.parent, env=env,
                              capture_output=True, text=True, timeout=600)
  assert unreadable.returncode == 2
  assert unreadable.stderr.strip().splitlines() == [
      f'error: --model={TOY}:MeanOfContext: cannot import tests.toy_components (No module '
      "named 'tests'); is its package installed, or its directory on PYTHONPATH?"]

  evaluated = nplm(tmp_path, 'evaluate', '--workdir=runs/toy')  # A tool reads it too.
  assert evaluated.returncode == 0, evaluated.stderr[-2000:]
  shown = re.search(r'test: perplexity\s+([\d.]+)', evaluated.stdout + evaluated.stderr)
  assert shown and abs(float(shown.group(1)) - summary['test_ppl']) < 0.01


def test_a_users_knob_rule_and_errors_name_the_component(tmp_path):
  # MeanOfContext reads no --hidden_size: set, it is refused naming who reads it.
  refused = nplm(tmp_path, 'train', *FLAGS, '--hidden_size=7', '--workdir=runs/toy')
  assert refused.returncode == 2
  assert refused.stderr.strip().splitlines() == [
      refused.stderr.strip().splitlines()[-1]]  # One line.
  assert '--hidden_size' in refused.stderr and 'nnlm' in refused.stderr
  missing = nplm(tmp_path, 'train', *FLAGS, f'--head={TOY}:NoSuchHead', '--workdir=runs/toy')
  assert missing.returncode == 2 and "has no 'NoSuchHead'" in missing.stderr


def test_a_users_head_with_output_rows_is_tied_and_split_over_the_mesh(tmp_path):
  flags = [*FLAGS, f'--head={TOY}:RowSoftmax', '--tie_embeddings', f'--data_dir={tmp_path}/d']
  tied = nplm(tmp_path, 'train', *flags, '--workdir=runs/tied', JAX_NUM_CPU_DEVICES='2')
  assert tied.returncode == 0, tied.stderr[-2000:]
  split = nplm(tmp_path, 'train', *flags, '--mesh=data:1,model:2', '--workdir=runs/split',
               JAX_NUM_CPU_DEVICES='2')
  assert split.returncode == 0, split.stderr[-2000:]
  summaries = {name: json.loads((tmp_path / f'runs/{name}/summary.json').read_text())
               for name in ('tied', 'split')}
  trained = load_trained(tmp_path / 'runs/tied')
  assert 'embedding' not in trained.params['head']['output']  # Stored once, as C.
  corpus = load_dataset(trained.config)
  for split_name in ('train', 'valid', 'test'):
    ids = np.asarray(corpus.splits[split_name])
    nll = -numpy_log_probs(trained.params, ids, corpus.boundary_id, 3, tied=True).sum()
    np.testing.assert_allclose(summaries['tied'][f'{split_name}_ppl'], np.exp(nll / len(ids)),
                               rtol=1e-5)
    # The rows split over 2 devices compute what one device does.
    np.testing.assert_allclose(summaries['split'][f'{split_name}_ppl'],
                               summaries['tied'][f'{split_name}_ppl'], rtol=1e-5)


def test_a_users_own_knob_is_a_flag_and_a_setting_only_where_its_model_is_named(tmp_path):
  import nplm as nplm_api
  helped = nplm(tmp_path, 'train', f'--model={TOY}:MeanOfContext', '--help')
  assert helped.returncode == 0 and '--context_scale (default: 1.0)' in helped.stdout
  assert 'The hidden vector is the mean of the context vectors' in helped.stdout
  assert '--context_scale' not in nplm(tmp_path, 'train', '--help').stdout
  helped = nplm(tmp_path, 'train', f'--dataset={TOY}:Rhymes', '--help')
  assert helped.returncode == 0 and '--line_words (default: 4)' in helped.stdout
  assert '--line_words' not in nplm(tmp_path, 'train', '--help').stdout
  for dataset, said in [(f'{TOY}:Rhyme', "tests.toy_components has no 'Rhyme'"),
                        ('tests.no_such_module:Rhymes', 'cannot import tests.no_such_module')]:
    mistyped = nplm(tmp_path, 'train', f'--dataset={dataset}', '--workdir=runs/typo')
    assert mistyped.returncode == 2 and said in mistyped.stderr, mistyped.stderr
    assert len(mistyped.stderr.strip().splitlines()) == 1, mistyped.stderr
    assert not (tmp_path / 'runs/typo').exists()
  refused = nplm(tmp_path, 'train', '--context_scale=2', '--workdir=runs/nnlm')
  assert refused.returncode == 2
  assert refused.stderr.strip().splitlines() == [
      "error: Unknown command line flag 'context_scale' (see --help)"]
  settings = dict(model=f'{TOY}:MeanOfContext', head=f'{TOY}:PlainSoftmax',
                  dataset=f'{TOY}:Rhymes:150', order=3, feature_size=8, context_scale=2.0,
                  line_words=3, batch_size=16, epochs=1, workdir=str(tmp_path / 'runs/api'),
                  data_dir=str(tmp_path / 'data'))
  summary = nplm_api.train(settings, quiet=True)
  assert summary['status'] == 'epochs_done' and summary['test_ppl'] > 0
  saved = json.loads((tmp_path / 'runs/api/run.json').read_text())['config']
  assert (Config.from_saved(saved).context_scale, Config.from_saved(saved).line_words) == (2, 3)
  with pytest.raises(ConfigError, match="unknown setting 'context_scale'"):
    nplm_api.train({**settings, 'model': 'nnlm'}, quiet=True)
