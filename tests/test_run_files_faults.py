"""Damaged and misused workdirs (issue 42): a summary.json deleted, cut short or edited, a lost
run.json, a deleted best/, and --keep_checkpoints. Each reader's parameters are checked
against the checkpoint of the step the run reported, read directly."""

import asyncio
import json
import logging
import os
import shutil
import sys
import types

import jax
import numpy as np
import pytest

from nplm.run_files import abandoned_reads, checkpoint
from nplm.run_files.checkpoint import (CheckpointError, Checkpoints,
                                       IncompatibleCheckpointError)
from nplm.run_files.saved_params import saved_params
from nplm.run_files.summary import finished_summary
from nplm.trainer import run
from nplm.training import loop as loop_module
from nplm.use.trained import NoTrainedModelError, load_trained
from tests.test_schedules import planted_validation
from tests.test_train import tiny_config

# Validations at 5, 10 and 15 (the best: 10); the run ends at 17, between validations, where
# its last update scores LAST[report]: better than the best (reported) or worse.
PLANTED = {5: 80.0, 10: 70.0, 15: 75.0}
LAST = {'last': 60.0, 'best': 90.0}
CHANGES = dict(eval_every=5, max_steps=17, epochs=5, patience=5)


def planted(report: str):
  return planted_validation({**PLANTED, 17: LAST[report]})


@pytest.fixture(scope='module')
def finished(tiny_corpus, tmp_path_factory):
  """{'last': workdir, 'best': workdir}: finished runs that reported those parameters."""
  workdirs = {}
  with pytest.MonkeyPatch.context() as patch:
    for report in LAST:
      patch.setattr(loop_module.Loop, 'split_nll', planted(report))
      workdir = tmp_path_factory.mktemp(report) / 'run'
      summary = run(tiny_config(workdir, **CHANGES), tiny_corpus)
      assert summary['reported']['parameters'] == report
      workdirs[report] = workdir
  return workdirs


def copied(finished, report: str, tmp_path):
  return shutil.copytree(finished[report], tmp_path / report)


def params_at(workdir, name: str, step: int):
  """The parameters of one checkpoint, read directly."""
  return checkpoint.read(workdir / name / str(step))[0]['params']


def same(a, b) -> bool:
  return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def rerun(workdir, report: str, tiny_corpus, monkeypatch) -> dict:
  """The train command run again on a finished workdir (validations planted as before)."""
  monkeypatch.setattr(loop_module.Loop, 'split_nll', planted(report))
  return run(tiny_config(workdir, **CHANGES), tiny_corpus)


@pytest.mark.slow
def test_without_its_summary_a_run_is_read_with_the_parameters_it_reported(finished, tmp_path):
  last = copied(finished, 'last', tmp_path)
  (last / 'summary.json').unlink()
  assert not same(params_at(last, 'best', 10), params_at(last, 'checkpoints', 17))
  assert same(saved_params(last), params_at(last, 'checkpoints', 17))  # Not best/'s.
  best = copied(finished, 'best', tmp_path)
  (best / 'summary.json').unlink()
  want = params_at(best, 'best', 10)
  assert same(saved_params(best), want)
  shutil.rmtree(best / 'best')  # Its copy in checkpoints/ is read, not the newest.
  assert same(saved_params(best), want)
  assert same(load_trained(best).params, want)


