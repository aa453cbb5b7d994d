"""Data- and vocabulary-parallel training against one device, on 8 simulated devices in a
child process (tests/multidevice.py says why); checkpoints moved between device counts.

Every parallel run below starts from the same parameters as its one-device reference (the
padded output rows are zero past |V|), sees the same batches and the same samples, so its
losses, updated parameters and exact perplexities must agree to float32 rounding.
"""

import functools
import json
import os
from pathlib import Path

import jax
import numpy as np
import pytest

from experiments.benchmarks import devices as devices_benchmark
from nplm import parallel
from nplm.config import Config, ConfigError
from nplm.lm import build_language_model
from nplm.perplexity import perplexity
from nplm.trainer import run
from nplm.training.families import feed_of
from nplm.training.window_feed import WindowFeed
from tests import multidevice
from tests.conftest import TINY_SPLIT, load_tiny_corpus

DEVICES = 8
VOCAB = 37  # No multiple of 4 or 8: every vocabulary-parallel mesh below pads.
RNG = np.random.default_rng(0)
COUNTS = np.sort(RNG.integers(1, 50, VOCAB))[::-1]
SPLITS = {'train': RNG.integers(0, VOCAB, 300), 'valid': RNG.integers(0, VOCAB, 70)}
BOUNDARY = 0
TOL = dict(rtol=1e-5, atol=1e-5)
STEPS = 3
HALF = 6  # Updates the checkpoint test trains before moving the run.

WINDOW = Config(order=3, feature_size=8, hidden_size=16, batch_size=16, eval_batch_size=16,
                optimizer='sgd', learning_rate=0.3, workdir='unused')
STREAM = Config(model='lstm', feature_size=8, hidden_size=8, batch_size=8, bptt_length=5,
                clip_norm=1.0, eval_batch_size=8, optimizer='sgd', learning_rate=0.3,
                workdir='unused')
SAMPLED = {'num_samples': 20}  # k of the sampling heads.


def with_head(config: Config, head: str) -> Config:
  return config.replace(head=head, **(SAMPLED if head in ('is', 'nce') else {}))


# --- Run in the child, on 8 simulated CPU devices. ---

def train_steps(config: Config, mesh):
  """Losses of the first updates, the parameters after them (output rows cut to |V|) and
  the exact validation perplexity, on `mesh`."""
  lm = build_language_model(config, COUNTS, mesh)
  feed = feed_of(lm.model)(config, lm, SPLITS, BOUNDARY, mesh)
  state = feed.create_state(jax.random.key(0))
  state, batches = feed.start_epoch(state, 0, 0)
  batches = [batch for (batch, _), _ in zip(batches, range(STEPS))]
  if config.updates_per_call > 1:  # All in one call (--updates_per_call).
    state, losses = feed.steps(state, batches, jax.random.key(1))
    losses = np.asarray(losses).tolist()
  else:
    losses = []
    for batch in batches:
      state, loss = feed.step(state, batch, jax.random.key(1))
      losses.append(float(loss))
  params = jax.tree.map(np.asarray, state.params)
  return losses, parallel.unpadded_output_rows(params, VOCAB), valid_perplexity(
      feed, state.params), params


def valid_perplexity(feed, params) -> float:
  """exp(Σ NLL / Σ tokens) of the feed's exact log-probs of the validation split."""
  return perplexity(-np.sum(feed.log_probs(params, 'valid')), feed.sizes['valid'])['ppl']


@functools.cache
def on_one_device(config: Config):
  """train_steps on one device: each config's once, though several meshes compare with it."""
  return train_steps(config, parallel.make_mesh('', devices=jax.devices()[:1]))


def assert_same_as_one_device(config: Config, spec: str) -> None:
  losses, params, ppl, padded = train_steps(config, parallel.make_mesh(spec))
  want_losses, want_params, want_ppl, _ = on_one_device(config.replace(updates_per_call=1))
  np.testing.assert_allclose(losses, want_losses, **TOL)
  jax.tree.map(lambda got, want: np.testing.assert_allclose(got, want, **TOL), params,
               want_params)
  np.testing.assert_allclose(ppl, want_ppl, **TOL)
  assert losses[-1] != losses[0]  # The updates did something.
  output = padded['head'].get('output', {})
  for name, rows in output.items():  # Padding rows get no gradient: still zero.
    assert not np.any(rows[VOCAB:]), name


def check_window_data_parallel():
  for head in ('softmax', 'nce'):
    assert_same_as_one_device(with_head(WINDOW, head), 'data:8')
  assert_same_as_one_device(WINDOW.replace(optimizer='adamw', learning_rate=1e-2), 'data:8')


def check_window_vocab_parallel():
  for head in ('softmax', 'is', 'nce'):
    assert_same_as_one_device(with_head(WINDOW, head), 'data:2,model:4')
  assert_same_as_one_device(WINDOW, 'model:8')


def check_replicated_heads_on_a_model_axis():
  for head in ('class', 'tree', 'adaptive'):
    assert_same_as_one_device(with_head(WINDOW, head), 'data:2,model:4')


