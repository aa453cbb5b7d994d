"""The trainer: exact perplexity, learning, exact resumption, and refusals of bad input."""

import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from flax.training import train_state

from nplm.run_files.checkpoint import (Checkpoints, IncompatibleCheckpointError,
                                       read as read_checkpoint)
from nplm.run_files.saved_params import saved_params
from nplm.config import Config, ConfigError
from nplm.data.brown_source import build_corpus
from nplm.data.vocab import TEXT_END
from nplm.training import actions
from nplm.training.feed import Feed
from nplm.training.optimizer import apply_gradients, make_optimizer
from nplm.trainer import TrainingDiverged, run
from tests.conftest import TINY_SPLIT
from tests.test_model import numpy_eq1

ROOT = Path(__file__).parent.parent


def tiny_config(workdir, **changes) -> Config:
  config = Config(workdir=str(workdir), order=3, feature_size=8, hidden_size=12, direct=True,
                  batch_size=16, epochs=3, patience=3, eval_batch_size=7, log_every=5,
                  checkpoint_every=5, learning_rate=1e-2, unk_max_count=1, **TINY_SPLIT)
  return config.replace(**changes)


def brute_force_perplexity(params, ids, vocab, config) -> float:
  """Every token t of the split, its context read one word at a time, summed in numpy."""
  boundary = int(vocab.encode([TEXT_END])[0])
  stream = [boundary] * (config.order - 1) + [int(i) for i in ids]
  nll = 0.0
  for t in range(len(ids)):
    context = np.array([[stream[t + config.order - 2 - j] for j in range(config.order - 1)]])
    log_p = numpy_eq1(params, context, config.hidden_size, config.direct)[0]
    nll -= log_p[ids[t]]
  return math.exp(nll / len(ids))


@pytest.fixture(scope='module')
def default_run(tiny_corpus, tmp_path_factory):
  """(workdir, summary) of tiny_config's run, uninterrupted (several tests read it)."""
  workdir = tmp_path_factory.mktemp('default') / 'run'
  return workdir, run(tiny_config(workdir), tiny_corpus)


@pytest.fixture(scope='module')
def untrained(tiny_corpus, tmp_path_factory):
  """The summary of tiny_config's run stopped after its first update."""
  return run(tiny_config(tmp_path_factory.mktemp('untrained') / 'run', max_steps=1),
             tiny_corpus)


def test_reported_perplexities_are_brute_force_sums_with_the_best_parameters(
    tiny_corpus, default_run):
  workdir, summary = default_run
  config = tiny_config(workdir)
  params = jax.tree.map(np.asarray, saved_params(workdir))
  for split in ('train', 'valid', 'test'):
    want = brute_force_perplexity(params, tiny_corpus.splits[split], tiny_corpus.vocab, config)
    assert summary[f'{split}_ppl'] == pytest.approx(want, rel=1e-5)
  assert summary['valid_ppl'] == pytest.approx(min(summary['valid_ppl_history']), rel=1e-6)
  assert summary['tokens'] == {name: len(ids) for name, ids in tiny_corpus.splits.items()}


@pytest.mark.slow
def test_training_lowers_validation_perplexity(tiny_corpus, tmp_path, untrained):
  summary = run(tiny_config(tmp_path / 'run', epochs=4, patience=4), tiny_corpus)
  assert summary['valid_ppl'] < 0.7 * untrained['valid_ppl']
  history = summary['valid_ppl_history']
  assert history[-1] < history[0]


