"""word2vec on several devices: its update on 2 simulated devices (tests/multidevice.py says
why in a child), each device applying its half of the batch chunk after chunk to its copy of
the tables and the devices' changes summed, against the same halves updated on one device;
and on a CPU, the share of a step per core that `nplm train` gives the compiled update's
threads, or without a compiler, a CPU device each."""

import os
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nplm import parallel
from nplm.config import Config, ConfigError
from nplm.lm import build_language_model
from nplm.training import word2vec_update
from nplm.training.window_feed import WindowFeed
from nplm.training.word2vec_feed import Word2VecFeed
from nplm.training.word2vec_windows import context_windows, window_radii
from tests import cli, multidevice
from tests.conftest import write_text_corpus

DEVICES = 2
IDS = np.random.default_rng(0).integers(0, 12, 90).astype(np.int32)


def feed_on(mesh: str, head: str, **changes) -> Word2VecFeed:
  knobs = dict(feature_size=6, window=2, batch_size=8, chunk_positions=2, learning_rate=0.3,
               num_samples=5)
  config = Config(workdir='unused', model='skipgram', head=head, optimizer='sgd',
                  **{**knobs, **changes})
  lm = build_language_model(config, np.bincount(IDS, minlength=12))
  return Word2VecFeed(config, lm, {'train': IDS}, boundary_id=0,
                      mesh=parallel.make_mesh(mesh))


def one_device_reference(feed, tables, batch, run_rng, alpha):
  """The step's windows and draws made as the update makes them; each device's half updated
  on one device from the same tables (by the compiled update, one thread, where the feed's
  devices run it); the changes summed."""
  stream, positions, index = (np.asarray(array) for array in batch)
  window_rng, head_rng = jax.random.split(jax.random.fold_in(run_rng, 0))
  size, window = feed.config.batch_size, feed.config.window
  positions = positions[index * size:(index + 1) * size]
  radii = window_radii(window_rng, size, window)
  windows, centers = context_windows(jnp.asarray(stream), jnp.asarray(positions), radii, window)
  _, output = feed.output_vectors()
  changes = []
  for device, half in enumerate(np.split(np.arange(size), DEVICES)):
    *updated, _, _ = word2vec_update.chunked_step(
        'skipgram', output, *tables, windows[half], centers[half], jnp.ones(len(half)),
        alpha, jax.random.fold_in(head_rng, device), 2, feed.cpu_threads)
    changes.append([np.asarray(new) - np.asarray(old) for new, old in zip(updated, tables)])
  return [np.asarray(old) + sum(change[k] for change in changes)
          for k, old in enumerate(tables)]


def check_devices_sum_their_halves_changes():
  for head in ('negative_sampling', 'tree'):
    feed = feed_on('data:2', head)
    state = feed.create_state(jax.random.key(1))
    name, _ = feed.output_vectors()
    rng = np.random.default_rng(2)
    params = jax.tree.map(np.array, state.params)
    params['head'][name]['embedding'] = rng.normal(0, 0.5, params['head'][name]['embedding'].shape)
    state = state.replace(params=jax.tree.map(lambda p: jnp.asarray(p, jnp.float32), params))
    tables = (params['model']['C']['embedding'].astype(np.float32),
              params['head'][name]['embedding'].astype(np.float32))
    state, batches = feed.start_epoch(state, epoch=0, start=0)
    batch, _ = next(batches)
    run_rng = jax.random.key(5)
    alpha = float(feed.config.learning_rate)  # The inverse schedule at step 0.
    want = one_device_reference(feed, tables, batch, run_rng, alpha)
    after, _ = feed.step(state, batch, run_rng)
    got = (after.params['model']['C']['embedding'], after.params['head'][name]['embedding'])
    for mine, reference, start in zip(got, want, tables):
      assert not np.allclose(reference, start)
      np.testing.assert_allclose(np.asarray(mine), reference, rtol=1e-5, atol=1e-6)


def check_a_vocabulary_parallel_mesh_and_uneven_chunks_are_refused():
  with pytest.raises(ConfigError, match='use a mesh with data only'):
    feed_on('data:1,model:2', 'negative_sampling')
  with pytest.raises(ConfigError, match='must divide the 6 positions'):
    feed_on('data:2', 'tree', chunk_positions=4, batch_size=12)


CHECKS = multidevice.check_names(globals())


@pytest.fixture(scope='module')
def report():
  return multidevice.child_report('tests.test_word2vec_devices', DEVICES)


