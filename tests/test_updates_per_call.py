"""--updates_per_call: several updates in one compiled call (a scan over their batches)
train as one update a call does. The feed's `steps` against its `step` on the same batches;
runs against the same runs one update a call (every logged loss, checkpoint and perplexity),
with calls cut where an action falls due; the setting refused where it cannot hold; and
--updates_per_call=0, the default, choosing K from the first updates' time."""

import json
import logging
from pathlib import Path

import jax
import numpy as np
import pytest

from nplm import parallel
from nplm.config import ConfigError
from nplm.lm import build_language_model
from nplm.run_files.checkpoint import finished_steps
from nplm.trainer import run
from nplm.training import actions, stream_feed, window_feed
from nplm.training.config_checks import validated
from nplm.training.run_checks import warn_calls_cut
from nplm.training.window_feed import WindowFeed
from tests.test_rnn import rnn_config
from tests.test_train import tiny_config
from tests.test_word2vec import tiny_run_config

RESULTS = ('status', 'steps', 'epochs', 'best_epoch', 'valid_ppl', 'test_ppl',
           'valid_ppl_history')


def test_the_feeds_steps_in_one_call_equal_its_steps_one_a_call(tiny_corpus, tmp_path):
  config = tiny_config(tmp_path, batch_size=8, updates_per_call=5)
  mesh = parallel.make_mesh()
  lm = build_language_model(config, tiny_corpus.vocab.counts, mesh)
  feed = WindowFeed(config, lm, {'train': tiny_corpus.splits['train']},
                    tiny_corpus.boundary_id, mesh)
  batches = [batch for batch, _ in feed.start_epoch(None, 0, 0)[1]][:5]
  run_rng = jax.random.key(3)
  one_a_call = feed.create_state(jax.random.key(0))
  losses = []
  for batch in batches:
    one_a_call, loss = feed.step(one_a_call, batch, run_rng)
    losses.append(float(loss))
  in_one_call, scanned = feed.steps(feed.create_state(jax.random.key(0)), batches, run_rng)
  assert np.asarray(scanned).tolist() == losses
  assert int(in_one_call.step) == int(one_a_call.step) == 5
  for mine, theirs in zip(jax.tree.leaves(in_one_call.params),
                          jax.tree.leaves(one_a_call.params)):
    np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


def records(workdir) -> list[dict]:
  """metrics.jsonl without its clocks."""
  lines = [json.loads(line) for line in (workdir / 'metrics.jsonl').read_text().splitlines()]
  return [{k: v for k, v in line.items() if 'per_second' not in k} for line in lines]


def trained(config, corpus) -> dict:
  summary, workdir = run(config, corpus), Path(config.workdir)
  return {'summary': {k: summary.get(k) for k in RESULTS}, 'records': records(workdir),
          'checkpoints': finished_steps(workdir / 'checkpoints')}


CONFIGS = {'nnlm': tiny_config, 'lstm': rnn_config, 'word2vec': tiny_run_config}


@pytest.mark.slow
@pytest.mark.parametrize('family, changes', [
    ('nnlm', {}),  # AdamW; --log_every=5 and --checkpoint_every=5: 4 a call cut at each.
    ('nnlm', {'max_steps': 23, 'eval_every': 7, 'dropout': 0.2, 'head': 'tree'}),
    # The heads that draw samples or share rows, each update its own draws (the default
    # chooses K for the NNLM under every head).
    ('nnlm', {'head': 'is', 'num_samples': 8, 'optimizer': 'lazy_adam'}),
    ('nnlm', {'head': 'nce', 'num_samples': 8, 'optimizer': 'sgd', 'learning_rate': 0.1}),
    ('nnlm', {'head': 'class'}),
    ('nnlm', {'head': 'adaptive'}),
    ('lstm', {'head': 'nce', 'optimizer': 'sgd', 'learning_rate': 0.1, 'log_every': 5}),
    ('word2vec', {'batch_size': 4, 'log_every': 6})])
def test_a_run_of_several_updates_a_call_equals_it_one_a_call(tiny_corpus, tmp_path, family,
                                                              changes):
  config = CONFIGS[family]
  one = trained(config(tmp_path / 'one', **changes), tiny_corpus)
  several = trained(config(tmp_path / 'four', updates_per_call=4, **changes), tiny_corpus)
  assert several == one
  assert one['summary']['steps'] >= 20 and len(one['records']) >= 4


@pytest.mark.slow
def test_a_run_resumed_where_its_first_call_is_one_update_equals_it_one_a_call(tiny_corpus,
                                                                             tmp_path):
  """Stopped at step 9 (--max_steps), then resumed to 30: the resumed invocation's first
  call is one update (a progress line is due at 10), and both programs are compiled there."""
  one = trained(tiny_config(tmp_path / 'one', max_steps=30), tiny_corpus)
  run(tiny_config(tmp_path / 'four', max_steps=9, updates_per_call=4), tiny_corpus)
  resumed = trained(tiny_config(tmp_path / 'four', max_steps=30, updates_per_call=4),
                    tiny_corpus)
  assert resumed == one


@pytest.mark.slow
def test_models_trained_together_several_updates_a_call_equal_them_one_a_call(tiny_corpus,
                                                                              tmp_path):
  def together(name, **changes):
    configs = [tiny_config(tmp_path / f'{name}{seed}', seed=seed, data_seed=7, **changes)
               for seed in (1, 2)]
    run(configs, tiny_corpus)
    return [records(tmp_path / f'{name}{seed}') for seed in (1, 2)]
  assert together('four', updates_per_call=4) == together('one')


