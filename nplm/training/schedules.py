"""The learning rate of each update: ε_t for update t + 1 (t updates before it).

Every schedule is a function of t and of what the run knows when it starts (T, the updates it
plans; the updates per epoch), except `plateau`, whose factor changes with the validations:
that factor (`lr_scale`) is decided on the host and kept in the run's progress record, and the
optimizer state carries it to the step (nplm.training.optimizer), so a resumed run continues on
the same rates. Each value is computed with jnp, traced in the train step and evaluated on the
host for the metrics alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax.numpy as jnp

from nplm.knobs import OPTIMIZER, PER_MODEL, Knob

if TYPE_CHECKING:  # Config is assembled from this module's KNOBS, among others.
  from nplm.config import Config

LR_SCHEDULES = ('inverse', 'linear', 'step', 'plateau', 'cosine', 'rsqrt')  # --lr_schedule
KNOBS = {
    'lr_schedule': Knob('inverse', 'ε_t, the rate of update t + 1 '
                        '(nplm.training.schedules): inverse ε0 / (1 + r·t) (--lr_decay = r; '
                        'the paper); linear from ε0 to --min_learning_rate over the run '
                        '(word2vec); step: ε0 for --lr_keep_epochs epochs, then × '
                        '--lr_factor each epoch (Zaremba et al. 2014); plateau: × '
                        '--lr_factor after each validation that does not improve on the best '
                        'by --plateau_threshold (Mikolov\'s RNNLM, PyTorch\'s '
                        'word_language_model); cosine: from ε0 to --min_learning_rate after '
                        'the warm-up; rsqrt: ε0·√(W/t) after W = --warmup_steps (Vaswani et '
                        'al. 2017). The run is T = --epochs × the steps per epoch '
                        '(--max_steps cuts it short, never changes it).', OPTIMIZER),
    'warmup_steps': Knob(0, 'W: the rate rises linearly over the first W updates, ε0·t/W, '
                         'before any schedule (rsqrt needs W ≥ 1).', OPTIMIZER),
    'lr_keep_epochs': Knob(1, '--lr_schedule=step: epochs at ε0 before the first decay.',
                           OPTIMIZER),
    'lr_factor': Knob(0.5, '--lr_schedule=step, plateau: what each decay multiplies the rate '
                      'by.', OPTIMIZER),
    'plateau_threshold': Knob(0.0, '--lr_schedule=plateau: a validation perplexity not below '
                              'the best × (1 - this) decays the rate.', OPTIMIZER),
    'learning_rate': Knob(1e-3, 'ε0: the initial learning rate (word2vec models: per pair or '
                          'position, as word2vec\'s -alpha).', PER_MODEL),
    'min_learning_rate': Knob(0.0, 'ε_min: where --lr_schedule=linear ends (word2vec\'s and '
                              'gensim\'s min_alpha, 0.0001).', PER_MODEL),
    'lr_decay': Knob(0.0, 'r in ε_t = ε0 / (1 + r·t), t counting updates (paper: 1e-8).',
                     PER_MODEL),
}
PLANS_THE_RUN = ('linear', 'cosine')  # Read T: a resumed run keeps --epochs.
DECAYS_TO_MINIMUM = ('linear', 'cosine')  # Read --min_learning_rate.
DECAYS_BY_FACTOR = ('step', 'plateau')  # Read --lr_factor.


def config_errors(config: Config) -> list[str]:
  """What in the schedule's knobs cannot work (optimizer.config_errors asks)."""
  schedule = config.lr_schedule
  checks = [
      (schedule in LR_SCHEDULES,
       f'unknown --lr_schedule={schedule!r}; known: {", ".join(LR_SCHEDULES)}'),
      (config.lr_decay >= 0, f'--lr_decay must be 0 or more, got {config.lr_decay}'),
      (schedule == 'inverse' or config.lr_decay == 0,
       f'--lr_decay is the inverse schedule\'s r; --lr_schedule={schedule} decays by itself: '
       'leave --lr_decay out'),
      (0 <= config.min_learning_rate <= config.learning_rate,
       f'--min_learning_rate must be within [0, --learning_rate], got '
       f'{config.min_learning_rate}'),
      (schedule in DECAYS_TO_MINIMUM or config.min_learning_rate == 0,
       '--min_learning_rate is where --lr_schedule=linear or cosine ends: leave it out of '
       f'the {schedule} schedule'),
      (config.warmup_steps >= 0, f'--warmup_steps must be 0 or more, got {config.warmup_steps}'),
      (schedule != 'rsqrt' or config.warmup_steps >= 1,
       '--lr_schedule=rsqrt peaks at ε0 after --warmup_steps=W updates: give W ≥ 1 '
       '(Vaswani et al. 2017: 4000)'),
      (0 < config.lr_factor <= 1, f'--lr_factor must be within (0, 1], got {config.lr_factor}'),
      (schedule in DECAYS_BY_FACTOR or config.lr_factor == 0.5,
       f'--lr_factor is read by --lr_schedule=step and plateau, not {schedule}: leave it out'),
      (config.lr_keep_epochs >= 1,
       f'--lr_keep_epochs must be 1 or more, got {config.lr_keep_epochs}'),
      (schedule == 'step' or config.lr_keep_epochs == 1,
       f'--lr_keep_epochs is read by --lr_schedule=step, not {schedule}: leave it out'),
      (0 <= config.plateau_threshold < 1,
       f'--plateau_threshold must be within [0, 1), got {config.plateau_threshold}'),
      (schedule == 'plateau' or config.plateau_threshold == 0,
       f'--plateau_threshold is read by --lr_schedule=plateau, not {schedule}: leave it out'),
  ]
  return [message for ok, message in checks if not ok]