@pytest.mark.slow
def test_bfloat16_training_lowers_perplexity_and_evaluates_exactly_in_float32(tiny_corpus,
                                                                            tmp_path, untrained):
  """Under --dtype=bfloat16 (with lazy Adam and decay: rows settled before every evaluation
  and save) training lowers the perplexity, the saved parameters are float32, the reported
  perplexities are float64 numpy sums over them, and they differ from float32 training's."""
  changes = dict(epochs=4, patience=4, optimizer='lazy_adam', weight_decay=1e-3)
  summary = run(tiny_config(tmp_path / 'bf16', dtype='bfloat16', **changes),
                               tiny_corpus)
  assert summary['valid_ppl'] < 0.7 * untrained['valid_ppl']
  params = jax.tree.map(np.asarray, saved_params(tmp_path / 'bf16'))
  assert {leaf.dtype for leaf in jax.tree.leaves(params)} == {np.dtype(np.float32)}
  config = tiny_config(tmp_path / 'bf16')
  for split in ('valid', 'test'):
    want = brute_force_perplexity(params, tiny_corpus.splits[split], tiny_corpus.vocab, config)
    assert summary[f'{split}_ppl'] == pytest.approx(want, rel=1e-5)
  float32 = run(tiny_config(tmp_path / 'f32', **changes), tiny_corpus)
  assert float32['valid_ppl'] != summary['valid_ppl']
  assert float32['valid_ppl'] == pytest.approx(summary['valid_ppl'], rel=0.05)


@pytest.mark.parametrize('optimizer', ['adamw', 'sgd'])
@pytest.mark.slow
def test_nnlm_dropout_trains_and_evaluates_without_dropout(tiny_corpus, tmp_path, untrained,
                                                           optimizer):
  """With dropout on x and the tanh units (dense AdamW, and row-sparse SGD with decay),
  training lowers the perplexity, the reported perplexities are the brute-force sums of the
  saved parameters without dropout, and the dropout masks changed the training."""
  changes = dict(epochs=4, patience=4, optimizer=optimizer, weight_decay=1e-4,
                 learning_rate=1e-2 if optimizer == 'adamw' else 0.5)
  config = tiny_config(tmp_path / 'dropout', dropout=0.3, **changes)
  summary = run(config, tiny_corpus)
  assert summary['valid_ppl'] < 0.7 * untrained['valid_ppl']
  params = jax.tree.map(np.asarray, saved_params(tmp_path / 'dropout'))
  for split in ('valid', 'test'):
    want = brute_force_perplexity(params, tiny_corpus.splits[split], tiny_corpus.vocab, config)
    assert summary[f'{split}_ppl'] == pytest.approx(want, rel=1e-5)
  plain = run(tiny_config(tmp_path / 'plain', **changes), tiny_corpus)
  assert plain['valid_ppl'] != summary['valid_ppl']


def test_workdir_receives_summary_metrics_and_tensorboard_events(tiny_corpus, tmp_path,
                                                                 monkeypatch):
  """Also: an Orbax save costs ~0.1 s however small the model, so an epoch's end saves once,
  after its validation, with its records, and best/ holds a copy of that checkpoint."""
  saves, save = [], Checkpoints._save

  def counted_save(self, name, step, *args):
    saves.append((name, step))
    save(self, name, step, *args)

  monkeypatch.setattr(Checkpoints, '_save', counted_save)
  workdir = tmp_path / 'run'
  summary = run(tiny_config(workdir, epochs=2, checkpoint_every=1000), tiny_corpus)
  on_disk = json.loads((workdir / 'summary.json').read_text())
  checksum = on_disk.pop('checksum')  # Of the rest, as canonical JSON: edits are found out.
  assert checksum == hashlib.sha256(json.dumps(on_disk, sort_keys=True, separators=(',', ':'))
                                    .encode()).hexdigest()
  assert on_disk == json.loads(json.dumps(summary))
  for key in ('vocab_size', 'tokens', 'unk_rate', 'valid_ppl', 'test_ppl', 'epochs',
              'wall_seconds', 'train_examples_per_second', 'config'):
    assert key in on_disk
  assert on_disk['config']['order'] == 3 and on_disk['epochs'] == 2
  records = [json.loads(line) for line in (workdir / 'metrics.jsonl').read_text().splitlines()]
  assert {r['kind'] for r in records} == {'train', 'valid'}
  assert len([r for r in records if r['kind'] == 'valid']) == 2
  assert list((workdir / 'tensorboard').glob('events.out.tfevents.*'))

  per_epoch = summary['steps'] // 2
  assert saves[:2] == [('checkpoints', per_epoch), ('checkpoints', 2 * per_epoch)]
  assert all(name == 'checkpoints' for name, _ in saves) and len(saves) <= 3  # Its report.
  (best,) = [path.name for path in (workdir / 'best').iterdir()]
  assert int(best) == summary['reported']['step']
  best_state, best_progress = read_checkpoint(workdir / 'best' / best)
  latest_state, _ = read_checkpoint(workdir / 'checkpoints' / best)
  assert best_progress['valid_steps'][-1] == int(best)
  jax.tree.map(np.testing.assert_array_equal, best_state['params'], latest_state['params'])