def test_a_call_of_several_updates_ends_where_an_action_falls_due():
  """Checked against the steps each action is due at, listed by hand."""
  every_5 = actions.Periodic(5, print)
  profile = actions.Traced(start=10, steps=3, begin=lambda: True, end=print)
  clock = actions.Clocked(60.0, print, skip=lambda step: False, sync_every=5)
  calls = {step: actions.updates_in_one_call(4, step, [every_5, profile, clock], [22, None])
           for step in range(23)}
  # Due: 5, 10, 13 (the profile's end), 15, 20; the epoch ends at 22.
  assert [step for step, n in calls.items() if n == 4] == [0, 1, 5, 6, 15, 16]
  assert all(n == 1 for step, n in calls.items() if step not in (0, 1, 5, 6, 15, 16))
  assert actions.updates_in_one_call(1, 0, [every_5], [None]) == 1
  assert actions.updates_in_one_call(8, 0, [clock], [None]) == 8  # By the clock: not cut.


def test_a_log_every_that_cuts_the_calls_is_said_with_a_multiple(tmp_path, caplog):
  with caplog.at_level('WARNING'):
    warn_calls_cut(tiny_config(tmp_path, log_every=200, updates_per_call=32))
    warn_calls_cut(tiny_config(tmp_path, log_every=5, updates_per_call=8))
    warn_calls_cut(tiny_config(tmp_path, log_every=200, updates_per_call=8))
    warn_calls_cut(tiny_config(tmp_path, log_every=5))
  assert [record.getMessage() for record in caplog.records] == [
      '--log_every=200 is not a multiple of --updates_per_call=32: 8 of every 200 updates run '
      'one a call; a multiple (e.g. --log_every=192) runs them all 32 a call',
      '--log_every=5 is not a multiple of --updates_per_call=8: 5 of every 5 updates run one a '
      'call; a multiple (e.g. --log_every=8) runs them all 8 a call']


@pytest.mark.parametrize('changes, refusal', [
    ({'updates_per_call': -1}, r'--updates_per_call must be positive \(or 0: chosen from the '
                               r"first updates' time\), got -1"),
    ({'updates_per_call': 8, 'num_processes': 2, 'coordinator_address': 'host:1234'},
     '--updates_per_call above 1 runs in one process only')])
def test_a_setting_that_cannot_hold_is_refused(tmp_path, changes, refusal):
  with pytest.raises(ConfigError, match=refusal):
    validated(tiny_config(tmp_path, **changes))


def test_the_updates_a_call_are_chosen_from_the_time_an_update_takes():
  """By hand: the most of 32, 16, 8 and 4 dividing --log_every whose call takes at most
  0.25 s, where the run has a minute left."""
  chosen = actions.chosen_updates_per_call
  assert chosen(0.019, 3600, 200) == 8  # MLP9 on the Xeon: 16 would take 0.30 s.
  assert chosen(0.0011, 3600, 256) == 32  # Row 7's NNLM at batch 64.
  assert chosen(0.0011, 3600, 200) == 8  # 32 and 16 do not divide 200.
  assert chosen(0.05, 3600, 200) == 4
  assert chosen(0.0011, 3600, 10) == 1  # No power of two from 4 divides 10.
  assert chosen(0.07, 3600, 256) == 1  # 4 a call would take 0.28 s.
  assert chosen(0.15, 3600, 256) == 1  # The LSTM recipe's updates.
  assert chosen(0.0011, 59, 256) == 1  # Less than a minute left.


def chosen_lines(caplog) -> list[str]:
  return [record.getMessage() for record in caplog.records
          if record.name == 'nplm.training.loop' and 'a call from here on' in record.getMessage()]


@pytest.mark.slow
def test_several_a_call_are_chosen_for_the_nnlm_and_train_as_one_a_call(
    tiny_corpus, tmp_path, monkeypatch, caplog):
  """--updates_per_call=0 (the default) with the minute a run must have left patched away:
  the tiny NNLM's sub-millisecond updates run 8 a call (the most dividing --log_every=8)
  after the first progress line, to the numbers of one a call; the LSTM's feed stays at one."""
  changes = {'log_every': 8, 'checkpoint_every': 0, 'epochs': 2}
  one = trained(tiny_config(tmp_path / 'one', updates_per_call=1, **changes), tiny_corpus)
  monkeypatch.setattr(actions, 'WORTH_SECONDS', 0)
  calls = []
  steps = window_feed.WindowFeed.steps
  monkeypatch.setattr(window_feed.WindowFeed, 'steps', lambda self, state, batches, rng: (
      calls.append(len(batches)), steps(self, state, batches, rng))[1])
  with caplog.at_level(logging.INFO):
    chosen = trained(tiny_config(tmp_path / 'chosen', **changes), tiny_corpus)
  assert chosen == one
  [line] = chosen_lines(caplog)
  assert line.startswith('updates of ') and line.endswith(
      ' ms one a call: 8 a call from here on, the same numbers (--updates_per_call=1 keeps one)')
  assert calls and set(calls) == {8}
  assert len(calls) * 8 >= one['summary']['steps'] // 2  # Most of the run's updates.
  caplog.clear()
  monkeypatch.setattr(stream_feed.StreamFeed, 'steps', lambda *args: pytest.fail('scanned'))
  with caplog.at_level(logging.INFO):
    run(rnn_config(tmp_path / 'lstm', log_every=8, epochs=2), tiny_corpus)
  assert chosen_lines(caplog) == []
