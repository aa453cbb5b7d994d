"""One model's run inside the loop (nplm.training.runs): its workdir (locked and claimed: its
run.json, the run's identity), its checkpoints, metrics and progress record, its early
stopping, and why it stopped.

Models trained together each have one, so each keeps a workdir laid out as a lone run's
(run.json, vocab.txt, tokenizer.model for a learned tokenizer, checkpoints, metrics,
summary.json) that every tool reads, and each stops on its own.
"""

import dataclasses
import hashlib
import logging
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from nplm import parallel, paths
from nplm.display import counted
from nplm.run_files.checkpoint import (Checkpoints, IncompatibleCheckpointError,
                                       read_identity, recorded_identity)
from nplm.config import Config
from nplm.data.corpus import Corpus
from nplm.data.tokenizers import TOKENIZER_FILE
from nplm.run_files.metrics import MetricsWriter
from nplm.run_files.summary import RunStatus
from nplm.run_files.lock import WorkdirLock, prepare_workdir
from nplm.files import write_bytes_atomically, write_json_atomically

log = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
  """The loss or the parameters stopped being finite."""


def open_workdir(config: Config, corpus: Corpus, main: bool):
  """(checkpoints, metrics writer, lock) of config.workdir, locked and claimed for this run
  (or checked against the run it holds); process 0 (`main`) alone locks it and writes its
  vocab.txt, its learned tokenizer's model (if any) and metrics: the workdir reads typed
  text without the data dir."""
  workdir = Path(config.workdir)
  prepare_workdir(workdir)
  lock = WorkdirLock(workdir)
  if main:
    lock.acquire()
  try:
    identity = claim_workdir(workdir, config, run_identity(
        config, corpus.vocab.fingerprint(), corpus.fingerprint, corpus.tokenizer_model),
                             write=main)
    if main:
      corpus.vocab.save(workdir / 'vocab.txt')  # Ids to words, for reading the model.
      if corpus.tokenizer_model is not None:
        write_bytes_atomically(workdir / TOKENIZER_FILE, corpus.tokenizer_model)
    return (Checkpoints(workdir, main, identity, config.keep_checkpoints),
            MetricsWriter(workdir if main else None), lock)
  except BaseException:
    lock.release()
    raise


def run_identity(config: Config, vocab_fingerprint: str, data_fingerprint: str,
                 tokenizer_model: bytes | None = None) -> dict:
  """What run.json records of a run: its config, vocabulary, data (the ids of every split)
  and its learned tokenizer's model (SHA-256), if it has one."""
  identity = {'config': config.to_dict(), 'vocab_fingerprint': vocab_fingerprint,
              'data_fingerprint': data_fingerprint}
  if tokenizer_model is not None:
    identity['tokenizer_sha256'] = hashlib.sha256(tokenizer_model).hexdigest()
  return identity


def claim_workdir(workdir: Path, config: Config, identity: dict, write: bool = True) -> dict:
  """Records the run's identity (if `write`: process 0 of a run), or checks it against the
  one already recorded (run.json, or where it was lost, its newest checkpoint's copy, which
  is then written back); returns the identity recorded."""
  saved = read_identity(workdir)
  if saved is None:
    saved = recorded_identity(workdir)
    if saved is None:  # No checkpoint either: a new run.
      if write:
        write_json_atomically(workdir / 'run.json', identity)
      return identity
    if write:
      write_json_atomically(workdir / 'run.json', saved)
      log.warning('%s was missing: restored from the copy its newest checkpoint keeps.',
                  paths.shown(workdir / 'run.json'))
  problems = config.incompatibilities(saved['config'])

  def differs(key: str) -> bool:  # Older runs record no data or tokenizer.
    return saved.get(key, identity.get(key)) != identity.get(key)

  if differs('vocab_fingerprint'):
    problems.append('vocabulary: the corpus or --unk_max_count gives a different vocabulary')
  elif differs('data_fingerprint'):
    problems.append(f'data: --dataset={config.dataset} now holds other text than the run '
                    'was trained on (its files changed)')
  elif differs('tokenizer_sha256'):
    problems.append('tokenizer: the training split now learns another tokenizer model than '
                    'the run was trained with')
  if problems:
    raise IncompatibleCheckpointError(
        f'{paths.shown(workdir)} holds a run that this one cannot continue '
        f'({"; ".join(problems)}); its checkpoints are kept: use another --workdir, or rerun '
        "with the checkpoint's settings")
  return saved