@pytest.mark.slow
def test_logged_steps_record_the_learning_rate_of_their_update(tiny_corpus, tmp_path):
  config = tiny_config(tmp_path / 'run', max_steps=4, log_every=2, lr_decay=0.5)
  run(config, tiny_corpus)
  records = [json.loads(line) for line in (tmp_path / 'run' / 'metrics.jsonl').read_text()
             .splitlines() if '"train"' in line]
  # Update 2 is the optimizer's count t = 1, update 4 its t = 3: ε0 / (1 + 0.5 t).
  assert [(r['step'], r['learning_rate']) for r in records] == [
      (2, pytest.approx(config.learning_rate / 1.5)),
      (4, pytest.approx(config.learning_rate / 2.5))]


@pytest.mark.slow
def test_max_steps_then_rerun_resumes_to_the_uninterrupted_result(tiny_corpus, tmp_path,
                                                                  default_run, monkeypatch):
  """Also: a rerun restores its checkpoint without making a new state beside it."""
  _, uninterrupted = default_run
  stopped = run(tiny_config(tmp_path / 'b', max_steps=33), tiny_corpus)
  assert stopped['status'] == 'max_steps' and stopped['steps'] == 33

  def no_new_state(*_):
    raise AssertionError('a resumed run made a new state')
  monkeypatch.setattr(Feed, 'create_state', no_new_state)
  again = run(tiny_config(tmp_path / 'b', max_steps=33), tiny_corpus)
  assert again['steps'] == 33 and again['test_ppl'] == stopped['test_ppl']  # No step more.
  resumed = run(tiny_config(tmp_path / 'b'), tiny_corpus)
  for key in ('train_ppl', 'valid_ppl', 'test_ppl', 'valid_ppl_history', 'steps', 'epochs'):
    assert resumed[key] == uninterrupted[key], key


_CHILD = """
import sys
from nplm.data import load_corpus
from nplm.trainer import run
from tests.test_train import tiny_config
from tests.conftest import FIXTURE_DIR, FIXTURE_FILES, FIXTURE_WORDS, TINY_SPLIT
corpus = load_corpus(data_dir=sys.argv[2], corpus_dir=FIXTURE_DIR, unk_max_count=1,
                     expected_words=FIXTURE_WORDS, expected_files=FIXTURE_FILES, **TINY_SPLIT)
print(run(tiny_config(sys.argv[1], epochs=8, patience=8,
                                     checkpoint_every=4), corpus)['status'], flush=True)
"""


@pytest.fixture(scope='module')
def uninterrupted_of_killed(tiny_corpus, tmp_path_factory):
  """The summary of the killed runs' config, never stopped."""
  workdir = tmp_path_factory.mktemp('whole') / 'run'
  return run(tiny_config(workdir, epochs=8, patience=8, checkpoint_every=4), tiny_corpus)


