"""The one training loop, for K >= 1 models (nplm.training.runs): a lone run is K = 1.

What one update reads and how a split is scored differ by model family (its feed,
nplm.training.families); the loop drives each through the same small interface. Between
updates it runs periodic actions (after levanter's hooks and big_vision's `itstime`): the
progress line and metrics every --log_every updates, a checkpoint every --checkpoint_minutes
(and every --checkpoint_every updates), a checkpoint then validation every --eval_every (or at
each epoch's end); the run's last update is validated too, so that the final evaluation never
drops an update.

Loop discipline (after big_vision): the states are created or resumed, every update is
rebuilt from its number (so a rerun resumes exactly), losses are checked whenever they are
read (logged and checkpoint steps), nothing non-finite is ever checkpointed, and the reported
perplexities all come from exact, normalized log-probabilities of every token of a split (the
feed's `log_probs`).
"""

import itertools
import logging
import time
from pathlib import Path

import jax
import numpy as np
from tqdm import tqdm

from nplm import parallel, stop_requests
from nplm.config import Config
from nplm.data.corpus import Corpus
from nplm.lm import build_language_model
from nplm.run_files import profile
from nplm.run_files.model_run import what_is_kept
from nplm.run_files.summary import RunStatus
from nplm.stop_requests import SAVING, TRAINING, Interrupted, RunInterrupted, StopRequests
from nplm.training import cost, loop_lines, memory, optimizer
from nplm.training.actions import (Clocked, Interval, Periodic, StepInfo, Traced,
                                   chosen_updates_per_call, updates_in_one_call)
from nplm.training.families import feed_of
from nplm.training.loop_evaluation import LoopEvaluation
from nplm.training.feed import prefix_name
from nplm.training.run_checks import check_corpus, warn_calls_cut, warn_untrained_unk
from nplm.training.runs import Runs, periodic_validation, validates

log = logging.getLogger(__name__)


