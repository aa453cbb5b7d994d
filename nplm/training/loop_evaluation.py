"""The loop's evaluation (nplm.training.loop.Loop's part of it): validation of the current
parameters, as --eval_every or each epoch's end asks, and the final evaluation of the
parameters each run reports, all through one path: Σ -log p of every token of a split from
the feed's exact, normalized log-probs (`split_nll`). Each is timed into the invocation's
phases (summary.json's phase_seconds)."""

import logging
import time

import jax
import numpy as np

from nplm import stop_requests
from nplm.display import counted, duration
from nplm.perplexity import perplexity
from nplm.run_files.summary import RunStatus
from nplm.stop_requests import RunInterrupted
from nplm.training.runs import diverged_summary

log = logging.getLogger('nplm.training.loop')  # The loop's lines, whichever file says them.


class LoopEvaluation:
  """Loop's evaluation methods. They read what Loop builds: its feed, runs, states, step,
  stop requests, phases, the split validated (`validation_split`) and the splits evaluated
  at the end (`evaluated`); `validate` saves through Loop's save_unsaved and sets the runs'
  hyperparameters through its set_hyperparameters."""

  def split_nll(self, split: str, params, progress: str) -> np.ndarray:
    """Σ -log p over every token of the split, per model [K], from the exact log-probs."""
    log_probs = self.feed.log_probs(params, split, progress)
    return -np.sum(np.reshape(log_probs, (self.runs.count, -1)), axis=1)

  def validate(self, runs: list[int]) -> list[int]:
    """Validates those of `runs` that have not validated this step on the valid split or its
    first --valid_tokens_per_eval tokens (returned); each notes its best, decides its stop and
    its rate's decay (the caller saves them: Runs.save_latest). A stop request
    (RunInterrupted) or a failure (out of memory) is raised once the states are saved: it
    loses nothing."""
    runs = self.runs.unvalidated(self.step, runs) if self.validates else []
    if not runs:
      return runs
    per_epoch = self.feed.steps_per_epoch
    epoch = (self.step // per_epoch if self.step % per_epoch == 0
             else round(self.step / per_epoch, 2))
    self.states = self.feed.pay_decay_debts(self.states)  # As they are saved.
    if jax.process_count() > 1:  # Saved before: one process's failure cannot save alone.
      self.save_unsaved()
    try:
      nll = self.validation_nll(f'validating at step {self.step}')
    except Exception:  # Not a second Ctrl-C (KeyboardInterrupt): that one stops at once.
      self.save_unsaved()
      raise
    self.runs.record_validation(nll, runs, self.step, epoch)
    self.set_hyperparameters()
    return runs

  def validation_nll(self, phase: str) -> np.ndarray:
    """Σ -log p per model [K] of the validated tokens under the current parameters."""
    self.stop.phase = phase
    started = time.perf_counter()
    nll = self.split_nll(self.validation_split, self.states.params, phase)
    self.phases['validation'] += time.perf_counter() - started
    return nll

  def validate_last(self) -> dict[int, float]:
    """{k: valid perplexity} of the runs' last parameters where no validation scored them
    (a run that ended between validations: --max_steps, --eval_every) and they compete with
    a best (none validated yet, or --patience=0, reports them anyway), so that the final
    evaluation may report them; not recorded in the runs' progress, so that a run resumed
    beyond this end goes on as one never stopped here."""
    runs = [k for k in self.runs.unvalidated(self.step, range(self.runs.count))
            if self.runs.all[k].has_a_best_to_beat]
    if not runs:
      return {}
    nll = self.validation_nll(f'validating the last update (step {self.step})')
    return {k: self.runs.validation_ppl(nll[k]) for k in runs}

  def summaries(self, status: RunStatus) -> list[dict]:
    """Each model's summary (also its summary.json): exact perplexities of the splits
    --eval_splits names; a diverged model's is its error and no file. Stopped by a request:
    each 'interrupted' (the checkpoints are all saved)."""
    if status == RunStatus.INTERRUPTED:
      return self.runs.unfinished_summaries(status, self.step)
    if all(run.diverged for run in self.runs.all):
      return [diverged_summary(run) for run in self.runs.all]
    try:
      last = self.validate_last()
      self.stop.phase = 'running the final evaluation'
      choices = self.runs.report_choices(self.states, self.evaluated, last, self.step)
      # Released before any best is restored (every state is saved): one state in memory at
      # a time, as memory.require_fit counts.
      self.states = None
      params = self.runs.final_params(choices)
      stop_requests.check()
      nll = self.final_nll(params)
    except RunInterrupted:
      return self.runs.unfinished_summaries(RunStatus.INTERRUPTED, self.step)
    return [self.runs.summary(k, status, {name: nll[name][k] for name in nll}, params[k],
                              self.mesh, self.step, self.phases)
            for k in range(self.runs.count)]

  def final_nll(self, params: list) -> dict:
    """Σ -log p of each split --eval_splits names, per model, the whole split; each split's
    perplexities logged."""
    if self.runs.count > 1:
      log.info('final evaluation of %d models: %s', self.runs.count, ', '.join(self.evaluated))
    nll = {}
    for name in self.evaluated:
      started, tokens = time.perf_counter(), len(self.corpus.splits[name])
      nll[name] = self.split_nll(name, self.runs.join(params), f'final evaluation: {name}')
      seconds = self.phases['evaluation'][name] = time.perf_counter() - started
      ppl = ', '.join(f'{perplexity(n, tokens)["ppl"]:.2f}' for n in nll[name])
      log.info('final evaluation: %s perplexity %s (%s, %s)', name, ppl,
               counted(tokens, 'token'), duration(seconds))
    return nll
