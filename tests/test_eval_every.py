"""--eval_every: validations every N updates, early stopping and the best counted in them, and
a final evaluation that never drops an update (a run ending between validations validates its
last parameters and reports them when they are the better)."""

import gc
import json
import weakref

import jax
import numpy as np
import pytest

from nplm.run_files.checkpoint import Checkpoints
from nplm.run_files.saved_params import saved_params
from nplm.trainer import run
from nplm.training import loop as loop_module
from nplm.training.runs import Runs
from tests import cli
from tests.conftest import write_text_corpus
from tests.test_schedules import planted_validation
from tests.test_train import brute_force_perplexity, tiny_config


def steps_per_epoch(tiny_corpus, tmp_path) -> int:
  summary = run(tiny_config(tmp_path / 'one_epoch', epochs=1), tiny_corpus)
  return summary['steps']


@pytest.mark.slow
def test_validations_fall_every_n_updates_and_the_last_update_is_never_dropped(
    tiny_corpus, tmp_path):
  per_epoch = steps_per_epoch(tiny_corpus, tmp_path)
  every, max_steps = 7, 2 * per_epoch + 5
  assert max_steps % per_epoch and max_steps % every  # Ends between validations and epochs.
  config = tiny_config(tmp_path / 'run', eval_every=every, max_steps=max_steps, patience=50,
                       epochs=5)
  summary = run(config, tiny_corpus)
  assert summary['steps'] == max_steps and summary['epochs'] == 2
  assert summary['valid_steps'] == list(range(every, max_steps + 1, every))
  history = summary['valid_ppl_history']
  reported = summary['reported']
  # The reported parameters are the best of every validation and of the last update.
  if reported['parameters'] == 'last':
    assert reported['step'] == max_steps and reported['valid_ppl'] < min(history)
  else:
    assert reported['step'] == summary['valid_steps'][int(np.argmin(history))]
    assert reported['valid_ppl'] == min(history)
  assert summary['valid_ppl'] == pytest.approx(reported['valid_ppl'], rel=1e-6)
  # What the tools read is what the run reported, scored again by brute force.
  params = jax.tree.map(np.asarray, saved_params(tmp_path / 'run'))
  want = brute_force_perplexity(params, tiny_corpus.splits['valid'], tiny_corpus.vocab, config)
  assert summary['valid_ppl'] == pytest.approx(want, rel=1e-5)


@pytest.mark.slow
def test_the_last_parameters_are_reported_when_better_and_the_best_otherwise(
    tiny_corpus, tmp_path, monkeypatch):
  # Planted: validations at 5, 10 and 15; the run ends at 17, its last update scored 60.
  for last, best_ppl, want in ((60.0, 70.0, ('last', 17)), (90.0, 70.0, ('best', 10))):
    monkeypatch.setattr(loop_module.Loop, 'split_nll', planted_validation(
        {5: 80.0, 10: best_ppl, 15: 75.0, 17: last}))
    summary = run(tiny_config(tmp_path / f'run{last}', eval_every=5, max_steps=17, epochs=5,
                              patience=5), tiny_corpus)
    assert (summary['reported']['parameters'], summary['reported']['step']) == want
    assert summary['valid_ppl_history'] == pytest.approx([80.0, best_ppl, 75.0])


def test_a_best_is_restored_only_once_the_training_state_is_gone(tiny_corpus, tmp_path,
                                                                 monkeypatch):
  """The final phase holds one state at a time, as the memory check counts: the training
  state's arrays are all freed before the best checkpoint is read into new ones."""
  monkeypatch.setattr(loop_module.Loop, 'split_nll', planted_validation(
      {5: 80.0, 10: 70.0, 15: 75.0, 17: 90.0}))
  training, alive_at_restore = [], []
  report_choices, restore_best = Runs.report_choices, Checkpoints.restore_best

  def noting_the_states(runs, states, *args):
    training.extend(weakref.ref(leaf) for leaf in jax.tree.leaves(states))
    return report_choices(runs, states, *args)

  def noting_what_is_alive(checkpoints, *args):
    gc.collect()
    alive_at_restore.append(sum(ref() is not None for ref in training))
    return restore_best(checkpoints, *args)

  monkeypatch.setattr(Runs, 'report_choices', noting_the_states)
  monkeypatch.setattr(Checkpoints, 'restore_best', noting_what_is_alive)
  summary = run(tiny_config(tmp_path / 'run', eval_every=5, max_steps=17, epochs=5,
                            patience=5), tiny_corpus)
  assert summary['reported']['parameters'] == 'best'
  assert len(training) > 3 and alive_at_restore == [0]