def check_stream_data_parallel():
  assert_same_as_one_device(STREAM, 'data:8')
  assert_same_as_one_device(with_head(STREAM, 'nce').replace(tie_embeddings=True),
                            'data:2,model:4')


def check_several_updates_a_call_on_a_mesh():
  """--updates_per_call: the stacked batches split over 'data' as one update's are."""
  assert_same_as_one_device(with_head(WINDOW, 'nce').replace(updates_per_call=STEPS),
                            'data:2,model:4')
  assert_same_as_one_device(STREAM.replace(updates_per_call=STEPS), 'data:8')


def check_output_rows_are_split_over_model():
  lm = build_language_model(WINDOW, COUNTS, parallel.make_mesh('data:2,model:4'))
  feed = WindowFeed(WINDOW, lm, SPLITS, BOUNDARY, parallel.make_mesh('data:2,model:4'))
  state = feed.create_state(jax.random.key(0))
  rows = state.params['head']['output']['embedding']
  assert rows.shape == (40, 16)  # 37 words padded to 4 shards of 10.
  assert {shard.data.shape[0] for shard in rows.addressable_shards} == {10}
  assert state.params['model']['C']['embedding'].sharding.is_fully_replicated


def check_checkpoints_move_between_device_counts():
  """Trains the first half of a run on 8 devices (data:2,model:4) into one workdir, and
  finishes on 8 devices a run whose first half the parent trained on one."""
  corpus = load_tiny_corpus(os.environ['NPLM_TEST_TFDS'])
  base = Config.from_saved(json.loads(os.environ['NPLM_TEST_CHECKPOINT_CONFIG']))
  half = run(base.replace(workdir=os.environ['NPLM_TEST_SAVED_ON_8'],
                                         mesh='data:2,model:4', max_steps=HALF), corpus)
  assert half['status'] == 'max_steps', half
  summary = run(base.replace(workdir=os.environ['NPLM_TEST_SAVED_ON_1'],
                                            mesh='data:2,model:4'), corpus)
  assert summary['devices']['mesh'] == {'data': 2, 'model': 4}


def check_a_hundred_steps_in_flight_do_not_deadlock():
  """jax 0.10.2's CPU collectives deadlock with about a hundred un-awaited calls in flight
  (XLA aborts after 40 s); parallel.wait_on_cpu_devices waits on each (and stop_requests.pace
  keeps few queued). 120 evaluation batches in a row: with both made no-ops, this deadlocks
  (14,000 words at 2,048 a batch did too, in 31 s instead of 5 s with them)."""
  vocab = 4000  # Steps slow enough that dispatch runs far ahead of them.
  config = WINDOW.replace(eval_batch_size=1024)
  mesh = parallel.make_mesh('data:8')
  lm = build_language_model(config, np.ones(vocab), mesh)
  splits = {'train': SPLITS['train'], 'valid': RNG.integers(0, vocab, 1024 * 120)}
  feed = WindowFeed(config, lm, splits, BOUNDARY, mesh)
  state = feed.create_state(jax.random.key(0))
  assert np.isfinite(valid_perplexity(feed, state.params))


def check_devices_benchmark_times_every_mesh():
  ids = RNG.integers(0, VOCAB, 200).astype(np.int32)
  report = devices_benchmark.run_benchmark(ids, COUNTS, BOUNDARY, per_device_batch=4, steps=2,
                                           repeats=1)
  meshes = [(r['mode'], r['devices'], r['batch_size']) for r in report['rows']]
  assert meshes == [('data', 1, 4), ('data', 2, 8), ('data', 4, 16), ('data', 8, 32),
                    ('model', 1, 4), ('model', 2, 4), ('model', 4, 4), ('model', 8, 4)]
  assert all(r['median'] > 0 for r in report['rows'])
  assert [r['speedup'] for r in report['rows'] if r['devices'] == 1] == [1.0, 1.0]
  assert 'model:8' in devices_benchmark.format_report(report, markdown=True)


def check_models_trained_together_split_their_batch_over_data():
  """Two models trained together on data:8 (the parent compares them with one device); a
  'model' axis is refused before any workdir is touched."""
  corpus = load_tiny_corpus(os.environ['NPLM_TEST_TFDS'])
  base = Config.from_saved(json.loads(os.environ['NPLM_TEST_CHECKPOINT_CONFIG']))
  root = Path(os.environ['NPLM_TEST_TOGETHER_ON_8'])
  summaries = run(together_configs(base, root, mesh='data:8'), corpus)
  assert [s['devices']['mesh'] for s in summaries] == [{'data': 8, 'model': 1}] * 2
  with pytest.raises(ConfigError, match='output rows whole'):
    run(together_configs(base, root / 'refused', mesh='data:4,model:2'), corpus)
  assert not (root / 'refused').exists()


CHECKS = multidevice.check_names(globals())


# --- Run by pytest (one device), with the child. ---