@pytest.mark.parametrize('kill_signal', [signal.SIGTERM, signal.SIGKILL])
@pytest.mark.slow
def test_a_killed_run_resumes_to_the_uninterrupted_result(tiny_corpus, tmp_path, kill_signal,
                                                          uninterrupted_of_killed):
  """SIGTERM saves and exits cleanly; SIGKILL loses the steps since the last checkpoint."""
  workdir = tmp_path / 'killed'
  child = subprocess.Popen([sys.executable, '-c', _CHILD, str(workdir), str(tmp_path / 'tfds')],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  deadline = time.monotonic() + 120
  while not (workdir / 'checkpoints').exists() or len(os.listdir(workdir / 'checkpoints')) < 2:
    assert child.poll() is None and time.monotonic() < deadline, child.stderr.read()
    time.sleep(0.05)
  child.send_signal(kill_signal)
  out, err = child.communicate(timeout=60)
  if kill_signal == signal.SIGTERM:
    assert child.returncode == 0, err
    assert out.strip().splitlines()[-1] == 'interrupted'
  else:
    assert child.returncode == -signal.SIGKILL
  config = tiny_config(workdir, epochs=8, patience=8, checkpoint_every=4)
  resumed = run(config, tiny_corpus)
  uninterrupted = uninterrupted_of_killed
  assert resumed['status'] == uninterrupted['status'] != 'interrupted'
  for key in ('train_ppl', 'valid_ppl', 'test_ppl', 'valid_ppl_history', 'steps'):
    assert resumed[key] == uninterrupted[key], key


def test_an_incompatible_workdir_is_refused_and_its_checkpoints_kept(tiny_corpus, tmp_path):
  workdir = tmp_path / 'run'
  run(tiny_config(workdir, max_steps=10), tiny_corpus)
  before = sorted(os.listdir(workdir / 'checkpoints'))
  with pytest.raises(IncompatibleCheckpointError, match='hidden_size: checkpoint has 12'):
    run(tiny_config(workdir, hidden_size=13), tiny_corpus)
  tokens = tiny_corpus.vocab.decode(np.concatenate(list(tiny_corpus.splits.values())))
  other_corpus = build_corpus(tokens[::-1], unk_max_count=1, **TINY_SPLIT)
  with pytest.raises(IncompatibleCheckpointError, match='different vocabulary'):
    run(tiny_config(workdir), other_corpus)
  assert sorted(os.listdir(workdir / 'checkpoints')) == before
  run(tiny_config(workdir, max_steps=12, log_every=3), tiny_corpus)


@pytest.mark.slow
def test_a_run_recorded_before_newer_knobs_resumes_with_their_defaults(tiny_corpus, tmp_path):
  workdir = tmp_path / 'run'
  run(tiny_config(workdir, max_steps=10), tiny_corpus)
  identity = json.loads((workdir / 'run.json').read_text())
  for knob in ('num_layers', 'dropout', 'tie_embeddings', 'bptt_length', 'clip_norm'):
    del identity['config'][knob]  # As written before the recurrent models existed.
  (workdir / 'run.json').write_text(json.dumps(identity))
  with pytest.raises(IncompatibleCheckpointError, match='clip_norm: checkpoint has 0.0'):
    run(tiny_config(workdir, clip_norm=1.0), tiny_corpus)
  resumed = run(tiny_config(workdir, max_steps=12), tiny_corpus)
  assert (resumed['status'], resumed['steps']) == ('max_steps', 12)


@pytest.mark.parametrize('changes,message', [
    ({'order': 1}, '--order must be at least 2'),
    ({'feature_size': -3}, '--feature_size must be positive'),
    ({'hidden_size': -1}, '--hidden_size must be 0 or more'),
    ({'hidden_size': 0, 'direct': False}, 'set --direct'),
    ({'model': 'mamba'}, "unknown --model='mamba'"),
    ({'head': 'nce2'}, "unknown --head='nce2'"),
    ({'optimizer': 'adagrad'}, "unknown --optimizer='adagrad'"),
    ({'batch_size': 0}, '--batch_size must be positive'),
    ({'learning_rate': 0.0}, '--learning_rate must be positive'),
    ({'workdir': ''}, '--workdir is required'),
    ({'checkpoint_minutes': -1.0}, '--checkpoint_minutes must be 0 (none by time) or more'),
    ({'profile_steps': -1}, '--profile_steps must be 0 (none) or more'),
    ({'checkpoint_every': -1}, '--checkpoint_every must be 0 (by time only) or more'),
    ({'head': 'class', 'num_classes': -1}, '--num_classes must be 0'),
    ({'head': 'tree', 'tree': 'random'}, "unknown --tree='random'"),
    ({'head': 'is', 'num_samples': 0}, '--num_samples must be positive'),
    ({'head': 'nce', 'proposal_power': 1.5}, '--proposal_power must be within [0, 1]'),
    # Checks that need the vocabulary (|V| = 51 here) come from the heads, before the
    # workdir is claimed.
    ({'head': 'class', 'num_classes': 52}, '--num_classes=52 exceeds the vocabulary'),
    ({'head': 'adaptive', 'adaptive_cutoffs': '10,x'}, 'not a comma-separated list'),
    ({'head': 'adaptive', 'adaptive_cutoffs': '10,60'}, 'must increase strictly within 1'),
    ({'head': 'adaptive', 'adaptive_cutoffs': '20,10'}, 'must increase strictly within 1'),
])
def test_invalid_config_values_are_refused_by_name(tiny_corpus, tmp_path, changes, message):
  with pytest.raises(ConfigError, match=re.escape(message)):
    run(tiny_config(tmp_path / 'run').replace(**changes), tiny_corpus)
  assert not (tmp_path / 'run').exists()


def test_a_diverging_run_stops_with_a_clear_error_and_keeps_the_last_good_checkpoint(
    tiny_corpus, tmp_path):
  workdir = tmp_path / 'run'
  config = tiny_config(workdir, optimizer='sgd', learning_rate=1e12, log_every=1,
                       checkpoint_every=1)
  with pytest.raises(TrainingDiverged, match='Lower --learning_rate') as raised:
    run(config, tiny_corpus)
  assert 'not finite' in str(raised.value) or 'loss is' in str(raised.value)
  kept = saved_params(workdir, latest=True)
  assert kept is not None
  assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(kept))


