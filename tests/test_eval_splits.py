"""What a run evaluates and when: --eval_splits (the final evaluation's splits, auto taking
train up to a size), --valid_tokens_per_eval (the epoch-end validation on the first N valid
tokens, reported as such; the final valid figure always the whole split), a finished run
reused only when it holds the splits asked for, and the phases of an invocation."""

import functools
import json
import logging
import math
from pathlib import Path

import jax
import numpy as np
import pytest

from nplm import config as config_lib, parallel, paths
from nplm.cli import train as train_cli
from nplm.config import Config, ConfigError
from nplm.data.datasets import load_dataset
from nplm.lm import build_language_model
from nplm.run_files import checkpoint
from nplm.run_files.checkpoint import IncompatibleCheckpointError
from nplm.run_files.saved_params import saved_params
from nplm.run_files.summary import finished_summary
from nplm.trainer import run
from nplm.training.families import feed_of
from nplm.training.feed import prefix_name
from nplm.training.runs import periodic_validation
from tests.conftest import TINY_SPLIT, write_text_corpus
from tests.test_model import numpy_eq1
from nplm.training.config_checks import validated

PHASES = {'load', 'build', 'compile', 'train', 'checkpoints', 'validation', 'evaluation'}


def tiny_config(workdir, **changes) -> Config:
  config = Config(workdir=str(workdir), order=3, feature_size=8, hidden_size=12, direct=True,
                  batch_size=16, epochs=2, patience=2, eval_batch_size=7, log_every=5,
                  checkpoint_every=1000, learning_rate=1e-2, unk_max_count=1, **TINY_SPLIT)
  return config.replace(**changes)


def numpy_perplexity(params, ids, boundary: int, config) -> float:
  """exp(mean -log p) of every token of `ids`, each read after its n-1 previous tokens
  (boundary tokens before the first), by Eq. 1 in numpy (float64 sums)."""
  params = jax.tree.map(np.asarray, params)
  stream = np.concatenate([np.full(config.order - 1, boundary), ids])
  context = np.stack([stream[config.order - 2 - j:len(stream) - 1 - j]
                      for j in range(config.order - 1)], axis=1)
  log_p = numpy_eq1(params, context, config.hidden_size, config.direct)
  return math.exp(-np.mean(log_p[np.arange(len(ids)), ids], dtype=np.float64))


def epoch_params(workdir) -> dict[int, dict]:
  """Each epoch's saved parameters, by the epochs done when its checkpoint was written."""
  saved = {}
  for path in sorted((Path(workdir) / checkpoint.LATEST).iterdir()):
    state, progress = checkpoint.read(path)
    saved[progress['epochs_done']] = state['params']
  return saved


def valid_records(workdir) -> list[dict]:
  lines = (Path(workdir) / 'metrics.jsonl').read_text().splitlines()
  return [record for record in map(json.loads, lines) if record['kind'] == 'valid']


def test_auto_takes_train_up_to_the_threshold_and_refuses_unknown_names(monkeypatch):
  sizes = {'train': 420, 'valid': 120, 'test': 97}
  config = Config(workdir='unused')
  evaluated = functools.partial(config.evaluated_splits, language_model=True)
  assert evaluated(sizes) == ['train', 'valid', 'test']  # 420 <= 3,000,000.
  monkeypatch.setattr(config_lib, 'AUTO_TRAIN_TOKENS', 420)
  assert evaluated(sizes) == ['train', 'valid', 'test']
  monkeypatch.setattr(config_lib, 'AUTO_TRAIN_TOKENS', 419)
  assert evaluated(sizes) == ['valid', 'test']
  named = config.replace(eval_splits='test,train')
  assert named.evaluated_splits(sizes, language_model=True) == ['train', 'test']
  # Word vectors: auto scores nothing; splits named are scored.
  assert config.evaluated_splits(sizes, language_model=False) == []
  assert named.evaluated_splits(sizes, language_model=False) == ['train', 'test']
  none = validated(config.replace(eval_splits='none'))
  assert none.evaluated_splits(sizes, language_model=True) == []
  for value in ('vlaid', 'auto,train', '', 'valid,', 'none,valid'):
    with pytest.raises(ConfigError) as refused:
      validated(config.replace(eval_splits=value))
    assert str(refused.value) == (f'unknown --eval_splits={value!r}; known: train, valid, '
                                  'test (comma-separated), none or auto')
  with pytest.raises(ConfigError, match=r'^--valid_tokens_per_eval must be 0 \(the whole '
                     r'valid split\) or more, got -5$'):
    validated(config.replace(valid_tokens_per_eval=-5))