def checkpoint_config(tmp_path) -> Config:
  return Config(order=3, feature_size=8, hidden_size=16, batch_size=16, eval_batch_size=16,
                epochs=2, patience=5, learning_rate=0.05, checkpoint_every=4, log_every=2,
                workdir=str(tmp_path / 'unused'), **TINY_SPLIT, unk_max_count=1)


def together_configs(base: Config, root: Path, **changes) -> list[Config]:
  return [base.replace(workdir=str(root / f'model{k}'), seed=k, learning_rate=rate, data_seed=0,
                       **changes)
          for k, rate in enumerate((0.05, 0.02))]


@pytest.fixture(scope='module')
def runs(tiny_corpus, tiny_data_dir, tmp_path_factory):
  """The child's report, with the runs the checkpoint test compares."""
  tmp_path = tmp_path_factory.mktemp('meshes')
  config = checkpoint_config(tmp_path)
  half_on_1 = run(config.replace(workdir=str(tmp_path / 'saved_on_1'),
                                                max_steps=HALF), tiny_corpus)
  assert half_on_1['status'] == 'max_steps'
  report = multidevice.child_report(
      'tests.test_parallel_training', DEVICES, NPLM_TEST_TFDS=str(tiny_data_dir),
      NPLM_TEST_CHECKPOINT_CONFIG=json.dumps(config.to_dict()),
      NPLM_TEST_SAVED_ON_8=str(tmp_path / 'saved_on_8'),
      NPLM_TEST_SAVED_ON_1=str(tmp_path / 'saved_on_1'),
      NPLM_TEST_TOGETHER_ON_8=str(tmp_path / 'together_on_8'))
  return {'report': report, 'config': config, 'tmp_path': tmp_path, 'corpus': tiny_corpus}


@pytest.mark.parametrize('check', CHECKS)
@pytest.mark.slow
def test_on_8_devices(runs, check):
  assert runs['report'][check] == 'ok', runs['report'][check]


@pytest.mark.slow
def test_a_checkpoint_moves_between_8_devices_and_1(runs):
  """Saved on 8 and finished on 1, or saved on 1 and finished on 8: the numbers of a run
  that never moved (one device, uninterrupted)."""
  assert runs['report']['check_checkpoints_move_between_device_counts'] == 'ok'
  config, tmp_path, corpus = runs['config'], runs['tmp_path'], runs['corpus']
  finished_on_1 = run(config.replace(workdir=str(tmp_path / 'saved_on_8')),
                                     corpus)
  finished_on_8 = json.loads((tmp_path / 'saved_on_1' / 'summary.json').read_text())
  never_moved = run(config.replace(workdir=str(tmp_path / 'never_moved')),
                                   corpus)
  for moved in (finished_on_1, finished_on_8):
    assert moved['steps'] == never_moved['steps'] > HALF
    for split in ('train', 'valid', 'test'):
      np.testing.assert_allclose(moved[f'{split}_ppl'], never_moved[f'{split}_ppl'], rtol=1e-5)
  assert finished_on_8['devices']['mesh'] == {'data': 2, 'model': 4}


@pytest.mark.slow
def test_models_trained_together_on_8_devices_equal_them_on_one(runs):
  assert runs['report']['check_models_trained_together_split_their_batch_over_data'] == 'ok'
  tmp_path = runs['tmp_path']
  on_one = run(together_configs(runs['config'], tmp_path / 'together_on_1'),
                          runs['corpus'])
  for k, want in enumerate(on_one):
    got = json.loads((tmp_path / 'together_on_8' / f'model{k}' / 'summary.json').read_text())
    assert got['steps'] == want['steps'] and got['epochs'] == want['epochs']
    for split in ('train', 'valid', 'test'):
      np.testing.assert_allclose(got[f'{split}_ppl'], want[f'{split}_ppl'], rtol=1e-5)
  assert on_one[0]['test_ppl'] != on_one[1]['test_ppl']


def test_device_counts_double_up_to_every_device():
  assert devices_benchmark.device_counts(1) == [1]
  assert devices_benchmark.device_counts(8) == [1, 2, 4, 8]
  assert devices_benchmark.device_counts(6) == [1, 2, 4, 6]


def test_mesh_specs():
  assert parallel.mesh_shape('', 8) == (8, 1)
  assert parallel.mesh_shape('data:2,model:4', 8) == (2, 4)
  assert parallel.mesh_shape('model:4', 8) == (2, 4)
  assert parallel.mesh_shape('data:8', 8) == (8, 1)
  for bad, phrase in (('data:3', 'multiple of 3'), ('data:2,model:2', 'uses 4 devices'),
                      ('rows:2', 'data:N or model:N'), ('data:0', 'data:N or model:N'),
                      ('data:2,data:4', 'each axis once')):
    with pytest.raises(parallel.ConfigError, match=phrase):
      parallel.mesh_shape(bad, 8)


if __name__ == '__main__':
  multidevice.run_checks(globals(), DEVICES)