def test_sgd_follows_the_papers_schedule_and_never_decays_biases():
  """One SGD update at t: θ - ε0/(1 + r t)·(g + λθ) on weights, θ - ε0/(1 + r t)·g on biases."""
  config = Config(workdir='unused', optimizer='sgd', learning_rate=0.1, lr_decay=0.5,
                  weight_decay=0.01)
  params = {'H': {'kernel': np.full((2, 3), 2.0, np.float32), 'bias': np.full(3, 2.0, np.float32)},
            'C': {'embedding': np.full((4, 2), -1.0, np.float32)}}
  grads = jax.tree.map(lambda p: np.full_like(p, 0.3), params)
  state = train_state.TrainState.create(apply_fn=None, params=params,
                                        tx=make_optimizer(config))
  for _ in range(3):  # No rows read (no step ran): every parameter takes the dense update.
    state = apply_gradients(config, state.replace(params=params), grads)
  updates = jax.tree.map(lambda new, old: new - old, state.params, params)
  rate = 0.1 / (1 + 0.5 * 2)  # The third update has t = 2.
  np.testing.assert_allclose(updates['H']['kernel'], -rate * (0.3 + 0.01 * 2.0), rtol=1e-5)
  np.testing.assert_allclose(updates['C']['embedding'], -rate * (0.3 + 0.01 * -1.0), rtol=1e-5)
  np.testing.assert_allclose(updates['H']['bias'], -rate * 0.3, rtol=1e-5)


def test_the_checkpoint_clock_is_due_its_seconds_after_a_reset_and_never_when_0(monkeypatch):
  now = [100.0]
  monkeypatch.setattr(actions.time, 'perf_counter', lambda: now[0])
  clock = actions.Clocked(60.0, action=print, skip=lambda step: step % 10 == 0, sync_every=5)
  now[0] += 59.9
  assert not clock.due(1)
  now[0] += 0.1
  assert clock.due(2) and clock.due(3) and not clock.due(10)  # An epoch's end saves anyway.
  clock.reset()
  assert not clock.due(4)
  now[0] += 61
  assert clock.due(4)
  assert not actions.Clocked(0.0, action=print, skip=lambda step: False, sync_every=1).due(1)


