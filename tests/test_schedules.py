"""Learning-rate schedules: each one's rates against a hand computation (on the host and as the
train step traces them), the rates a run logs across a resume, plateau's decays on a planted
sequence of validations, and the refusals of knobs a schedule does not read."""

import json
import math

import jax
import numpy as np
import pytest

from nplm.config import Config, ConfigError
from nplm.run_files import checkpoint
from nplm.trainer import run
from nplm.training import loop as loop_module
from nplm.training import optimizer
from nplm.training.schedules import learning_rate_at, plateau_decays
from tests.test_train import tiny_config
from nplm.training.config_checks import validated

T, S = 40, 8  # The updates planned, the updates per epoch (5 epochs).
E0 = 0.1


def hand(name: str, t: int) -> float:
  """The rate of update t + 1, written out from each schedule's definition."""
  if name == 'inverse':  # ε0 / (1 + r t), r = 0.05, after 3 warm-up updates.
    return E0 / (1 + 0.05 * t) * min(1.0, (t + 1) / 3)
  if name == 'linear':  # From ε0 to 0.001 over T, never below ε0·1e-4.
    return max(0.001 + (E0 - 0.001) * (1 - t / T), E0 * 1e-4)
  if name == 'step':  # Epochs 1-2 at ε0, then halved each epoch.
    return E0 * [1, 1, 0.5, 0.25, 0.125, 0.0625][t // S]
  if name == 'cosine':  # 4 warm-up updates, then half a cosine from ε0 to 0.001 by T.
    if t < 4:
      return E0 * (t + 1) / 4
    u = min(1.0, (t - 4) / (T - 4))
    return 0.001 + (E0 - 0.001) * (1 + math.cos(math.pi * u)) / 2
  if name == 'rsqrt':  # Peak ε0 at update W = 4, then ε0 √(4 / (t + 1)).
    return E0 * min((t + 1) / 4, math.sqrt(4 / (t + 1)))
  raise ValueError(name)


KNOBS = {
    'inverse': dict(lr_decay=0.05, warmup_steps=3),
    'linear': dict(min_learning_rate=0.001),
    'step': dict(lr_keep_epochs=2, lr_factor=0.5),
    'cosine': dict(warmup_steps=4, min_learning_rate=0.001),
    'rsqrt': dict(warmup_steps=4),
}


def schedule_config(name: str, **changes) -> Config:
  return validated(Config(workdir='unused', epochs=T // S, learning_rate=E0, lr_schedule=name,
                **KNOBS[name], **changes))


def test_the_hand_rates_pass_through_their_landmarks():
  assert hand('step', S - 1) == E0 and hand('step', 2 * S) == E0 / 2
  assert hand('cosine', 3) == E0 and hand('cosine', T) == pytest.approx(0.001)
  assert hand('cosine', 4 + (T - 4) // 2) == pytest.approx((E0 + 0.001) / 2)
  assert hand('rsqrt', 3) == E0 and hand('rsqrt', 15) == pytest.approx(E0 / 2)


@pytest.mark.parametrize('name', sorted(KNOBS))
def test_each_schedule_gives_the_hand_computed_rates_on_the_host_and_traced(name):
  config = schedule_config(name)
  inputs = {'planned': T, 'steps_per_epoch': S}
  traced = jax.jit(lambda t, values: learning_rate_at(config, t, values))
  values = optimizer.hyperparameters_of(config, S)  # As the optimizer state holds them.
  for t in range(T + 5):
    want = hand(name, t)
    assert float(learning_rate_at(config, t, inputs)) == pytest.approx(want, rel=1e-6)
    assert float(traced(np.int32(t), values)) == pytest.approx(want, rel=1e-5), t


def test_plateau_multiplies_the_rate_after_each_validation_that_does_not_improve_enough():
  config = validated(Config(workdir='unused', lr_schedule='plateau', lr_factor=0.25,
                  plateau_threshold=0.01))
  planted = [100.0, 90.0, 95.0, 89.5, 89.0, 80.0]
  # 90 < 99: kept; 95 >= 89.1: decayed; 89.5 is a best but not 1% better than 90: decayed;
  # 89.0 >= 88.605: decayed; 80 < 88.11: kept.
  decays = [plateau_decays(config, ppl, min(planted[:i]) if i else None)
            for i, ppl in enumerate(planted)]
  assert decays == [False, False, True, True, True, False]
  assert not plateau_decays(config.replace(lr_schedule='step'), 95.0, 90.0)


def planted_validation(perplexities: dict[int, float]):
  """Loop.split_nll returning, for the valid split, the planted perplexity of the step
  validated (the final evaluation's splits: anything)."""
  def split_nll(loop, split, params, progress):
    tokens = loop.runs.validation['tokens']
    ppl = perplexities.get(loop.step, 500.0) if split.startswith('valid') else 50.0
    return np.full(loop.runs.count, math.log(ppl) * tokens)
  return split_nll


def logged_rates(workdir) -> dict[int, float]:
  records = [json.loads(line) for line in (workdir / 'metrics.jsonl').read_text().splitlines()]
  return {r['step']: r['learning_rate'] for r in records if r.get('kind') == 'train'}


@pytest.mark.slow
def test_plateau_in_a_run_decays_on_its_validations_and_resumes_with_its_factor(
    tiny_corpus, tmp_path, monkeypatch):
  every = 4
  planted = {4: 100.0, 8: 90.0, 12: 95.0, 16: 89.5, 20: 80.0, 24: 85.0, 28: 84.0}
  monkeypatch.setattr(loop_module.Loop, 'split_nll', planted_validation(planted))
  config = tiny_config(tmp_path / 'run', lr_schedule='plateau', lr_factor=0.5,
                       plateau_threshold=0.01, eval_every=every, log_every=1, patience=10,
                       learning_rate=0.02, epochs=2)
  stopped = run(config.replace(max_steps=14), tiny_corpus)  # Between validations.
  assert stopped['status'] == 'max_steps'
  summary = run(config, tiny_corpus)
  steps = summary['steps']
  assert summary['valid_steps'] == list(range(every, steps + 1, every))
  # Decayed at 12 (95 >= 90·0.99), 16 (89.5 >= 89.1), 24, 28 and each later validation
  # (500); each decay applies from the update after its validation.
  scale_after = {4: 1, 8: 1, 12: 0.5, 16: 0.25, 20: 0.25, 24: 0.125, 28: 0.0625}
  for step in range(32, steps + 1, every):
    scale_after[step] = scale_after[step - every] / 2
  assert steps > 28 and summary['valid_ppl_history'][:7] == pytest.approx(list(planted.values()))
  for step, rate in logged_rates(tmp_path / 'run').items():
    done = [s for s in scale_after if s < step]
    want = 0.02 * (scale_after[max(done)] if done else 1)
    assert rate == pytest.approx(want, rel=1e-6), step
  # The factor the next update reads is the optimizer state's, saved with it.
  newest = max((tmp_path / 'run' / checkpoint.LATEST).iterdir(), key=lambda p: int(p.name))
  state, progress = checkpoint.read(newest)
  assert float(state['opt_state']['hyperparams']['lr_scale']) == pytest.approx(
      progress['lr_scale'], rel=1e-7) and progress['lr_scale'] == scale_after[max(scale_after)]


@pytest.mark.slow
def test_step_schedule_in_a_run_logs_the_hand_rates_and_resumes_exactly(tiny_corpus, tmp_path):
  changes = dict(optimizer='sgd', learning_rate=0.2, lr_schedule='step', lr_keep_epochs=2,
                 lr_factor=0.5, epochs=4, patience=0, log_every=1)
  whole = run(tiny_config(tmp_path / 'whole', **changes), tiny_corpus)
  per_epoch = whole['steps'] // 4
  parts = tiny_config(tmp_path / 'parts', **changes)
  run(parts.replace(max_steps=per_epoch * 2 + 3), tiny_corpus)  # Stopped inside epoch 3.
  resumed = run(parts, tiny_corpus)
  rates = logged_rates(tmp_path / 'parts')
  assert sorted(rates) == list(range(1, whole['steps'] + 1))
  for step, rate in rates.items():
    epoch = (step - 1) // per_epoch
    assert rate == pytest.approx(0.2 * [1, 1, 0.5, 0.25][epoch], rel=1e-6), step
  assert resumed['test_ppl'] == whole['test_ppl']
  assert resumed['valid_ppl_history'] == whole['valid_ppl_history']


@pytest.mark.parametrize('changes, message', [
    (dict(lr_schedule='rsqrt'), 'give W ≥ 1'),
    (dict(lr_schedule='cosine', lr_decay=0.1), "--lr_decay is the inverse schedule's r"),
    (dict(lr_factor=0.1), '--lr_factor is read by --lr_schedule=step and plateau, not inverse'),
    (dict(lr_schedule='plateau', lr_factor=1.5), r'--lr_factor must be within \(0, 1\]'),
    (dict(lr_keep_epochs=3), '--lr_keep_epochs is read by --lr_schedule=step'),
    (dict(lr_schedule='step', lr_keep_epochs=0), '--lr_keep_epochs must be 1 or more'),
    (dict(plateau_threshold=0.1), '--plateau_threshold is read by --lr_schedule=plateau'),
    (dict(lr_schedule='plateau', plateau_threshold=1.0), r'--plateau_threshold must be within'),
    (dict(warmup_steps=-1), '--warmup_steps must be 0 or more'),
    (dict(lr_schedule='step', min_learning_rate=1e-4), '--min_learning_rate is where'),
    (dict(eval_every=-2), '--eval_every must be 0'),
])
def test_knobs_a_schedule_does_not_read_are_refused_in_one_line(changes, message):
  with pytest.raises(ConfigError, match=message):
    validated(Config(workdir='unused', **changes))


def test_a_resume_that_changes_the_planned_run_or_the_validations_is_refused():
  saved = Config(workdir='/tmp/x', lr_schedule='cosine', epochs=5).to_dict()
  problems = Config(workdir='/tmp/x', lr_schedule='cosine', epochs=6).incompatibilities(saved)
  assert any('--lr_schedule=cosine decays over the planned epochs' in p for p in problems)
  assert not Config(workdir='/tmp/x', lr_schedule='step', epochs=6).replace(
      lr_keep_epochs=1).incompatibilities(
          Config(workdir='/tmp/x', lr_schedule='step', epochs=5).to_dict())
  problems = Config(workdir='/tmp/x', eval_every=50).incompatibilities(
      Config(workdir='/tmp/x').to_dict())
  assert any(p.startswith('eval_every: checkpoint has 0') for p in problems)