def test_more_valid_tokens_than_the_split_holds_validate_the_whole_split(caplog):
  caplog.set_level(logging.INFO, 'nplm.training.runs')
  whole = {'split': 'valid', 'tokens': 120, 'of': 120}
  assert periodic_validation(Config(valid_tokens_per_eval=500), 120) == whole
  assert 'more than the valid split holds (120 tokens)' in caplog.text
  assert periodic_validation(Config(valid_tokens_per_eval=0), 120) == whole
  assert periodic_validation(Config(valid_tokens_per_eval=120), 120) == whole
  assert periodic_validation(Config(valid_tokens_per_eval=50), 120) == {**whole, 'tokens': 50}


@pytest.mark.parametrize('model', ['nnlm', 'transformer', 'lstm', 'cbow'])
@pytest.mark.slow
def test_a_placed_prefix_scores_as_the_first_tokens_of_the_whole_split(tiny_corpus, model):
  """Every family: the prefix's log-probs are the whole split's first N (word2vec's last
  words read their right-hand window beyond the prefix, as in the whole split)."""
  knobs = {'nnlm': {}, 'transformer': {'num_heads': 2},
           'lstm': {'bptt_length': 5}, 'cbow': {'window': 2}}[model]
  config = Config(workdir='unused', model=model, order=3, feature_size=8, hidden_size=12,
                  eval_batch_size=16, **knobs)
  mesh = parallel.make_mesh('')
  lm = build_language_model(config, tiny_corpus.vocab.counts, mesh)
  valid = tiny_corpus.splits['valid']
  feed = feed_of(lm.model)(config, lm, {'valid': valid}, tiny_corpus.boundary_id, mesh,
                           prefixes={'valid': 37})
  params = feed.create_state(jax.random.key(3)).params
  # word2vec's output vectors start at zero: moved, so that every token scores differently.
  params = jax.tree.map(lambda p: p + 0.1 * jax.random.normal(jax.random.key(4), p.shape),
                        params)
  whole, prefix = feed.log_probs(params, 'valid'), feed.log_probs(params, prefix_name('valid', 37))
  assert prefix.shape == (37,) and len(whole) == len(valid)
  np.testing.assert_allclose(prefix, whole[:37], rtol=1e-6, atol=1e-6)


class Captured(logging.Handler):
  """The messages logged while it is attached."""

  def __init__(self):
    super().__init__(logging.INFO)
    self.lines = []

  def emit(self, record):
    self.lines.append(record.getMessage())


@pytest.fixture(scope='module')
def partial_run(tiny_corpus, tmp_path_factory):
  """A run that validates each epoch on the first 50 of 120 valid tokens and evaluates the
  valid split alone; its log."""
  workdir = tmp_path_factory.mktemp('partial') / 'run'
  config = tiny_config(workdir, eval_splits='valid', valid_tokens_per_eval=50)
  logger, handler = logging.getLogger('nplm'), Captured()
  level = logger.level
  logger.addHandler(handler)
  logger.setLevel(logging.INFO)
  try:
    summary = run(config, tiny_corpus)
  finally:
    logger.removeHandler(handler)
    logger.setLevel(level)
  return config, summary, handler.lines


def test_the_epoch_validations_score_the_first_tokens_and_say_so(tiny_corpus, partial_run):
  config, summary, lines = partial_run
  valid, boundary = tiny_corpus.splits['valid'], tiny_corpus.boundary_id
  history, saved = summary['valid_ppl_history'], epoch_params(config.workdir)
  assert len(history) == 2 and set(saved) == {1, 2}
  for epoch, ppl in enumerate(history, 1):
    assert ppl == pytest.approx(numpy_perplexity(saved[epoch], valid[:50], boundary, config),
                                rel=1e-5)
  assert summary['periodic_validation'] == {'split': 'valid', 'tokens': 50, 'of': 120}
  assert [(r['tokens'], r['of']) for r in valid_records(config.workdir)] == [(50, 120)] * 2
  assert sum('on the first 50 of 120 valid tokens' in line for line in lines) == 2
  # The final valid figure: the whole split, under the best parameters.
  best = saved_params(config.workdir)
  assert summary['valid_ppl'] == pytest.approx(
      numpy_perplexity(best, valid, boundary, config), rel=1e-5)
  assert summary['evaluated'] == {'valid': {'tokens': 120, 'of': 120}}
  assert not {'train_ppl', 'test_ppl'} & set(summary)
  assert summary['tokens'] == {'valid': 120} and set(summary['nll']) == {'valid'}


