"""A workdir checkpointed before the optimizer state held its hyperparameters (issue 44)
resumes to the numbers of a run never stopped; today's checkpoints hold the values the next
update reads."""

import shutil

import pytest

from nplm.run_files import checkpoint
from nplm.trainer import run
from tests.test_train import tiny_config


def rewritten_as_before_issue_44(workdir) -> list[str]:
  """Every checkpoint of `workdir` saved again as the older nplm saved it: the optimizer's
  own state, no hyperparameters beside it (its progress record and run.json copy kept)."""
  rewritten = []
  for directory in (checkpoint.LATEST, checkpoint.BEST):
    for path in sorted((workdir / directory).iterdir()):
      state, progress = checkpoint.read(path)
      assert set(state['opt_state']) == {'count', 'hyperparams', 'hyperparams_states',
                                         'inner_state'}
      older = {**state, 'opt_state': state['opt_state']['inner_state']}
      shutil.rmtree(path)
      checkpoints = checkpoint.Checkpoints(workdir)
      checkpoints._save(directory, int(path.name), older, progress)
      rewritten.append(f'{directory}/{path.name}')
  return rewritten


@pytest.mark.parametrize('changes', [
    dict(optimizer='adamw', weight_decay=0.01, lr_schedule='linear'),
    dict(optimizer='sgd', learning_rate=0.1, lr_decay=0.01, weight_decay=1e-3)],
    ids=['adamw', 'sgd'])
@pytest.mark.slow
def test_a_checkpoint_of_the_older_layout_resumes_to_the_same_numbers(
    tiny_corpus, tmp_path, changes):
  whole = run(tiny_config(tmp_path / 'whole', epochs=2, **changes), tiny_corpus)
  parts = tiny_config(tmp_path / 'parts', epochs=2, **changes)
  run(parts.replace(max_steps=whole['steps'] // 2 + 3), tiny_corpus)  # Within epoch 2.
  assert len(rewritten_as_before_issue_44(tmp_path / 'parts')) >= 2  # Latest and best.
  resumed = run(parts, tiny_corpus)
  for key in ('steps', 'valid_ppl_history', 'train_ppl', 'valid_ppl', 'test_ppl'):
    assert resumed[key] == whole[key], key


@pytest.mark.slow
def test_a_checkpoint_holds_the_hyperparameters_its_next_update_reads(tiny_corpus, tmp_path):
  config = tiny_config(tmp_path / 'run', epochs=1, learning_rate=0.03, weight_decay=0.02,
                       lr_schedule='linear', min_learning_rate=0.001)
  summary = run(config, tiny_corpus)
  latest = sorted((tmp_path / 'run' / checkpoint.LATEST).iterdir(), key=lambda p: int(p.name))
  state, _ = checkpoint.read(latest[-1])
  held = {name: float(value) for name, value in state['opt_state']['hyperparams'].items()}
  want = {'learning_rate': 0.03, 'min_learning_rate': 0.001, 'lr_decay': 0.0,
          'weight_decay': 0.02, 'lr_scale': 1.0, 'planned': summary['steps'],
          'steps_per_epoch': summary['steps']}
  assert held == pytest.approx(want, rel=1e-7)
  assert int(state['opt_state']['count']) == int(state['step']) == summary['steps']