@pytest.mark.slow
@pytest.mark.parametrize('check', CHECKS)
def test_on_2_devices(report, check):
  assert report[check] == 'ok', report[check]


# --- a CPU core per share of the step ------------------------------------------------------

@pytest.mark.parametrize('cores, batch_size, chunk_positions, shares', [
    (1, 16384, 32, 1), (2, 16384, 32, 2), (3, 16384, 32, 2),
    (8, 16384, 32, 4),  # At least 4,096 positions a share between the sums of the tables.
    (64, 4095, 0, 1), (4, 12288, 4096, 3),  # 4,096 positions each: one chunk of 4,096.
    (2, 12288, 5000, 1),  # 6,144 on 2 hold no whole chunks of 5,000; 12,288 on one neither
    (4, 40960, 0, 4),     # (refused later, by name); --chunk_positions=0: a share's all.
])
def test_word2vec_shares_a_step_among_the_cores_in_whole_chunks(
    monkeypatch, cores, batch_size, chunk_positions, shares):
  """The compiled update's threads (on one device), or where it cannot be built, a CPU
  device each (XLA runs the loop over chunks on one core)."""
  monkeypatch.setattr('nplm.parallel.usable_cores', lambda: cores)
  config = Config(workdir='unused', model='cbow', head='negative_sampling', optimizer='sgd',
                  batch_size=batch_size, chunk_positions=chunk_positions)
  assert Word2VecFeed.cpu_shares(config) == shares
  assert Word2VecFeed.cpu_devices(config) == 1
  monkeypatch.setattr('nplm.training.word2vec_native.unavailable', lambda: 'no compiler')
  assert Word2VecFeed.cpu_devices(config) == shares
  assert WindowFeed.cpu_devices(config.replace(model='nnlm', optimizer='adam')) == 1


def startup_devices(child) -> str:
  """The start-up line's count of devices and its mesh, e.g. '2 cpu devices, mesh data:2'."""
  assert child.returncode == 0, child.stderr
  (line,) = [line for line in child.stderr.splitlines() if ' · workdir ' in line]
  return line.split(' · ')[-2]


@pytest.mark.slow
def test_nplm_train_spreads_word2vec_over_the_cores_and_nothing_else(tmp_path):
  """As a user types it: word2vec's compiled update runs a thread per core (of those that
  split its batch) on one CPU device; without a C++ compiler, XLA's loop on a CPU device per
  core, and a line says why; an NNLM stays on one device."""
  corpus = write_text_corpus(tmp_path / 'corpus')
  common = ['train', f'--dataset=text:{corpus}', '--data_dir=tfds', '--feature_size=8',
            '--unk_max_count=1', '--epochs=1']
  word2vec = [*common, '--model=cbow', '--head=negative_sampling', '--optimizer=sgd',
              '--num_samples=2', '--window=2', '--batch_size=8192', '--chunk_positions=16']
  cores = len(os.sched_getaffinity(0))
  shares = 2 if cores >= 2 else 1  # 4,096 positions each at least.
  compiled = cli.run(*word2vec, '--workdir=w', cwd=tmp_path)
  assert startup_devices(compiled) == '1 cpu device, mesh data:1,model:1'
  assert (f"word2vec's update: compiled C++, {shares} thread{'s' * (shares > 1)} a device"
          in compiled.stderr)
  # The corpus prepared by the first, these two run side by side.
  without = cli.start(*word2vec, '--workdir=without', cwd=tmp_path, CXX='no-such-c++',
                      NPLM_CACHE_DIR=str(tmp_path / 'empty_cache'))
  nnlm = cli.start(*common, '--model=nnlm', '--order=3', '--hidden_size=8', '--max_steps=2',
                   '--eval_splits=valid', '--workdir=nnlm', cwd=tmp_path)
  finished = []
  for child in (without, nnlm):
    out, err = child.communicate(timeout=300)
    finished.append(subprocess.CompletedProcess(child.args, child.returncode, out, err))
  assert startup_devices(finished[0]) == (
      f'{shares} cpu device{"s" * (shares > 1)}, mesh data:{shares},model:1')
  assert ("word2vec's update: XLA's loop, not the compiled C++ (no C++ compiler "
          '(no-such-c++ not on PATH))') in finished[0].stderr
  assert startup_devices(finished[1]) == '1 cpu device, mesh data:1,model:1'


if __name__ == '__main__':
  multidevice.run_checks(globals(), DEVICES)