def test_the_processes_of_a_run_read_their_checkpoint_clocks_together_at_sync_steps(
    monkeypatch):
  """Between sync steps no collective is called and nothing is due; at one, the clock is
  due where any process's is (here another's, as the fake collective says)."""
  now, asked = [0.0], []
  monkeypatch.setattr(actions.time, 'perf_counter', lambda: now[0])
  monkeypatch.setattr(actions.jax, 'process_count', lambda: 2)
  monkeypatch.setattr(actions.parallel, 'any_process', lambda late: asked.append(late) or True)
  clock = actions.Clocked(60.0, action=print, skip=lambda step: False, sync_every=5)
  assert not clock.due(3) and asked == []
  assert clock.due(5) and asked == [False]  # This process's clock: 0 s of 60.
  now[0] += 60
  assert not clock.due(6) and asked == [False]
  assert clock.due(10) and asked == [False, True]


@pytest.mark.slow
def test_checkpoints_by_the_clock_fall_within_epochs_and_leave_the_numbers_as_they_were(
    tiny_corpus, tmp_path):
  """A clock due at every update saves between the epoch ends; the decay that lazy Adam's
  rows owe is paid in the saved copy only, so that the run's numbers are those of a run
  that saved at its epoch ends alone, to every digit."""
  config = tiny_config(tmp_path / 'by_epoch', optimizer='lazy_adam', weight_decay=0.1,
                       epochs=2, patience=2, checkpoint_every=0, checkpoint_minutes=0,
                       keep_checkpoints=1000)
  by_epoch = run(config, tiny_corpus)
  clocked = run(config.replace(workdir=str(tmp_path / 'clocked'), checkpoint_minutes=1e-9),
                tiny_corpus)

  def saved_steps(name):
    return sorted(int(path.name) for path in (tmp_path / name / 'checkpoints').iterdir())

  per_epoch = by_epoch['steps'] // 2
  assert saved_steps('by_epoch') == [per_epoch, 2 * per_epoch]
  assert saved_steps('clocked') == list(range(1, 2 * per_epoch + 1))
  for key in ('valid_ppl', 'test_ppl', 'train_ppl', 'valid_ppl_history'):
    assert clocked[key] == by_epoch[key]


@pytest.mark.slow
def test_a_profiled_run_writes_its_table_and_trains_as_an_unprofiled_one(
    tiny_corpus, default_run, tmp_path, caplog):
  """--profile_steps=3 traces the updates after the first progress line (step 5) to step 8:
  profile.txt sums them, the compiled update among the events, and the run's numbers are
  the unprofiled run's. A run that ends inside its window (--max_steps=7) is traced to its
  end, not lost; one that ends where it would start (5) or before (4) says it profiled
  nothing."""
  profiled = run(tiny_config(tmp_path / 'profiled', profile_steps=3), tiny_corpus)
  for key in ('valid_ppl', 'test_ppl', 'train_ppl', 'valid_ppl_history', 'steps'):
    assert profiled[key] == default_run[1][key]
  table = (tmp_path / 'profiled' / 'profile' / 'profile.txt').read_text()
  assert table.startswith('3 steps;') and 'PjitFunction(update)' in table, table
  assert any((tmp_path / 'profiled' / 'profile' / 'plugins').rglob('*.trace.json.gz'))
  run(tiny_config(tmp_path / 'cut', profile_steps=100, max_steps=7), tiny_corpus)
  assert (tmp_path / 'cut' / 'profile' / 'profile.txt').read_text().startswith('2 steps;')
  for steps in (5, 4):
    caplog.clear()
    run(tiny_config(tmp_path / f'short{steps}', profile_steps=3, max_steps=steps), tiny_corpus)
    assert not (tmp_path / f'short{steps}' / 'profile' / 'profile.txt').exists()
    assert '--profile_steps: nothing profiled, the run ended at or before update 5' in caplog.text
  assert not (Path(default_run[0]) / 'profile').exists()  # None unless asked.