def learning_rate_at(config: Config, t, hyperparameters: dict | None = None):
  """ε_t, the rate of update t + 1. `hyperparameters` (traced in the step: the optimizer
  state's, nplm.training.optimizer.hyperparameters_of; on the host: any of them) replace the
  config's ε0 = --learning_rate, ε_min and r, and give 'planned': T, the updates the run
  plans (linear, cosine); 'steps_per_epoch' (step); 'lr_scale': the product of plateau's
  decays so far (default 1). W = --warmup_steps, over which the rate rises as ε0·(t + 1)/W
  first."""
  values = {'learning_rate': config.learning_rate, 'min_learning_rate': config.min_learning_rate,
            'lr_decay': config.lr_decay, 'lr_scale': 1.0, **(hyperparameters or {})}
  schedule, start, end = config.lr_schedule, values['learning_rate'], values['min_learning_rate']
  warmup, planned = config.warmup_steps, values.get('planned')
  if schedule in PLANS_THE_RUN and planned is None:
    raise ValueError(f'the {schedule} schedule needs T: hyperparameters_of(config, '
                     'steps_per_epoch)')
  if schedule == 'rsqrt':  # min(s/W, √(W/s))·ε0 at s = t + 1 (Vaswani et al. 2017, Eq. 3).
    s = t + 1.0
    return start * jnp.minimum(s / warmup, jnp.sqrt(warmup / s))
  rising = jnp.minimum(1.0, (t + 1.0) / warmup) if warmup else 1.0
  if schedule == 'cosine':  # After the warm-up, ε_min + (ε0 - ε_min)·(1 + cos πu)/2.
    done = jnp.clip((t - warmup) / jnp.maximum(planned - warmup, 1.0), 0.0, 1.0)
    decayed = end + (start - end) * 0.5 * (1.0 + jnp.cos(jnp.pi * done))
    return jnp.where(t < warmup, start * rising, decayed)
  if schedule == 'linear':  # word2vec's (Mikolov et al. 2013a, section 4.3), its floor ε0·1e-4.
    decayed = jnp.maximum(end + (start - end) * (1.0 - t / planned), start * 1e-4)
  elif schedule == 'step':  # ε0·f^max(0, e + 1 - E) in epoch e (Zaremba et al. 2014).
    if 'steps_per_epoch' not in values:
      raise ValueError('the step schedule needs the steps per epoch')
    epoch = jnp.floor_divide(t, values['steps_per_epoch'])
    decayed = start * config.lr_factor ** jnp.maximum(0.0, epoch + 1.0 - config.lr_keep_epochs)
  elif schedule == 'plateau':
    decayed = start * values['lr_scale']
  else:  # inverse: ε0 / (1 + r·t) (Bengio et al. 2003, section 5).
    decayed = start / (1.0 + values['lr_decay'] * t)
  return decayed * rising


def reads_validations(config: Config) -> bool:
  """Whether the schedule's rate depends on the validations (plateau)."""
  return config.lr_schedule == 'plateau'


def plateau_decays(config: Config, ppl: float, best: float | None) -> bool:
  """Whether a validation perplexity `ppl` (against the best before it) decays the rate under
  --lr_schedule=plateau: it is not below best × (1 - --plateau_threshold)."""
  return (config.lr_schedule == 'plateau' and best is not None
          and ppl >= best * (1.0 - config.plateau_threshold))
