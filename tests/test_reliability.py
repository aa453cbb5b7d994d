"""What a preemptible machine or a careless user does to a run: damaged checkpoints (passed
over for the next good one), readers while it trains, two trainers, an exploding loss, an
unusable --workdir, a damaged run.json, a stop during the final evaluation, a full disk."""

import errno
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.fault_harness import flip_bytes, newest, truncate
from nplm.run_files import model_run
from nplm.run_files.checkpoint import CheckpointError, IncompatibleCheckpointError
from nplm.run_files.saved_params import saved_params
from nplm.config import ConfigError
from nplm.perplexity import exploded, perplexity
from nplm.run_files.plots import read_metrics
from nplm.use.trained import load_trained
from nplm.trainer import TrainingDiverged, run
from nplm.training.feed import Feed
from nplm.training.window_feed import WindowFeed
from nplm.run_files.lock import WorkdirBusyError, WorkdirLock
from tests import cli
from tests.test_train import ROOT, tiny_config
from tests.test_word2vec import tiny_run_config

REPORTED = ('train_ppl', 'valid_ppl', 'test_ppl', 'valid_ppl_history', 'steps', 'epochs',
            'best_epoch')
# 30 updates an epoch on the tiny corpus: the interrupted runs stop inside the second.
CONFIG = dict(epochs=3, patience=3, checkpoint_every=4)


@pytest.fixture(scope='module')
def reference(tiny_corpus, tmp_path_factory):
  """An undamaged, uninterrupted run: (its workdir, its summary)."""
  workdir = tmp_path_factory.mktemp('reference') / 'run'
  return workdir, run(tiny_config(workdir, **CONFIG), tiny_corpus)


DAMAGE = {
    'bytes_flipped': flip_bytes,
    'data_file_truncated': truncate,
    'metadata_missing': lambda step_dir: (step_dir / 'state' / '_METADATA').unlink(),
    'state_missing': lambda step_dir: shutil.rmtree(step_dir / 'state'),
}


@pytest.fixture(scope='module')
def stopped_at_46(tiny_corpus, tmp_path_factory):
  """The workdir of the reference's run stopped at update 46 (each test damages a copy)."""
  workdir = tmp_path_factory.mktemp('stopped') / 'run'
  run(tiny_config(workdir, max_steps=46, **CONFIG), tiny_corpus)
  return workdir


@pytest.mark.parametrize('damage', DAMAGE)
@pytest.mark.slow
def test_a_damaged_newest_checkpoint_is_passed_over_and_the_run_ends_as_an_undamaged_one(
    tiny_corpus, reference, stopped_at_46, tmp_path, damage):
  workdir = tmp_path / 'run'
  shutil.copytree(stopped_at_46, workdir)
  damaged = newest(workdir)
  assert damaged.name == '46'
  DAMAGE[damage](damaged)
  resumed = run(tiny_config(workdir, **CONFIG), tiny_corpus)
  for key in REPORTED:
    assert resumed[key] == reference[1][key], key
  assert os.listdir(workdir / 'damaged') == ['checkpoints-46']


@pytest.mark.slow
def test_a_damaged_best_checkpoint_keeps_the_summary_and_the_model_is_read_exactly(
    tiny_corpus, reference, tmp_path):
  workdir = tmp_path / 'run'
  shutil.copytree(reference[0], workdir)
  best = newest(workdir, 'best')
  flip_bytes(best)
  # A reader takes the same step's copy in checkpoints/; its exact perplexity is the summary's.
  trained = load_trained(workdir)
  nll = -np.sum(trained.split_log_probs(tiny_corpus.splits['valid']))
  assert perplexity(nll, len(tiny_corpus.splits['valid']))['ppl'] == pytest.approx(
      reference[1]['valid_ppl'], rel=1e-6)
  rerun = run(tiny_config(workdir, **CONFIG), tiny_corpus)
  for key in REPORTED:
    assert rerun[key] == reference[1][key], key
  assert json.loads((workdir / 'summary.json').read_text())['valid_ppl'] == rerun['valid_ppl']
  assert os.listdir(workdir / 'damaged') == [f'best-{best.name}']
  assert (best / 'state').is_dir()  # Saved again from the good copy.