class Loop(LoopEvaluation):
  """One invocation of the loop over K >= 1 models' workdirs: trains, evaluates (its
  evaluation methods: nplm.training.loop_evaluation), saves."""

  def __init__(self, configs: list[Config], corpus: Corpus, stop: StopRequests,
               started: float, load_seconds: float | None = None):
    """Builds the model, its feed and the runs' states (a stop request: RunInterrupted).
    `started`: the invocation's perf_counter() at its start (its wall clock's), after
    `load_seconds` loading the corpus (None: the caller passed it in)."""
    built = time.perf_counter()
    self.config, self.corpus, self.stop = configs[0], corpus, stop
    self.mesh = parallel.make_mesh(self.config.mesh)
    # Built before any workdir is claimed: a head or the mesh may still refuse the config,
    # and so may the memory it needs or the corpus; both before anything large exists.
    self.lm = build_language_model(self.config, corpus.vocab.counts, self.mesh)
    split_sizes = {name: len(ids) for name, ids in corpus.splits.items()}
    memory.require_fit(self.config, self.lm, corpus.vocab.counts, split_sizes, self.mesh,
                       len(configs))
    check_corpus(self.config, self.lm, split_sizes)
    warn_untrained_unk(corpus)
    warn_calls_cut(self.config)
    language_model = self.lm.model.language_model
    self.evaluated = self.config.evaluated_splits(split_sizes, language_model=language_model)
    self.validates = validates(self.config, language_model, self.evaluated)
    if not self.validates:
      log.info('%s is not a language model: no perplexity is scored (--eval_splits=valid,test '
               'asks for them)', self.config.model)
    validation = periodic_validation(self.config, split_sizes['valid'])
    whole = validation['tokens'] == validation['of']
    self.validation_split = 'valid' if whole else prefix_name('valid', validation['tokens'])
    stop_requests.check()
    self.feed = feed_of(self.lm.model)(self.config, self.lm, corpus.splits,
                                       corpus.boundary_id, self.mesh, len(configs),
                                       {} if whole else {'valid': validation['tokens']})
    stop_requests.check()
    self.runs = Runs(configs, corpus, parallel.is_main_process(), validation, started,
                     language_model)
    try:  # A refused checkpoint must not keep the workdirs locked in this process.
      self.states, self.run_rngs, self.step = self.runs.start_or_resume(self.feed)
      stop_requests.check()
    except BaseException:
      self.runs.close()
      raise
    self.planned_steps = loop_lines.planned_steps(self.config, self.feed.steps_per_epoch)
    self.compiled, self.cost_said = False, False
    # --updates_per_call=0: one a call until the first progress line's rate chooses.
    self.updates_per_call = self.config.updates_per_call or 1
    self.batch = None  # The last call's first batch: the shapes a program is compiled for.
    self.set_hyperparameters()
    per_epoch, every = self.feed.steps_per_epoch, self.config.eval_every

    def saves_anyway(step: int) -> bool:  # A validation or an epoch's end.
      return step % per_epoch == 0 or bool(every) and step % every == 0

    by_updates = Periodic(self.config.checkpoint_every, self.checkpoint, skip=saves_anyway)
    self.checkpoint_clock = Clocked(60 * self.config.checkpoint_minutes,
                                    self.checkpoint_by_the_clock, sync_every=self.config.log_every,
                                    skip=lambda step: saves_anyway(step) or by_updates.due(step))
    self.actions = [Periodic(self.config.log_every, self.log_progress), by_updates,
                    self.checkpoint_clock]
    if every:
      self.actions.append(Periodic(every, self.validate_periodically))
    traces = Path(self.config.workdir) / 'profile'  # K models: the first one's workdir.
    first_line = (self.step // self.config.log_every + 1) * self.config.log_every
    self.traced = Traced(first_line, self.config.profile_steps if self.runs.main else 0,
                         lambda: profile.start(traces),
                         lambda traced: profile.stop(traces, first_line, traced))
    self.actions.append(self.traced)  # After the progress line's (a sampled head timed).
    log.info('%s', loop_lines.startup_line(self.config, corpus, self.runs, self.mesh,
                                                self.feed.steps_per_epoch, self.step))
    # This invocation's phases (summary.run_summary); the compile's is 0 if no step ran.
    self.phases = {'load': load_seconds, 'build': time.perf_counter() - built, 'compile': 0.0,
                   'train': 0.0, 'checkpoints': 0.0, 'validation': 0.0, 'evaluation': {}}

  def close(self) -> None:
    self.runs.close()

  def set_hyperparameters(self) -> None:
    """Each run's hyperparameters in its optimizer state, for the updates to come: its
    config's, the feed's steps per epoch, the plateau factor its progress holds."""
    values = self.runs.join(self.runs.hyperparameters(self.feed.steps_per_epoch))
    placed = {name: parallel.put(value, self.mesh) for name, value in values.items()}
    self.states = optimizer.with_hyperparameters(self.states, placed)

  # --- training -----------------------------------------------------------------------

  def train(self) -> RunStatus:
    """Runs epochs until every model has stopped, --max_steps, or a stop request."""
    try:
      every = self.config.eval_every
      if every and self.step and self.step % every == 0:
        # Saved but not validated by the last invocation (stopped in its validation).
        validated = self.validate(self.runs.training)
        if validated:
          self.save_latest(validated)
      if self.out_of_steps():
        return RunStatus.MAX_STEPS  # Resumed from a run that had taken them all.
      while self.runs.training:
        epoch = self.runs.epochs_done
        status = self.train_epoch(epoch)
        if status is not None or self.step < (epoch + 1) * self.feed.steps_per_epoch:
          self.save_unsaved()  # A stop, --max_steps, or every model stopped early.
          if status is not None:
            return status
          continue
        trained = self.runs.finished_epoch(self.step)
        if not every:
          self.validate(trained)
        self.runs.end_epoch(trained, epoch + 1)
        self.save_latest(trained)  # One save: its records, a best among them.
    except RunInterrupted:  # Its checkpoint is saved (validate): the rerun validates it.
      return RunStatus.INTERRUPTED
    finally:
      self.traced.finish(self.step)  # A run that ends within its profile's updates.
    return RunStatus.EPOCHS_DONE

  def train_epoch(self, epoch: int) -> RunStatus | None:
    """An epoch's updates from the current step; the status if the run ends within it."""
    start = self.step - epoch * self.feed.steps_per_epoch
    self.states, batches = self.feed.start_epoch(self.states, epoch, start)
    self.bar = tqdm(batches, total=self.feed.steps_per_epoch, initial=start,
                    desc=f'epoch {epoch + 1}', unit='step', disable=None,
                    leave=False)  # Its log lines: progress_line.
    self.interval, self.in_flight = Interval(), []
    self.stop.phase = TRAINING
    batches = iter(self.bar)
    while group := list(itertools.islice(batches, self.updates_in_next_call(epoch))):
      if not self.compiled:
        self.stop.phase = 'compiling the train step'
        log.info('compiling the train step')
        self.compile_started = time.perf_counter()
        if self.updates_per_call > 1:  # Both programs, whichever comes first.
          self.feed.compile_steps(self.states, group[0][0], self.run_rngs,
                                  self.updates_per_call)
      self.batch = group[0][0]
      if len(group) == 1:
        self.states, losses = self.feed.step(self.states, group[0][0], self.run_rngs)
      else:
        self.states, losses = self.feed.steps(self.states, [batch for batch, _ in group],
                                              self.run_rngs)
      self.count_call(losses, [examples for _, examples in group])
      end = self.run_actions(losses, epoch, len(group) > 1)
      if end is not None or not self.runs.training:
        return end
    jax.block_until_ready(self.states)
    seconds, _, examples = self.interval.take()
    self.count_time(seconds, examples)
    return None

  def updates_in_next_call(self, epoch: int) -> int:
    """--updates_per_call, or 1 where an action, the epoch's end or --max_steps comes
    sooner (actions.updates_in_one_call)."""
    return updates_in_one_call(self.updates_per_call, self.step, self.actions,
                               [(epoch + 1) * self.feed.steps_per_epoch,
                                self.config.max_steps or None])

  def count_call(self, losses, examples: list[int]) -> None:
    """The step and the clock moved on by the call's updates (`examples` in each); its
    losses queued (a stop never waits for more than IN_FLIGHT calls). The first call waits
    for its compilation: a stop requested during it is saved with its updates
    (run_actions), if the compilation ends in time."""
    self.step += len(examples)
    for each in examples:
      self.interval.count(each)
    if not self.compiled:  # Throughput counts updates, not the compilation before them.
      jax.block_until_ready(losses)
      self.compiled, self.stop.phase = True, TRAINING
      self.phases['compile'] = time.perf_counter() - self.compile_started
      self.interval.restart()
    self.stop.unsaved = True
    self.in_flight.append(losses)
    if len(self.in_flight) > stop_requests.IN_FLIGHT:
      jax.block_until_ready(self.in_flight.pop(0))

  def count_time(self, seconds: float, examples: int) -> None:
    """Training time: this invocation's phase, and each model's total (its progress)."""
    self.phases['train'] += seconds
    self.runs.count_time(seconds, examples)

  def out_of_steps(self) -> bool:
    return bool(self.config.max_steps) and self.step >= self.config.max_steps

  def run_actions(self, losses, epoch: int, several: bool = False) -> RunStatus | None:
    """The actions due at this step, once the losses are read (`several`: the losses of a
    call's updates, the last one this step's); how the run ends here, if it does (a stop
    request, --max_steps)."""
    due = [action for action in self.actions if action.due(self.step)]
    # A multi-process run's processes agree at the actions' steps only.
    stopping = parallel.agreed_stop(self.stop.is_set(), bool(due))
    end = (RunStatus.INTERRUPTED if stopping else
           RunStatus.MAX_STEPS if self.out_of_steps() else None)
    if due or end:
      info = self.read_losses(losses, epoch, end, several)
      try:
        for action in due:
          action.action(info)
      except RunInterrupted:  # During a validation: its checkpoint is saved.
        return RunStatus.INTERRUPTED
      self.bar.set_postfix(loss=f'{np.min(info.losses):.3f}',
                           examples_per_s=f'{info.examples_per_second:,.0f}')
    return end

  def read_losses(self, losses, epoch: int, end: RunStatus | None,
                  several: bool = False) -> StepInfo:
    """This step's losses on the host (this waits for the update: honest clocks); a model
    whose loss exploded stops; the others' training time counted."""
    losses = parallel.fetch(losses)
    losses = np.reshape(losses[-1] if several else losses, self.runs.count)
    seconds, steps, examples = self.interval.take()
    self.runs.check_losses(losses, self.step)
    self.count_time(seconds, examples)
    return StepInfo(epoch, losses, examples / max(seconds, 1e-9), steps / max(seconds, 1e-9),
                    end)

  def log_progress(self, info: StepInfo) -> None:
    """Each training model's train metrics, and the progress line; at the first with a
    rate, what a lone run will cost (nplm.training.cost)."""
    self.runs.write_train_metrics(info.losses, self.step, info.examples_per_second,
                                  self.feed.steps_per_epoch)
    if self.runs.training:
      log.info('%s', loop_lines.progress_line(info, self.step, self.feed.steps_per_epoch,
                                                 self.planned_steps, self.runs))
      if info.steps_per_second and not self.cost_said:
        self.cost_said = True
        self.choose_updates_per_call(info)
        if self.runs.count == 1 and jax.process_count() == 1:
          self.stop.phase = 'timing a sampled head'
          cost.warn_if_costly(self.config, self.lm, self.corpus, self.mesh, type(self.feed),
                              info.examples_per_second, self.planned_steps - self.step,
                              info.examples_per_second / info.steps_per_second)
          self.stop.phase = TRAINING
          self.interval.restart()

  def choose_updates_per_call(self, info: StepInfo) -> None:
    """--updates_per_call=0: K updates a call from here on where the updates just timed one
    a call are short enough (actions.chosen_updates_per_call), their program compiled now,
    outside the training clock. A multi-process run, and a family whose numbers K a call
    are not one a call's to the last bit, stay at one."""
    if (self.config.updates_per_call or not self.feed.chooses_updates_per_call
        or self.config.num_processes > 1 or jax.process_count() > 1):
      return
    update_seconds = 1 / info.steps_per_second
    k = chosen_updates_per_call(update_seconds, (self.planned_steps - self.step) * update_seconds,
                                self.config.log_every)
    if k == 1:
      return
    self.stop.phase = f'compiling the train step {k} updates a call'
    started = time.perf_counter()
    self.feed.compile_several(self.states, self.batch, self.run_rngs, k)
    self.phases['compile'] += time.perf_counter() - started
    self.updates_per_call = k
    log.info('updates of %.1f ms one a call: %s a call from here on, the same numbers '
             '(--updates_per_call=1 keeps one)', 1000 * update_seconds, k)
    self.stop.phase = TRAINING
    self.interval.restart()

  def checkpoint(self, info: StepInfo, settle=None) -> None:
    """A periodic checkpoint, every --checkpoint_every updates: its rows' decay paid in the
    training states, as every save at a step the config names pays it."""
    if info.end is None:  # A run that ends here saves on its way out (train).
      self.save_states(lambda states: self.runs.save_unsaved(states, self.step), settle)
      self.stop.phase = TRAINING
      self.interval.restart()

  def checkpoint_by_the_clock(self, info: StepInfo) -> None:
    """A checkpoint every --checkpoint_minutes: a copy of the states with their rows' decay
    paid, the states trained on as they were, so that the run's numbers do not depend on
    when the clock fell due (paying it in them moves the last digits)."""
    self.checkpoint(info, settle=self.feed.settled_copy)

  def validate_periodically(self, info: StepInfo) -> None:
    """Every --eval_every updates: validation, then a checkpoint with its records (a run that
    ends here is validated on its way out: train)."""
    if info.end is None:
      validated = self.runs.training
      self.validate(validated)
      self.save_latest(validated)  # Their records, a stop among them.
      self.stop.phase = TRAINING
      self.interval.restart()

  def save_unsaved(self) -> None:
    """A checkpoint of every model still training that has none at this step."""
    self.save_states(lambda states: self.runs.save_unsaved(states, self.step))

  def save_latest(self, runs: list[int]) -> None:
    """`runs`' checkpoints of this step with their progress as it is now, a best among them."""
    self.save_states(lambda states: self.runs.save_latest(states, runs))

  def save_states(self, save, settle=None) -> None:
    """`save` of the states with their rows' lazily paid decay paid (the parameters are then
    the dense update's): paid in the training states, or in the copy `settle` makes."""
    self.stop.phase = SAVING
    started = time.perf_counter()
    if settle is None:
      self.states = self.feed.pay_decay_debts(self.states)
      save(self.states)
    else:
      save(settle(self.states))
    self.stop.unsaved = False
    self.checkpoint_clock.reset()
    self.phases['checkpoints'] += time.perf_counter() - started


def train(configs: list[Config], corpus: Corpus, started: float | None = None,
          load_seconds: float | None = None) -> list[dict]:
  """Trains (or resumes) K >= 1 models (configs checked by run_checks.check_together) in one
  program; one summary per model, in order. `started`: when the invocation began (its
  perf_counter(); default: now), `load_seconds` of it loading `corpus` (None: not here).

  Stopped by SIGTERM/Ctrl-C, every model still training saves a checkpoint and each summary
  is {'status': 'interrupted', ...}; rerunning the same configs continues them. Stopped
  while the model is built or its step compiled: Interrupted, with its message (nothing to
  save).
  """
  with stop_requests.stop_requests() as stop:
    stop.phase = 'building the model'
    log.info('building the model and its train state')
    try:
      loop = Loop(configs, corpus, stop,
                  time.perf_counter() if started is None else started, load_seconds)
      try:
        summaries = loop.summaries(loop.train())
      finally:
        loop.close()
      stop.heeded = any(summary.get('status') == RunStatus.INTERRUPTED for summary in summaries)
      return summaries
    except RunInterrupted as stopped:  # While building or compiling: nothing to save.
      raise Interrupted(f'Interrupted ({stopped}); {what_is_kept(configs[0].workdir)}.'
                        ) from None