def test_the_phases_of_an_invocation(partial_run):
  summary = partial_run[1]
  phases = summary['phase_seconds']
  assert set(phases) == PHASES and phases['load'] is None  # The corpus was passed in.
  assert set(phases['evaluation']) == {'valid'}
  seconds = [phases[name] for name in ('build', 'compile', 'train', 'checkpoints',
                                        'validation')]
  assert min(seconds + list(phases['evaluation'].values())) > 0
  assert sum(seconds) + sum(phases['evaluation'].values()) <= summary['wall_seconds']
  assert summary['train_seconds'] == pytest.approx(phases['train'], rel=1e-6)


def test_a_finished_run_is_reused_only_with_the_splits_asked_for(tiny_corpus, partial_run,
                                                               monkeypatch):
  config, first, _ = partial_run
  assert finished_summary(config)['valid_ppl'] == first['valid_ppl']
  wider = config.replace(eval_splits='auto')  # Train, valid and test on this corpus.
  assert finished_summary(wider) is None
  # Rerun: nothing left to train, the splits scored from the best checkpoint.
  summary = run(wider, tiny_corpus)
  best, boundary = saved_params(config.workdir), tiny_corpus.boundary_id
  for split in ('train', 'valid', 'test'):
    ids = tiny_corpus.splits[split]
    assert summary[f'{split}_ppl'] == pytest.approx(
        numpy_perplexity(best, ids, boundary, config), rel=1e-5)
  assert summary['steps'] == first['steps'] and summary['valid_ppl_history'] == first[
      'valid_ppl_history']
  assert summary['phase_seconds']['compile'] == summary['phase_seconds']['train'] == 0
  assert finished_summary(wider)['train_ppl'] == summary['train_ppl']
  monkeypatch.setattr(config_lib, 'AUTO_TRAIN_TOKENS', len(tiny_corpus.splits['train']) - 1)
  assert 'train_ppl' not in run(wider, tiny_corpus)  # Auto: train is now too long.
  with pytest.raises(IncompatibleCheckpointError, match='valid_tokens_per_eval: checkpoint '
                     'has 50, this run has 60'):
    run(config.replace(valid_tokens_per_eval=60), tiny_corpus)


def test_a_language_model_evaluated_by_none_says_how_to_score_it_later(tiny_corpus, tmp_path):
  """--eval_splits=none: the run trains and validates each epoch, scores no split at its
  end (no perplexity, no evaluation phase) and its last lines say so and what scores it."""
  config = tiny_config(tmp_path / 'none', eval_splits='none', epochs=1)
  summary = run(config, tiny_corpus)
  assert summary['status'] == 'epochs_done' and summary['evaluated'] == {}
  assert not {'train_ppl', 'valid_ppl', 'test_ppl'} & set(summary)
  assert summary['phase_seconds']['evaluation'] == {}
  assert len(summary['valid_ppl_history']) == 1  # Validated all the same.
  assert finished_summary(config) is not None  # Holds every split it asks for: none.
  lines = train_cli.report(summary).splitlines()
  assert lines[-1] == (f'no perplexity scored (--eval_splits=none); `nplm evaluate '
                       f'--workdir={paths.shown(config.workdir)}` scores it')


@pytest.mark.slow
def test_models_trained_together_validate_on_the_first_tokens(tmp_path):
  """K = 2 on a text:DIR dataset loaded by the trainer (its load timed): each model's
  history is its own checkpoints' perplexity of the first 40 valid tokens; train and test
  alone evaluated, exactly."""
  dataset = f'text:{write_text_corpus(tmp_path / "text")}'
  base = tiny_config(tmp_path / 'a', dataset=dataset, data_dir=str(tmp_path / 'tfds'),
                     train_tokens=0, valid_tokens=0, unk_max_count=0, epochs=2,
                     eval_splits='train,test', valid_tokens_per_eval=40)
  configs = [base, base.replace(workdir=str(tmp_path / 'b'), learning_rate=3e-2)]
  summaries = run(configs)
  corpus = load_dataset(base.resolved())
  boundary = corpus.boundary_id
  for config, summary in zip(configs, summaries):
    assert summary['trained_together'] == 2 and 'valid_ppl' not in summary
    saved = epoch_params(config.workdir)
    for epoch, ppl in enumerate(summary['valid_ppl_history'], 1):
      expected = numpy_perplexity(saved[epoch], corpus.splits['valid'][:40], boundary, config)
      assert ppl == pytest.approx(expected, rel=1e-5)
    assert summary['periodic_validation']['tokens'] == 40
    best = saved_params(config.workdir)
    for split in ('train', 'test'):
      assert summary[f'{split}_ppl'] == pytest.approx(
          numpy_perplexity(best, corpus.splits[split], boundary, config), rel=1e-5)
    assert summary['phase_seconds']['load'] > 0
  assert summaries[0]['valid_ppl_history'] != summaries[1]['valid_ppl_history']