def test_patience_counts_validations(tiny_corpus, tmp_path, monkeypatch):
  monkeypatch.setattr(loop_module.Loop, 'split_nll', planted_validation(
      {3: 90.0, 6: 80.0, 9: 85.0, 12: 81.0, 15: 70.0}))
  summary = run(tiny_config(tmp_path / 'run', eval_every=3, patience=2, epochs=5),
                tiny_corpus)
  assert summary['status'] == 'early_stopped'
  assert summary['valid_steps'] == [3, 6, 9, 12] and summary['best_step'] == 6
  assert summary['reported'] == {'parameters': 'best', 'step': 6,
                                 'valid_ppl': pytest.approx(80.0)}


def test_a_run_shorter_than_an_epoch_reports_its_last_update(tiny_corpus, tmp_path):
  config = tiny_config(tmp_path / 'run', max_steps=4)
  summary = run(config, tiny_corpus)
  assert summary['epochs'] == 0 and summary['valid_ppl_history'] == []
  assert summary['reported']['parameters'] == 'last' and summary['reported']['step'] == 4
  params = jax.tree.map(np.asarray, saved_params(tmp_path / 'run'))
  want = brute_force_perplexity(params, tiny_corpus.splits['valid'], tiny_corpus.vocab, config)
  assert summary['valid_ppl'] == pytest.approx(want, rel=1e-5)
  assert summary['reported']['valid_ppl'] is None  # Nothing to choose between: not validated.
  assert summary['phase_seconds']['validation'] == 0


@pytest.mark.slow
def test_a_run_stopped_at_a_validation_step_resumes_as_the_uninterrupted_run(
    tiny_corpus, tmp_path):
  changes = dict(eval_every=6, epochs=3, patience=10)
  whole = run(tiny_config(tmp_path / 'whole', **changes), tiny_corpus)
  parts = tiny_config(tmp_path / 'parts', **changes)
  stopped = run(parts.replace(max_steps=12), tiny_corpus)  # Its validation at 12 unrecorded.
  assert stopped['valid_steps'] == [6]
  resumed = run(parts, tiny_corpus)
  for key in ('valid_steps', 'valid_ppl_history', 'best_step', 'reported', 'test_ppl',
              'valid_ppl', 'steps', 'epochs'):
    assert resumed[key] == whole[key], key


@pytest.mark.slow
def test_the_command_line_says_which_parameters_it_reports(tmp_path):
  corpus, workdir = write_text_corpus(tmp_path / 'text'), tmp_path / 'run'
  result = cli.run('train', f'--dataset=text:{corpus}', f'--data_dir={tmp_path / "tfds"}',
                   f'--workdir={workdir}', '--order=3', '--feature_size=8', '--hidden_size=12',
                   '--batch_size=16', '--max_steps=4', '--eval_splits=valid')
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'epochs: 0 (the last parameters, step 4)' in result.stdout
  assert json.loads((workdir / 'summary.json').read_text())['reported']['step'] == 4


def test_a_progress_record_written_before_validations_every_n_steps_resumes():
  """Records of runs that validated once per epoch lack the steps and the best's number."""
  from nplm.run_files.model_run import Progress
  old = {'epochs_done': 3, 'valid_ppl_history': [200.0, 180.0, 185.0], 'best_valid_ppl': 180.0,
         'best_epoch': 2, 'stopped_early': False, 'train_examples': 10, 'train_seconds': 1.0,
         'wall_seconds': 2.0}
  progress = Progress.from_saved(old)
  assert progress.best_validation == 2 and progress.lr_scale == 1.0
  assert progress.valid_steps == [None] * 3 and progress.best_step is None
  assert {key: progress.to_json()[key] for key in old} == old