@pytest.mark.parametrize('damage', ['cut short', 'reported edited', 'checksum edited'])
@pytest.mark.slow
def test_a_damaged_summary_is_refused_in_one_line_and_a_rerun_rewrites_it(
    finished, tiny_corpus, tmp_path, monkeypatch, damage):
  workdir = copied(finished, 'last', tmp_path)
  path = workdir / 'summary.json'
  written = json.loads(path.read_text())
  if damage == 'cut short':
    path.write_text(path.read_text()[:len(path.read_text()) // 2])
  else:
    edited = dict(written)
    if damage == 'reported edited':
      edited['reported'] = {**written['reported'], 'parameters': 'best', 'step': 10}
    else:
      edited['checksum'] = '0' * 64
    path.write_text(json.dumps(edited))
  for read in (saved_params, load_trained):
    with pytest.raises(CheckpointError, match=r'^\S+summary.json is damaged \([^\n]*\); '
                       r'rerun the train command of its run to rewrite it[^\n]*$'):
      read(workdir)
  assert finished_summary(tiny_config(workdir, **CHANGES)) is None  # A sweep runs it again.
  rewritten = rerun(workdir, 'last', tiny_corpus, monkeypatch)
  assert rewritten['reported'] == written['reported']
  assert json.loads(path.read_text())['reported'] == written['reported']
  assert same(saved_params(workdir), params_at(workdir, 'checkpoints', 17))


@pytest.mark.parametrize('damage', ['cut short', 'a byte that is no UTF-8', 'a word edited'])
@pytest.mark.slow
def test_a_damaged_vocabulary_is_refused_in_one_line_and_a_rerun_writes_it_again(
    finished, tiny_corpus, tmp_path, monkeypatch, damage):
  workdir = copied(finished, 'last', tmp_path)
  path = workdir / 'vocab.txt'
  written = path.read_bytes()
  middle = len(written) // 2
  path.write_bytes({'cut short': written[:middle],
                    'a byte that is no UTF-8': written[:middle] + b'\xff' + written[middle + 1:],
                    'a word edited': written.replace(b'\njury\t', b'\njurx\t')}[damage])
  assert path.read_bytes() != written
  with pytest.raises(NoTrainedModelError, match=r'^\S+vocab.txt is damaged \([^\n]*\); rerun '
                     r'the train command of its run to write it again[^\n]*$'):
    load_trained(workdir)
  rerun(workdir, 'last', tiny_corpus, monkeypatch)
  assert path.read_bytes() == written
  assert load_trained(workdir).vocab.words == tiny_corpus.vocab.words


def test_a_finished_run_whose_best_dir_was_deleted_reruns_from_the_same_steps_copy(
    finished, tiny_corpus, tmp_path, monkeypatch):
  workdir = copied(finished, 'best', tmp_path)
  written = json.loads((workdir / 'summary.json').read_text())
  want = params_at(workdir, 'best', 10)
  shutil.rmtree(workdir / 'best')
  assert same(saved_params(workdir), want)  # Readers: the same step's copy, not the newest.
  summary = rerun(workdir, 'best', tiny_corpus, monkeypatch)
  assert summary['reported'] == written['reported']
  assert os.listdir(workdir / 'best') == ['10']
  assert same(params_at(workdir, 'best', 10), want)
  before = (workdir / 'summary.json').read_text()
  shutil.rmtree(workdir / 'best')
  shutil.rmtree(workdir / 'checkpoints' / '10')  # No copy left: an error, no other choice.
  with pytest.raises(CheckpointError, match=r'no checkpoint holds the parameters its run '
                     r'reported \(its best, step 10\)'):
    saved_params(workdir)
  with pytest.raises(CheckpointError, match=r'no copy of the best checkpoint \(step 10\)'):
    rerun(workdir, 'best', tiny_corpus, monkeypatch)
  assert (workdir / 'summary.json').read_text() == before


@pytest.mark.slow
def test_a_best_copy_cut_short_is_never_read_and_the_next_trainer_clears_it(
    finished, tiny_corpus, tmp_path, monkeypatch):
  """best/ is a copy of a checkpoint's files (no second Orbax save): a copy that fails or is
  killed halfway stays under a temporary name, which readers pass over and the next trainer
  removes before it copies again."""
  workdir = copied(finished, 'best', tmp_path)
  want = params_at(workdir, 'best', 10)
  shutil.rmtree(workdir / 'best')
  copytree = shutil.copytree

  def cut_short(source, target, **kwargs):
    os.makedirs(target)
    shutil.copy(os.path.join(source, '_CHECKPOINT_METADATA'), target)
    raise OSError(28, 'No space left on device')

  monkeypatch.setattr(checkpoint.shutil, 'copytree', cut_short)
  with pytest.raises(OSError, match='No space left'):
    rerun(workdir, 'best', tiny_corpus, monkeypatch)
  assert [p.name for p in (workdir / 'best').iterdir()] == ['10.orbax-checkpoint-tmp-copy']
  assert same(saved_params(workdir), want)  # From checkpoints/10: the partial copy unread.
  monkeypatch.setattr(checkpoint.shutil, 'copytree', copytree)
  rerun(workdir, 'best', tiny_corpus, monkeypatch)
  assert os.listdir(workdir / 'best') == ['10']
  assert same(params_at(workdir, 'best', 10), want)


def test_a_lost_run_json_is_restored_from_the_checkpoints_and_still_guards_the_workdir(
    tiny_corpus, tmp_path):
  workdir = tmp_path / 'run'
  run(tiny_config(workdir, max_steps=12), tiny_corpus)
  recorded = json.loads((workdir / 'run.json').read_text())
  for changes, refused in (({'learning_rate': 0.5}, 'learning_rate: checkpoint has 0.01'),
                           ({'hidden_size': 20}, 'hidden_size: checkpoint has 12')):
    (workdir / 'run.json').unlink()
    with pytest.raises(IncompatibleCheckpointError, match=f'^[^\n]*{refused}[^\n]*$'):
      run(tiny_config(workdir, max_steps=24, **changes), tiny_corpus)
    assert json.loads((workdir / 'run.json').read_text()) == recorded
  (workdir / 'run.json').unlink()
  assert load_trained(workdir).config.hidden_size == 12  # Readers read the copy too.
  resumed = run(tiny_config(workdir, max_steps=24), tiny_corpus)
  assert (resumed['status'], resumed['steps']) == ('max_steps', 24)
  assert json.loads((workdir / 'run.json').read_text()) == recorded


def test_checkpoints_without_a_copy_of_the_lost_run_json_are_refused(tiny_corpus, tmp_path):
  workdir = tmp_path / 'run'
  workdir.mkdir()
  state = {'step': np.int32(3), 'params': {'w': np.ones(4, np.float32)}}
  Checkpoints(workdir).save_latest(3, state, {'epochs_done': 0})  # As an older nplm saved.
  with pytest.raises(IncompatibleCheckpointError,
                     match=r'^\S+ holds checkpoints but no run.json[^\n]*older nplm'):
    run(tiny_config(workdir), tiny_corpus)
  assert not (workdir / 'run.json').exists()
  assert os.listdir(workdir / 'checkpoints') == ['3']


@pytest.mark.slow
def test_keep_checkpoints_bounds_the_periodic_checkpoints_and_the_run_resumes(
    tiny_corpus, tmp_path):
  whole = run(tiny_config(tmp_path / 'whole', epochs=2), tiny_corpus)
  workdir = tmp_path / 'parts'
  run(tiny_config(workdir, epochs=2, max_steps=30), tiny_corpus)  # One epoch: the best.
  best = int(os.listdir(workdir / 'best')[0])
  run(tiny_config(workdir, epochs=2, max_steps=36, checkpoint_every=1, keep_checkpoints=1),
      tiny_corpus)
  assert sorted(map(int, os.listdir(workdir / 'checkpoints'))) == [best, 36]
  resumed = run(tiny_config(workdir, epochs=2, keep_checkpoints=1), tiny_corpus)
  for key in ('train_ppl', 'valid_ppl', 'test_ppl', 'valid_ppl_history', 'steps'):
    assert resumed[key] == whole[key], key
  assert len(os.listdir(workdir / 'checkpoints')) <= 2


def test_compare_refuses_an_edited_summary_in_one_line_and_shows_the_intact_one(
    finished, tmp_path):
  from nplm.config import ConfigError
  from nplm.studies.comparison import read_run
  workdir = copied(finished, 'best', tmp_path)
  intact = read_run(str(workdir))
  assert intact['ppl']['valid'] == json.loads((workdir / 'summary.json').read_text())['valid_ppl']
  summary = json.loads((workdir / 'summary.json').read_text())
  summary['valid_ppl'] /= 2  # A hand edit that flatters the run.
  (workdir / 'summary.json').write_text(json.dumps(summary))
  with pytest.raises(ConfigError, match=r'summary.json is damaged .*leave that run out'):
    read_run(str(workdir))


def assert_the_next_trainer_leaves_step_3(directory, state, reported):
  """After a cut save, the next trainer leaves `directory` step 3 alone, readable, its
  progress record's `reported` the old copy's (None) or the new one's."""
  Checkpoints(directory.parent)
  assert os.listdir(directory) == ['3']
  restored, progress = checkpoint.read(directory / '3')
  np.testing.assert_array_equal(restored['params']['w'], state['params']['w'])
  assert progress.get('reported') == reported


@pytest.mark.parametrize('cut', ['in the save', 'before the renames', 'between the renames',
                                 'before the old copy is deleted'])
def test_a_step_saved_again_and_cut_short_leaves_one_copy_and_the_next_trainer_tidies(
    tmp_path, monkeypatch, cut):
  """A step saved a second time (keep_report's `reported`, a resumed run) is written beside
  the first and renamed into its place: a second Ctrl-C (KeyboardInterrupt) at any moment
  leaves a readable copy of the step, old or new, and the next trainer leaves only it."""
  workdir = tmp_path / 'run'
  workdir.mkdir()
  state = {'step': np.int32(3), 'params': {'w': np.arange(4, dtype=np.float32)}}
  Checkpoints(workdir).save_latest(3, state, {'epochs_done': 0})
  calls = {'os.replace': 0}
  moves = checkpoint.os.replace

  def interrupted(*args, **kwargs):
    raise KeyboardInterrupt

  def second_rename_interrupted(source, target):
    calls['os.replace'] += 1
    if calls['os.replace'] == 2:
      raise KeyboardInterrupt
    moves(source, target)

  if cut == 'in the save':
    monkeypatch.setattr(checkpoint, 'checkpoint_checksum', interrupted)
  elif cut == 'before the renames':  # The new copy saved whole, under its temporary name.
    monkeypatch.setattr(checkpoint.os, 'replace', interrupted)
  elif cut == 'between the renames':
    monkeypatch.setattr(checkpoint.os, 'replace', second_rename_interrupted)
  else:
    monkeypatch.setattr(checkpoint.shutil, 'rmtree', interrupted)
  with pytest.raises(KeyboardInterrupt):
    Checkpoints(workdir).save_again(3, state, {'epochs_done': 0, 'reported': 'new'})
  monkeypatch.undo()
  left = sorted(os.listdir(workdir / 'checkpoints'))
  assert left == ['3'] if cut == 'in the save' else len(left) == 2
  assert_the_next_trainer_leaves_step_3(workdir / 'checkpoints', state,
                                        'new' if cut == 'before the old copy is deleted' else None)
  Checkpoints(workdir).save_again(3, state, {'epochs_done': 0, 'reported': 'newer'})
  assert os.listdir(workdir / 'checkpoints') == ['3']
  assert checkpoint.read(workdir / 'checkpoints' / '3')[1]['reported'] == 'newer'


@pytest.mark.parametrize('cut', ['in the copy', 'between the renames',
                                 'before the old copy is deleted'])
def test_a_best_step_copied_again_and_cut_short_keeps_a_copy_in_best(tmp_path, monkeypatch,
                                                                     cut):
  """A best step copied to best/ a second time (its checkpoint saved again) replaces its
  first copy as a step saved again does: a second Ctrl-C at any moment leaves best/ a
  readable copy, where deleting the first copy before copying had left best/ empty (and
  checkpoints/ free to prune the step)."""
  workdir = tmp_path / 'run'
  workdir.mkdir()
  state = {'step': np.int32(3), 'params': {'w': np.arange(4, dtype=np.float32)}}
  Checkpoints(workdir).save_latest(3, state, {'epochs_done': 0}, best=True)
  originals = {'os.replace': checkpoint.os.replace, 'shutil.rmtree': checkpoint.shutil.rmtree,
               'shutil.copytree': checkpoint.shutil.copytree}
  counts = dict.fromkeys(originals, 0)

  def cut_at(name, call):
    def counted(*args, **kwargs):
      counts[name] += 1
      if counts[name] == call:
        raise KeyboardInterrupt
      return originals[name](*args, **kwargs)
    return counted

  # The save again renames twice and deletes once (_put_in_place), then the copy does.
  if cut == 'in the copy':
    monkeypatch.setattr(checkpoint.shutil, 'copytree', cut_at('shutil.copytree', 1))
  elif cut == 'between the renames':
    monkeypatch.setattr(checkpoint.os, 'replace', cut_at('os.replace', 4))
  else:
    monkeypatch.setattr(checkpoint.shutil, 'rmtree', cut_at('shutil.rmtree', 2))
  with pytest.raises(KeyboardInterrupt):
    Checkpoints(workdir).save_latest(3, state, {'epochs_done': 0, 'reported': 'new'},
                                     best=True)
  monkeypatch.undo()
  assert_the_next_trainer_leaves_step_3(workdir / 'best', state,
                                        'new' if cut == 'before the old copy is deleted' else None)


def test_only_orbaxs_abandoned_reads_go_unprinted(monkeypatch, caplog):
  """A damaged checkpoint's reads that Orbax abandons print nothing (a TensorStore thread's
  call into the closed loop, a coroutine collected unfinished, a task or a TensorStore
  read's future no one awaited: one such future printed its error before the command's line
  in CI), the program's own errors as before. tests/test_reliability.py's damaged run sees
  these only on some tries, as threads race: here each path is taken."""
  printed = []
  monkeypatch.setattr(sys, 'excepthook', lambda kind, error, tb: printed.append(error))
  monkeypatch.setattr(sys, 'unraisablehook', lambda unraisable: printed.append(
      unraisable.exc_value))
  asyncio_log = logging.getLogger('asyncio')
  monkeypatch.setattr(asyncio_log, 'filters', [])
  abandoned_reads.drop()
  closed_loop = asyncio.new_event_loop()
  closed_loop.close()
  with pytest.raises(RuntimeError, match='Event loop is closed') as raised:
    closed_loop.call_soon_threadsafe(print)
  closed = raised.value
  sys.excepthook(RuntimeError, closed, closed.__traceback__.tb_next)  # As from a C++ thread.
  sys.excepthook(RuntimeError, closed, closed.__traceback__)  # The program's own call.

  async def orbax_read():
    pass
  orbax_read.__code__ = orbax_read.__code__.replace(co_filename='/site/orbax/checkpoint/x.py')
  mine = ValueError('mine')
  for error, coroutine in ((closed, None), (mine, orbax_read()), (mine, None)):
    sys.unraisablehook(types.SimpleNamespace(exc_value=error, object=coroutine))
    if coroutine is not None:
      coroutine.close()
  with caplog.at_level(logging.ERROR, logger='asyncio'):
    for defined_at in ('/site/orbax/checkpoint/x.py', '/home/me/mine.py'):
      asyncio_log.error('Task exception was never retrieved\nfuture: <Task finished coro='
                        '<read() done, defined at %s:1>>' % defined_at)
    for error in ('FAILED_PRECONDITION: Error reading "params.model.C.embedding/0.0" in OCDBT '
                  'database at local file "run/checkpoints/81/state/": ZSTD failed', 'mine'):
      asyncio_log.error('Future exception was never retrieved\nfuture: <Future finished '
                        f'exception=ValueError({error!r})>')
    for error in ('Encountered error while reading array index: (slice(0, 51, 1),). See full '
                  'TensorStore details', 'mine'):  # Orbax's gathered reads (CI, again).
      asyncio_log.error('_GatheringFuture exception was never retrieved\nfuture: '
                        f'<_GatheringFuture finished exception=Exception({error!r})>')
  assert printed == [closed, mine], printed
  assert [record.getMessage().count('mine') for record in caplog.records] == [1, 1, 1]
