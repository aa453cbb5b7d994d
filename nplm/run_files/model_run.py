"""One model's run inside the loop (nplm.training.runs): its workdir (locked and claimed), its
checkpoints, metrics and progress record, its early stopping, and why it stopped.

Models trained together each have one, so each keeps a workdir laid out as a lone run's
(run.json, vocab.txt, tokenizer.model for a learned tokenizer, checkpoints, metrics,
summary.json) that every tool reads, and each stops on its own.
"""

import logging
import time
from pathlib import Path

import jax
import jax.numpy as jnp

from nplm import paths
from nplm.run_files.checkpoint import Checkpoints, claim_workdir
from nplm.config import Config
from nplm.data.corpus import Corpus
from nplm.data.tokenizers import TOKENIZER_FILE
from nplm.run_files.metrics import MetricsWriter
from nplm.run_files.summary import RunStatus
from nplm.run_files.lock import WorkdirLock, prepare_workdir
from nplm.files import write_bytes_atomically

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
    claim_workdir(workdir, config, corpus.vocab.fingerprint(), corpus.fingerprint, write=main)
    if main:
      corpus.vocab.save(workdir / 'vocab.txt')  # Ids to words, for reading the model.
      if corpus.tokenizer_model is not None:
        write_bytes_atomically(workdir / TOKENIZER_FILE, corpus.tokenizer_model)
    return Checkpoints(workdir, main), MetricsWriter(workdir if main else None), lock
  except BaseException:
    lock.release()
    raise


def new_progress() -> dict:
  """The loop's record of a model's run, checkpointed with its state (JSON)."""
  return {'epochs_done': 0, 'valid_ppl_history': [], 'best_valid_ppl': None,
          'best_epoch': None, 'stopped_early': False, 'train_examples': 0,
          'train_seconds': 0.0, 'wall_seconds': 0.0}


def all_finite(tree) -> bool:
  return all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree.leaves(tree))


class ModelRun:
  """One model's workdir, progress and stop; `name` tells it apart from the models trained
  with it in shared log lines (empty for a lone run)."""

  def __init__(self, config: Config, corpus: Corpus, main: bool, name: str = '',
               started: float | None = None):
    """`started`: the perf_counter() at which this invocation began (default: now); its
    wall clock runs from there."""
    self.config, self.workdir, self.name = config, Path(config.workdir), name
    self.checkpoints, self.writer, self.lock = open_workdir(config, corpus, main)
    self.progress = new_progress()
    self.diverged = ''  # Why it stopped for good, once a loss or its parameters explode.
    self.saved_step = None  # The step of its newest checkpoint: what its summary reports.
    self.started = time.perf_counter() if started is None else started
    self.wall_before = 0.0  # Its earlier invocations' wall seconds.

  def resume(self, restored) -> None:
    """Takes the progress of a restored checkpoint (or keeps a new run's, for None)."""
    if restored is not None:
      self.progress, self.saved_step = restored[1], int(restored[0].step)
    self.wall_before = self.progress['wall_seconds']

  @property
  def training(self) -> bool:
    progress = self.progress
    return (not self.diverged and not progress['stopped_early']
            and progress['epochs_done'] < self.config.epochs)

  def status(self, loop_status: RunStatus) -> RunStatus:
    if self.diverged:
      return RunStatus.DIVERGED
    return RunStatus.EARLY_STOPPED if self.progress['stopped_early'] else loop_status

  def wall_seconds(self) -> float:
    return self.wall_before + time.perf_counter() - self.started

  def save(self, state, best: bool = False) -> None:
    """Checkpoints `state` if its parameters are finite; otherwise the model stops as
    diverged and its last good checkpoint stays."""
    step = int(state.step)
    if not all_finite(state.params):
      self.diverge(f'the parameters are not finite at step {step}')
      return
    self.progress['wall_seconds'] = self.wall_seconds()
    (self.checkpoints.save_best if best else self.checkpoints.save_latest)(
        step, state, self.progress)
    self.saved_step = step

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

  def record_validation(self, ppl: float, tokens: int, of: int) -> bool:
    """Records an epoch's validation perplexity (on the first `tokens` of the valid split's
    `of`) and whether it stops the run early; returns whether it is the best so far (the
    caller saves the best state). With --patience=0 the run trains every planned epoch and
    each epoch's state is the one kept (word2vec's: its validation score is no language
    model's, and the linear schedule plans the whole run)."""
    progress = self.progress
    progress['epochs_done'] += 1
    progress['valid_ppl_history'].append(ppl)
    keep_last = self.config.patience == 0
    improved = (keep_last or progress['best_valid_ppl'] is None
                or ppl < progress['best_valid_ppl'])
    if improved:
      progress['best_valid_ppl'], progress['best_epoch'] = ppl, progress['epochs_done']
    since_best = progress['epochs_done'] - progress['best_epoch']
    progress['stopped_early'] = not keep_last and since_best >= self.config.patience
    note = ('  (kept: --patience=0)' if keep_last else '  (best)' if improved
            else f'  ({since_best} epoch{"" if since_best == 1 else "s"} since the best)')
    part = '' if tokens == of else f' on the first {tokens:,} of {of:,} valid tokens'
    log.info('%sepoch %d  valid perplexity %.2f%s%s', self.name, progress['epochs_done'], ppl,
             part, note)
    return improved

  def close(self) -> None:
    self.writer.close()
    self.lock.release()