@dataclasses.dataclass
class Progress:
  """The loop's record of a model's run, checkpointed with its state (as JSON: to_json).

  Epochs done; per validation its perplexity and step; the best one's perplexity, number
  (1 = the first), step and epoch (a float between epochs' ends); --lr_schedule=plateau's
  factor so far; whether it stopped early; its training examples and seconds, and its wall
  seconds over every invocation."""
  epochs_done: int = 0
  valid_ppl_history: list[float] = dataclasses.field(default_factory=list)
  valid_steps: list[int | None] = dataclasses.field(default_factory=list)
  best_valid_ppl: float | None = None
  best_validation: int | None = None
  best_step: int | None = None
  best_epoch: float | None = None
  lr_scale: float = 1.0
  stopped_early: bool = False
  train_examples: int = 0
  train_seconds: float = 0.0
  wall_seconds: float = 0.0

  def to_json(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_saved(cls, saved: dict) -> 'Progress':
    """A checkpoint's progress record, with what records written before evaluations every N
    steps lack: they validated once per epoch, after it."""
    progress = cls(**{name: value for name, value in saved.items()
                      if name in cls.__dataclass_fields__})
    if 'valid_steps' not in saved:  # Their steps unknown: None, one per validation.
      progress.valid_steps = [None] * len(saved['valid_ppl_history'])
    if 'best_validation' not in saved:
      progress.best_validation = saved['best_epoch']
    return progress


@jax.jit
def _all_finite(tree) -> jax.Array:
  """One program per state's shapes (a program per leaf cost two compiles each)."""
  return jnp.array([jnp.isfinite(leaf).all() for leaf in jax.tree.leaves(tree)]).all()


def all_finite(tree) -> bool:
  """Whether every value of `tree` is finite: read by numpy where it can be (on a CPU,
  compiling _all_finite for a state took 0.15-0.4 s, testing one takes milliseconds), else
  by a device program."""
  leaves = jax.tree.leaves(tree)
  if all(parallel.read_on_this_host(leaf) for leaf in leaves):
    return all(bool(np.isfinite(np.asarray(leaf)).all()) for leaf in leaves)
  return bool(_all_finite(tree))


class ModelRun:
  """One model's workdir, progress and stop; `name` tells it apart from the models trained
  with it in shared log lines (empty for a lone run)."""

  def __init__(self, config: Config, corpus: Corpus, main: bool, name: str = '',
               started: float | None = None):
    """`started`: the perf_counter() at which this invocation began (default: now); its
    wall clock runs from there."""
    self.config, self.workdir, self.name = config, Path(config.workdir), name
    self.checkpoints, self.writer, self.lock = open_workdir(config, corpus, main)
    self.progress = Progress()
    self.diverged = ''  # Why it stopped for good, once a loss or its parameters explode.
    self.saved_step = None  # The step of its newest checkpoint: what its summary reports.
    self.reported = None  # Which parameters the final evaluation scored (Runs.final_params).
    self.recorded_report = None  # The `reported` its newest checkpoint keeps (keep_report).
    self.started = time.perf_counter() if started is None else started
    self.wall_before = 0.0  # Its earlier invocations' wall seconds.

  def resume(self, restored) -> None:
    """Takes the progress of a restored checkpoint (or keeps a new run's, for None)."""
    if restored is not None:
      saved = dict(restored[1])
      self.recorded_report = saved.pop('reported', None)  # A finished run's; not carried on.
      self.progress, self.saved_step = Progress.from_saved(saved), int(restored[0].step)
    self.wall_before = self.progress.wall_seconds

  @property
  def training(self) -> bool:
    progress = self.progress
    return (not self.diverged and not progress.stopped_early
            and progress.epochs_done < self.config.epochs)

  def status(self, loop_status: RunStatus) -> RunStatus:
    if self.diverged:
      return RunStatus.DIVERGED
    return RunStatus.EARLY_STOPPED if self.progress.stopped_early else loop_status

  def wall_seconds(self) -> float:
    return self.wall_before + time.perf_counter() - self.started

  def save(self, state, best: bool = False) -> None:
    """Checkpoints `state` (also as the best, with `best`) if its parameters are finite;
    otherwise the model stops as diverged and its last good checkpoint stays."""
    step = int(state.step)
    if not all_finite(state.params):
      self.diverge(f'the parameters are not finite at step {step}')
      return
    self.progress.wall_seconds = self.wall_seconds()
    self.checkpoints.save_latest(step, state, self.progress.to_json(), best=best)
    self.saved_step = step

  def keep_report(self, state) -> None:
    """Keeps `reported` (which parameters the final evaluation scores) in the progress record
    of the newest checkpoint, `state`'s (saved again, unless it keeps it already), so that
    readers follow the run's choice without its summary.json. A model whose state went on
    past its newest checkpoint (stopped early among others) keeps none: readers take its
    best, as it reported."""
    step = int(state.step)
    if self.reported == self.recorded_report or step != self.saved_step or self.diverged:
      return
    self.progress.wall_seconds = self.wall_seconds()
    self.checkpoints.save_again(step, state, {**self.progress.to_json(),
                                              'reported': self.reported})
    self.recorded_report = self.reported

  def diverge(self, what: str) -> None:
    """Stops this model for good; its last good checkpoint stays, other models go on."""
    kept = self.checkpoints.latest_step
    where = (f'the last good checkpoint (step {kept}) is kept in {paths.shown(self.workdir)}'
             if kept is not None else 'no checkpoint had been saved yet')
    remedy = ('Lower its --learning_rate and train it again' if self.name else
              'Lower --learning_rate (or --lr_decay) and rerun in a new --workdir')
    self.diverged = f'Training diverged: {what}; {where}. {remedy}.'
    if self.name:  # Among models trained together; a lone run's is its error (raised).
      log.warning('%s%s', self.name, self.diverged)

  @property
  def has_a_best_to_beat(self) -> bool:
    """Whether its last parameters compete with a best validated ones (--patience=0 keeps
    the last)."""
    return self.config.patience > 0 and self.progress.best_valid_ppl is not None

  @property
  def last_validated_step(self) -> int | None:
    steps = self.progress.valid_steps
    return steps[-1] if steps else None

  def record_validation(self, ppl: float, tokens: int, of: int, step: int,
                        epoch: float, decays: bool = False) -> bool:
    """Records a validation perplexity at `step` (`epoch` epochs in; on the first `tokens`
    of the valid split's `of`), whether it stops the run early (--patience validations
    without a better one), and the rate's decay (`decays`: --lr_schedule=plateau's factor
    applied, nplm.training.schedules.plateau_decays); returns whether it is
    the best so far (the caller saves the best state: Runs.save_latest). With --patience=0 the run trains every
    planned epoch and each validation's state is the one kept (word2vec's: its validation
    score is no language model's, and the linear schedule plans the whole run)."""
    progress, config = self.progress, self.config
    if decays:
      progress.lr_scale *= config.lr_factor
    progress.valid_ppl_history = progress.valid_ppl_history + [ppl]
    progress.valid_steps = progress.valid_steps + [step]
    count, keep_last = len(progress.valid_ppl_history), config.patience == 0
    improved = keep_last or progress.best_valid_ppl is None or ppl < progress.best_valid_ppl
    if improved:
      progress.best_valid_ppl, progress.best_validation = ppl, count
      progress.best_step, progress.best_epoch = step, epoch
    since_best = count - progress.best_validation
    progress.stopped_early = not keep_last and since_best >= config.patience
    note = ('  (kept: --patience=0)' if keep_last else '  (best)' if improved
            else f'  ({counted(since_best, "validation")} since the best)')
    if decays:
      note += f'  rate × {config.lr_factor:g} (plateau): {progress.lr_scale:.4g} × ε0'
    part = '' if tokens == of else f' on the first {tokens:,} of {of:,} valid tokens'
    log.info('%sstep %d (epoch %s)  valid perplexity %.2f%s%s', self.name, step, epoch, ppl,
             part, note)
    return improved

  def close(self) -> None:
    self.writer.close()
    self.lock.release()


def what_is_kept(workdir: str) -> str:
  """What a rerun of a run stopped before it could save starts from, read from its workdir
  (its finished checkpoints; a save cut short is never one)."""
  try:
    step = Checkpoints(Path(workdir), main=False).latest_step
  except OSError:
    return (f'the checkpoints in {paths.shown(workdir)} are as they were. Rerun the same '
            'command to resume')
  if step is None:
    return (f'no checkpoint had been saved in {paths.shown(workdir)} yet. Rerun the same '
            'command to start from the beginning')
  return (f'the last checkpoint in {paths.shown(workdir)} (step {step}) is kept. Rerun the '
          'same command to resume from it')