@pytest.mark.slow
def test_with_no_good_checkpoint_the_error_names_them_and_nothing_is_deleted(
    tiny_corpus, reference, tmp_path):
  workdir = tmp_path / 'run'
  shutil.copytree(reference[0], workdir)
  for name in ('checkpoints', 'best'):
    for step_dir in (workdir / name).iterdir():
      flip_bytes(step_dir)
  before = sorted(str(p.relative_to(workdir)) for p in workdir.rglob('*'))
  with pytest.raises(CheckpointError, match='nothing was deleted'):
    run(tiny_config(workdir, **CONFIG), tiny_corpus)
  WorkdirLock(workdir).acquire().release()  # The refused run let go of the workdir.
  with pytest.raises(CheckpointError, match='no usable checkpoint'):
    load_trained(workdir)
  assert set(before) <= {str(p.relative_to(workdir)) for p in workdir.rglob('*')}
  # As a user runs it, in a process of its own to its end: Orbax leaves its other reads of
  # the arrays unfinished when one fails, and their tracebacks (as Python collects them, as
  # their threads find the event loop closed, as the process ends) once followed the error
  # on most tries, hundreds of lines.
  for _ in range(3):
    result = subprocess.run([sys.executable, '-m', 'nplm.cli', 'predict',
                             f'--workdir={workdir}', 'the jury'], capture_output=True,
                            text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith('error: run: no usable '
                                                               'checkpoint'), result.stderr
    assert result.stderr.count('\n') == 1, result.stderr[:3000]


_TRAINER = """
import sys
from nplm.data import load_corpus
from nplm.trainer import run
from tests.test_train import tiny_config
from tests.conftest import FIXTURE_DIR, FIXTURE_FILES, FIXTURE_WORDS, TINY_SPLIT
corpus = load_corpus(data_dir=sys.argv[2], corpus_dir=FIXTURE_DIR, unk_max_count=1,
                     expected_words=FIXTURE_WORDS, expected_files=FIXTURE_FILES, **TINY_SPLIT)
print(run(tiny_config(sys.argv[1], epochs=3, patience=3, checkpoint_every=1),
                         corpus)['status'], flush=True)
"""


@pytest.mark.slow
def test_readers_looping_against_a_trainer_leave_it_alone(tiny_corpus, tiny_data_dir, tmp_path):
  workdir = tmp_path / 'run'
  trainer = subprocess.Popen([sys.executable, '-c', _TRAINER, str(workdir), str(tiny_data_dir)],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  reads = 0
  while trainer.poll() is None:
    if (workdir / 'vocab.txt').exists():
      try:
        trained = load_trained(workdir)
      except Exception as error:  # Only "nothing saved yet" may stop a read.
        assert 'no checkpoint yet' in str(error) or 'no training run' in str(error), error
      else:
        reads += 1
        assert np.isfinite(trained.split_log_probs(tiny_corpus.splits['valid'][:20])).all()
    time.sleep(0.01)
  out, err = trainer.communicate()
  assert trainer.returncode == 0, err
  assert out.split() == ['epochs_done']
  assert reads >= 3
  assert not any(p.name.endswith('tmp') for p in workdir.rglob('*'))


def test_a_second_trainer_is_refused_while_the_first_holds_the_workdir(tiny_corpus, tmp_path):
  workdir = tmp_path / 'run'
  workdir.mkdir()
  lock = WorkdirLock(workdir).acquire()
  try:
    with pytest.raises(WorkdirBusyError, match=f'process {os.getpid()} on'):
      run(tiny_config(workdir), tiny_corpus)
  finally:
    lock.release()
  assert not (workdir / 'checkpoints').exists()


def test_a_lock_left_by_a_killed_trainer_is_stale(tmp_path):
  holder = subprocess.Popen(
      [sys.executable, '-c', 'import sys, time; from pathlib import Path; '
       'from nplm.run_files.lock import WorkdirLock; WorkdirLock(Path(sys.argv[1])).acquire(); '
       'print("held", flush=True); time.sleep(60)', str(tmp_path)],
      cwd=ROOT, stdout=subprocess.PIPE, text=True)
  assert holder.stdout.readline().strip() == 'held'
  with pytest.raises(WorkdirBusyError, match=f'process {holder.pid} on'):
    WorkdirLock(tmp_path).acquire()
  holder.kill()
  holder.wait()
  WorkdirLock(tmp_path).acquire().release()


@pytest.mark.parametrize('optimizer, learning_rate', [('sgd', 1e9), ('adamw', 1e3)])
def test_a_huge_finite_loss_stops_as_diverged(tiny_corpus, tmp_path, optimizer, learning_rate):
  config = tiny_config(tmp_path / 'run', optimizer=optimizer, learning_rate=learning_rate,
                       log_every=1)
  with pytest.raises(TrainingDiverged, match='Lower --learning_rate'):
    run(config, tiny_corpus)


@pytest.mark.parametrize('bad', [None, np.nan, np.inf, -np.inf])
def test_all_finite_finds_one_bad_value_on_the_host_and_on_the_devices(bad):
  """all_finite, read by numpy (CPU arrays) and by its device program, against Python's
  math.isfinite value by value; one bad value in any leaf, of any width, is found."""
  tree = {'C': jnp.ones((5, 3), jnp.bfloat16), 'H': {'kernel': jnp.zeros((4, 6))},
          'step': jnp.int32(7)}
  if bad is not None:
    tree['H']['kernel'] = tree['H']['kernel'].at[2, 5].set(bad)
  expected = all(math.isfinite(float(value)) for leaf in jax.tree.leaves(tree)
                 for value in np.asarray(leaf, np.float64).reshape(-1))
  assert expected == (bad is None)
  assert model_run.all_finite(tree) == expected
  assert bool(model_run._all_finite(tree)) == expected  # pylint: disable=protected-access


def test_perplexity_overflows_to_infinity_and_counts_as_exploded():
  assert perplexity(1e6, 10)['ppl'] == float('inf')
  assert perplexity(np.log(7.0) * 3, 3)['ppl'] == pytest.approx(7.0)
  assert exploded(float('nan'), 10) and exploded(1e4, 10_000) and not exploded(9.3, 10_000)


@pytest.mark.parametrize('language_model', [True, False])
def test_a_validation_worse_than_a_uniform_guess_is_said(tiny_corpus, tmp_path, monkeypatch,
                                                         caplog, language_model):
  """Exact, finite and far from the divergence threshold, yet above |V|: a language model's run
  goes on and says so (a 2 x 650 LSTM under AdamW scored 7.7e10 on Brown's valid split at
  |V| = 14,039); word vectors' scores are no language model's and draw no warning."""
  size = tiny_corpus.vocab.size
  monkeypatch.setattr(Feed, 'log_probs',  # Twice a uniform guess's NLL per token.
                      lambda self, params, split, progress='': np.full(
                          self.sizes[split], -2 * np.log(size)))
  config = (tiny_config(tmp_path / 'run', epochs=1) if language_model else
            tiny_run_config(tmp_path / 'run', epochs=1, patience=1))
  summary = run(config, tiny_corpus)
  assert summary['valid_ppl_history'] == [pytest.approx(size ** 2)]
  assert (f'is above |V| = {size}, a uniform guess\'s' in caplog.text) == language_model


@pytest.mark.slow
def test_an_exploded_final_evaluation_leaves_the_summary_alone(
    tiny_corpus, reference, tmp_path, monkeypatch):
  workdir = tmp_path / 'run'
  shutil.copytree(reference[0], workdir)
  before = (workdir / 'summary.json').read_text()
  monkeypatch.setattr(WindowFeed, 'log_probs',  # Σ NLL = 1e9 over every split.
                      lambda self, params, split, progress='': np.full(
                          self.sizes[split], -1e9 / self.sizes[split]))
  with pytest.raises(TrainingDiverged, match='final train perplexity is inf'):
    run(tiny_config(workdir, **CONFIG), tiny_corpus)
  assert (workdir / 'summary.json').read_text() == before


@pytest.mark.slow
def test_a_stop_during_the_final_evaluation_interrupts_and_the_rerun_finishes(
    tiny_corpus, reference, tmp_path, monkeypatch):
  workdir = tmp_path / 'run'
  log_probs = WindowFeed.log_probs

  def log_probs_then_stop(self, params, split, progress=''):
    if split == 'test':  # Only the final evaluation scores the test split.
      os.kill(os.getpid(), signal.SIGINT)
    return log_probs(self, params, split, progress)

  monkeypatch.setattr(WindowFeed, 'log_probs', log_probs_then_stop)
  interrupted = run(tiny_config(workdir, **CONFIG), tiny_corpus)
  assert interrupted['status'] == 'interrupted'
  assert not (workdir / 'summary.json').exists()
  monkeypatch.setattr(WindowFeed, 'log_probs', log_probs)
  finished = run(tiny_config(workdir, **CONFIG), tiny_corpus)
  for key in REPORTED:
    assert finished[key] == reference[1][key], key


def test_an_unusable_workdir_is_a_one_line_error(tiny_corpus, tmp_path, monkeypatch):
  a_file = tmp_path / 'a_file'
  a_file.write_text('not a directory')
  with pytest.raises(ConfigError, match='cannot be a directory: give a directory'):
    run(tiny_config(a_file), tiny_corpus)
  with pytest.raises(ConfigError, match=f'it lies under {a_file}, a file'):
    run(tiny_config(a_file / 'run'), tiny_corpus)
  read_only = tmp_path / 'read_only'
  read_only.mkdir()
  read_only.chmod(0o555)
  if os.access(read_only, os.W_OK):  # Root writes anyway: answer as the kernel would.
    real_open = os.open
    def refused(path, *args, **kwargs):
      if Path(path).parent == read_only:
        raise PermissionError(errno.EACCES, 'Permission denied', str(path))
      return real_open(path, *args, **kwargs)
    monkeypatch.setattr(os, 'open', refused)
  with pytest.raises(ConfigError, match='is not writable .*give a directory you can write'):
    run(tiny_config(read_only), tiny_corpus)


@pytest.mark.slow
def test_a_damaged_run_json_is_named_not_a_traceback(tiny_corpus, reference, tmp_path):
  workdir = tmp_path / 'run'
  shutil.copytree(reference[0], workdir)
  identity = workdir / 'run.json'
  identity.write_text(identity.read_text()[:100])
  with pytest.raises(IncompatibleCheckpointError, match='run.json is damaged'):
    run(tiny_config(workdir, **CONFIG), tiny_corpus)
  with pytest.raises(IncompatibleCheckpointError, match='run.json is damaged'):
    load_trained(workdir)


@pytest.mark.slow
def test_a_full_disk_and_an_interrupted_run_get_their_exit_statuses(tmp_path):
  """2 and one line for a full disk (simulated: Orbax's save raises ENOSPC), 75 for a run
  stopped by SIGTERM, which a scheduler can then tell from a finished one (0)."""
  corpus = tmp_path / 'corpus'
  corpus.mkdir()
  for split, lines in (('train', 400), ('valid', 50), ('test', 50)):
    (corpus / f'{split}.txt').write_text(''.join(f'w{i % 7} w{i % 5} w{i % 3}\n'
                                                 for i in range(lines)))
  flags = [f'--dataset=text:{corpus}', f'--data_dir={tmp_path / "tfds"}', '--order=3',
           '--feature_size=4', '--hidden_size=4', '--batch_size=4', '--log_every=1',
           '--checkpoint_every=1000', '--epochs=50']
  full_disk = ('import errno, sys, orbax.checkpoint as ocp\n'
               'def save(*args, **kwargs):\n'
               '  raise ValueError("Save failed") from OSError(errno.ENOSPC, '
               '"No space left on device")\n'
               'ocp.Checkpointer.save = save\n'
               'from nplm.cli.train import run_program\n'
               'run_program(["nplm train", *sys.argv[1:]])\n')
  result = subprocess.run([sys.executable, '-c', full_disk, *flags,
                           f'--workdir={tmp_path / "full"}'], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
  assert result.returncode == 2, result.stderr
  assert result.stderr.strip().splitlines()[-1].startswith(
      f'error: no space left on the disk of --workdir={tmp_path / "full"}: free some space')
  assert 'Traceback' not in result.stderr
  trainer = subprocess.Popen([sys.executable, '-m', 'nplm.cli', 'train', *flags,
                              f'--workdir={tmp_path / "stopped"}'], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  while not any('loss' in line for line in iter(trainer.stderr.readline, '')):
    pass
  trainer.send_signal(signal.SIGTERM)
  out, err = trainer.communicate(timeout=120)
  assert trainer.returncode == 75, err
  assert 'Rerun the same command to resume' in out


@pytest.mark.slow
def test_a_flagfile_line_without_dashes_and_a_workdir_without_checkpoints_are_one_line(
    reference, tmp_path):
  flagfile = tmp_path / 'bad.flags'
  flagfile.write_text('--epochs=2\nepochs=3\n')
  fresh = tmp_path / 'fresh'
  fresh.mkdir()
  for name in ('run.json', 'vocab.txt'):
    shutil.copy(reference[0] / name, fresh / name)
  for command, error in (
      (['train', f'--flagfile={flagfile}'], "error: unexpected arguments 'epochs=3'"),
      (['score', f'--workdir={fresh}', 'a b'], f'error: {fresh} has no checkpoint yet')):
    result = cli.run(*command)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith(error)
  assert sorted(os.listdir(fresh)) == ['run.json', 'vocab.txt']  # The reader made nothing.


@pytest.mark.slow
def test_a_finished_run_whose_best_was_deleted_reruns_from_the_same_steps_copy(
    tiny_corpus, reference, tmp_path):
  workdir = tmp_path / 'run'
  shutil.copytree(reference[0], workdir)
  shutil.rmtree(workdir / 'best')
  rerun = run(tiny_config(workdir, **CONFIG), tiny_corpus)
  for key in REPORTED:
    assert rerun[key] == reference[1][key], key
  assert os.listdir(workdir / 'best') == [str(reference[1]['best_step'])]


def test_a_disk_too_full_for_a_checkpoint_is_found_before_writing(
    tiny_corpus, tmp_path, monkeypatch):
  workdir = tmp_path / 'run'
  run(tiny_config(workdir, max_steps=5, **CONFIG), tiny_corpus)
  state_bytes = sum(x.nbytes for x in jax.tree.leaves(saved_params(workdir, latest=True)))
  usage = shutil.disk_usage(tmp_path)
  monkeypatch.setattr(shutil, 'disk_usage', lambda path: usage._replace(free=state_bytes))
  with pytest.raises(OSError, match='No space left on device: a checkpoint needs') as raised:
    run(tiny_config(workdir, max_steps=9, **CONFIG), tiny_corpus)
  assert raised.value.errno == errno.ENOSPC
  assert sorted(os.listdir(workdir / 'checkpoints')) == ['4', '5']  # Nothing half-written.


@pytest.mark.slow
def test_a_metrics_line_cut_short_costs_a_point_of_the_picture_not_the_run(
    tiny_corpus, reference, tmp_path):
  workdir = tmp_path / 'run'
  shutil.copytree(reference[0], workdir)
  metrics = workdir / 'metrics.jsonl'
  lines = metrics.read_text().splitlines()
  metrics.write_text('\n'.join(lines[:3] + [lines[3][:10] + lines[4]] + lines[5:]) + '\n')
  (workdir / 'learning_curve.png').unlink()
  rerun = run(tiny_config(workdir, **CONFIG), tiny_corpus)
  assert rerun['valid_ppl'] == reference[1]['valid_ppl']
  assert (workdir / 'learning_curve.png').stat().st_size > 0
  kept = read_metrics(workdir)
  assert sum(len(records) for records in kept.values()) == len(lines) - 2
