"""The trainer: one loop for K >= 1 models, and `run(config)`.

What one update reads and how a split is scored differ by model family: n-gram windows for
feed-forward models (nplm.training.window_feed), BPTT streams for recurrent ones
(nplm.training.stream_feed); the loop drives either through the same small interface. A lone
run is K = 1; models trained together (K > 1, feed-forward, one compiled vmapped step)
differ only in their per-model hyperparameters and workdirs, and each validates, stops
early, diverges and is saved on its own (nplm.run_files.model_run).

Loop discipline (after big_vision): the states are created or resumed, every update is
rebuilt from its number (so a rerun resumes exactly), losses are checked on logged steps,
nothing non-finite is ever checkpointed, and the reported perplexities all come from exact,
normalized log-probabilities of every token of a split (the feed's `log_probs`).
"""

import logging
import time

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from nplm import models, parallel, paths, stop_requests
from nplm.training import memory
from nplm.training import optimizer
from nplm.run_files import plots
from nplm.run_files.checkpoint import CheckpointError, IncompatibleCheckpointError, abstract_of
from nplm.config import Config
from nplm.data.corpus import Corpus
from nplm.data.datasets import load_dataset
from nplm.files import write_json_atomically
from nplm.lm import build_language_model
from nplm.run_files.model_run import ModelRun, TrainingDiverged
from nplm.perplexity import exploded, perplexity
from nplm.training.run_checks import check_corpus, check_together
from nplm.display import counted, duration
from nplm.stop_requests import (SAVING, TRAINING, Interrupted, RunInterrupted, StopRequests,
                                 interrupting)
from nplm.training.stream_feed import StreamFeed
from nplm.run_files.summary import RunStatus, parameter_count, run_summary
from nplm.training.window_feed import WindowFeed
from nplm.training.word2vec_feed import Word2VecFeed

__all__ = ['RunInterrupted', 'TrainingDiverged', 'run', 'train_and_evaluate',
           'train_together']

log = logging.getLogger(__name__)


def feed_of(model):
  """The feed of a model's family: word2vec's windows both sides (word vectors, not a
  language model), BPTT streams (recurrent), n-gram windows (feed-forward)."""
  if not model.language_model:
    return Word2VecFeed
  return StreamFeed if model.recurrent else WindowFeed


class _Interval:
  """The updates, examples and seconds since the last progress record."""

  def __init__(self):
    self.restart()

  def restart(self) -> None:
    self.clock, self.steps, self.examples = time.perf_counter(), 0, 0

  def take(self) -> tuple[float, int, int]:
    taken = time.perf_counter() - self.clock, self.steps, self.examples
    self.restart()
    return taken


class _Loop:
  """One invocation of the loop over K >= 1 models' workdirs: trains, evaluates, saves."""

  def __init__(self, configs: list[Config], corpus: Corpus):
    """Builds the model and its state (stop requests: `stop_requests.check` between the
    steps, RunInterrupted)."""
    self.config, self.corpus, self.count = configs[0], corpus, len(configs)
    self.mesh = parallel.make_mesh(self.config.mesh)
    # Built before any workdir is claimed: a head or the mesh may still refuse the config,
    # and so may the memory it needs or the corpus; both before anything large exists.
    self.lm = build_language_model(self.config, corpus.vocab.counts, self.mesh)
    split_sizes = {name: len(ids) for name, ids in corpus.splits.items()}
    memory.require_fit(self.config, self.lm, corpus.vocab.counts, split_sizes, self.mesh,
                       self.count)
    check_corpus(self.config, self.lm, split_sizes)
    stop_requests.check()
    feed = feed_of(self.lm.model)
    self.feed = feed(self.config, self.lm, corpus.splits, corpus.boundary_id, self.mesh,
                     self.count)
    self.main = parallel.is_main_process()  # Only process 0 writes the runs' own files.
    self.models = []
    try:  # A refused workdir or checkpoint must not keep the others locked in this process.
      stop_requests.check()
      for k, config in enumerate(configs):
        name = f'[{k}] ' if self.count > 1 else ''
        self.models.append(ModelRun(config, corpus, self.main, name))
      self.states = self.start_or_resume(configs)
      stop_requests.check()
    except BaseException:
      self.close()
      raise
    self.compiled = False
    log.info('%s', self.startup_line())

  # --- the states of the K models ---------------------------------------------------

  def join(self, trees):
    """One model's tree as it is; K models' stacked along a new leading axis."""
    if self.count == 1:
      return trees[0]
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)

  def member(self, tree, k: int):
    return tree if self.count == 1 else jax.tree.map(lambda leaf: leaf[k], tree)

  def start_or_resume(self, configs: list[Config]):
    """The models' states (each its newest good checkpoint's, or a new one's), joined; sets
    the step they are all at, their step keys and hyperparameters."""
    states, run_rngs = [], []
    for model in self.models:
      init_rng, run_rng = jax.random.split(jax.random.key(model.config.seed))
      state = self.feed.create_state(init_rng)
      stop_requests.check()
      restored = model.checkpoints.restore_latest(abstract_of(state))
      model.resume(restored)
      if restored is not None:
        state = restored[0]
        log.info('%sResumed from %s at step %d.', model.name, model.workdir, int(state.step))
      states.append(state)
      run_rngs.append(run_rng)
    self.template, self.run_rngs = states[0], self.join(run_rngs)
    self.hyperparameters = optimizer.hyperparameters_of(configs, self.feed.steps_per_epoch)
    self.step = self.common_step(states)
    return self.join(states)

  def common_step(self, states) -> int:
    """The step every model still training is at: they train in lockstep."""
    steps = {int(s.step) for model, s in zip(self.models, states) if model.training}
    if len(steps) > 1:
      behind = [str(m.workdir) for m, s in zip(self.models, states)
                if m.training and int(s.step) < max(steps)]
      raise IncompatibleCheckpointError(
          f'the models to train together were saved at different steps ({sorted(steps)}); '
          f'finish {", ".join(behind)} alone (nplm train with its config and '
          'workdir), or delete those workdirs to train them from the start')
    return steps.pop() if steps else int(states[0].step)

  def training(self) -> list[int]:
    return [k for k, model in enumerate(self.models) if model.training]

  def save(self, k: int, best: bool = False) -> None:
    self.models[k].save(self.member(self.states, k), best)

  def save_unsaved(self, stop: StopRequests) -> None:
    """A checkpoint of every model still training that has none at this step."""
    stop.phase = SAVING
    self.states = self.feed.pay_decay_debts(self.states)  # Lazily decayed rows as the dense update's.
    for k in self.training():
      if self.models[k].saved_step != self.step:
        self.save(k)

  def close(self) -> None:
    for model in self.models:
      model.close()

  # --- training -----------------------------------------------------------------------

  def train(self, stop: StopRequests) -> RunStatus:
    """Runs epochs until every model has stopped, --max_steps, or a stop request."""
    if self.config.max_steps and self.step >= self.config.max_steps:
      return RunStatus.MAX_STEPS  # Resumed from a run that had already taken them all.
    while self.training():
      epoch = self.models[self.training()[0]].progress['epochs_done']
      status = self.train_epoch(epoch, stop)
      self.save_unsaved(stop)  # Before validation too: a failed or stopped one loses nothing.
      if status is not None:
        return status
      try:
        self.end_epoch(epoch, stop)
      except RunInterrupted:  # Its checkpoint is saved: the rerun validates it.
        return RunStatus.INTERRUPTED
    return RunStatus.EPOCHS_DONE

  def train_epoch(self, epoch: int, stop: StopRequests) -> RunStatus | None:
    """An epoch's updates from the current step; the status if the run stops within it."""
    config, steps_per_epoch = self.config, self.feed.steps_per_epoch
    start = self.step - epoch * steps_per_epoch
    self.states, batches = self.feed.start_epoch(self.states, epoch, start)
    bar = tqdm(batches, total=steps_per_epoch, initial=start, desc=f'epoch {epoch + 1}',
               unit='step', disable=None, leave=False)  # Its log lines: progress_line.
    interval, in_flight = _Interval(), []
    stop.phase = TRAINING
    for batch, batch_examples in bar:
      if not self.compiled:
        stop.phase = 'compiling the train step'
        log.info('compiling the train step')
      self.states, losses = self.feed.step(self.states, batch, self.run_rngs,
                                           self.hyperparameters)
      self.step += 1
      interval.steps, interval.examples = interval.steps + 1, interval.examples + batch_examples
      if not self.compiled:  # Throughput counts updates, not the compilation before them.
        jax.block_until_ready(losses)
        stop.check()  # Stopped while compiling: nothing worth a checkpoint was done.
        self.compiled, stop.phase = True, TRAINING
        interval.restart()
      in_flight.append(losses)  # A few updates queued at most: a stop never waits for more.
      if len(in_flight) > stop_requests.IN_FLIGHT:
        jax.block_until_ready(in_flight.pop(0))
      at_log = self.step % config.log_every == 0
      at_checkpoint = (self.step % config.checkpoint_every == 0
                       and self.step % steps_per_epoch != 0)  # Epochs end with a save.
      out_of_steps = config.max_steps and self.step >= config.max_steps
      stopping = parallel.agreed_stop(stop.is_set(), at_log or at_checkpoint)
      if at_log or at_checkpoint or out_of_steps or stopping:
        losses = np.reshape(parallel.fetch(losses), self.count)  # Waits: honest clocks.
        rate = self.record(losses, *interval.take(), at_log, epoch)
        bar.set_postfix(loss=f'{np.min(losses):.3f}', examples_per_s=f'{rate:,.0f}')
        if stopping:
          return RunStatus.INTERRUPTED
        if out_of_steps:
          return RunStatus.MAX_STEPS
        if at_checkpoint:
          self.save_unsaved(stop)
          stop.phase = TRAINING
          interval.restart()
        if not self.training():
          return None
    jax.block_until_ready(self.states)
    seconds, _, examples = interval.take()
    for k in self.training():
      self.models[k].progress['train_seconds'] += seconds
      self.models[k].progress['train_examples'] += examples
    return None

  def record(self, losses: np.ndarray, seconds: float, steps: int, examples: int,
             at_log: bool, epoch: int) -> float:
    """Each training model's progress and metrics; a model whose loss has exploded stops
    (its state of this step is not saved). Returns examples/s per model."""
    rate = examples / max(seconds, 1e-9)
    for k in self.training():
      model, loss = self.models[k], float(losses[k])
      if exploded(loss, self.corpus.vocab.size):
        model.diverge(f'the training loss is {loss} at step {self.step}')
        continue
      model.progress['train_seconds'] += seconds
      model.progress['train_examples'] += examples
      if at_log:
        planned = optimizer.planned_updates(model.config, self.feed.steps_per_epoch)
        model.writer.write('train', self.step, loss=loss, examples_per_second=rate,
                           learning_rate=float(optimizer.learning_rate_at(
                               model.config, self.step - 1, planned)))
    if at_log and self.training():
      log.info('%s', self.progress_line(losses, rate, steps / max(seconds, 1e-9), epoch))
    return rate

  def progress_line(self, losses: np.ndarray, rate: float, steps_per_second: float,
                    epoch: int) -> str:
    """step, where in the epoch, the loss(es), speed and the time left in the epoch."""
    per_epoch = self.feed.steps_per_epoch
    in_epoch = self.step - epoch * per_epoch
    if self.count == 1:
      loss = f'loss {losses[0]:.4f}'
    else:
      loss = 'losses ' + ' '.join(f'{k}:{losses[k]:.3f}' for k in self.training())
    if not steps_per_second:  # Only the compiled step since the last line: no rate yet.
      return f'step {self.step}  epoch {epoch + 1}: {in_epoch}/{per_epoch} steps  {loss}'
    left = (per_epoch - in_epoch) / steps_per_second
    per_model = ' per model' if self.count > 1 else ''
    return (f'step {self.step}  epoch {epoch + 1}: {in_epoch}/{per_epoch} steps '
            f'({100 * in_epoch / per_epoch:.0f}%, {duration(left)} left)  {loss}  '
            f'{rate:,.0f} examples/s{per_model}')

  def split_nll(self, split: str, params, progress: str) -> np.ndarray:
    """Σ -log p over every token of the split, per model [K], from the exact log-probs."""
    log_probs = self.feed.log_probs(params, split, progress)
    return -np.sum(np.reshape(log_probs, (self.count, -1)), axis=1)

  def end_epoch(self, epoch: int, stop: StopRequests) -> None:
    """Validates every model still training (its state saved, and settled, before); each
    keeps its best and decides its stop. A stop request: RunInterrupted."""
    training = self.training()
    if not training:
      return
    tokens = len(self.corpus.splits['valid'])
    stop.phase = f'validating after epoch {epoch + 1}'
    nll = self.split_nll('valid', self.states.params, stop.phase)
    for k in training:
      model, ppl = self.models[k], perplexity(nll[k], tokens)['ppl']
      if exploded(nll[k] / tokens, self.corpus.vocab.size):
        model.diverge(f'the validation perplexity is {ppl} after epoch {epoch + 1}')
        continue
      if model.record_validation(ppl):
        self.save(k, best=True)
      model.writer.write('valid', self.step, ppl=ppl, epoch=epoch + 1)
      self.save(k)

  # --- the end --------------------------------------------------------------------------

  def final_params(self) -> list:
    """Each model's parameters to report: its best (on validation), or where no epoch
    finished, its last; a diverged model's are whatever it holds (not reported)."""
    abstract, params = abstract_of(self.template), []
    for k, model in enumerate(self.models):
      best = None if model.diverged else model.checkpoints.restore_best(abstract)
      if best is None and model.progress['best_epoch'] is not None and not model.diverged:
        raise CheckpointError(f'{model.workdir}/best holds no checkpoint, though epoch '
                              f'{model.progress["best_epoch"]} was the best: its parameters '
                              'are lost; train again in a new --workdir.')
      params.append(self.member(self.states, k).params if best is None else best[0].params)
      if self.count == 1 and not model.diverged:
        kept = 'last epoch\'s' if model.config.patience == 0 else 'best'
        log.info('final evaluation: %s with the %s parameters', ', '.join(self.corpus.splits),
                 'last' if best is None else f'{kept} (step {int(best[0].step)})')
    return params

  def summaries(self, loop_status: RunStatus, stop: StopRequests) -> list[dict]:
    """Each model's summary (also its summary.json): exact perplexities of every split;
    a diverged model's is its error and no file. A stop request: RunInterrupted (the
    checkpoints are all saved)."""
    if all(model.diverged for model in self.models):
      return [self.diverged_summary(model) for model in self.models]
    stop.phase = 'running the final evaluation'
    params = self.final_params()
    stop_requests.check()
    if self.count > 1:
      log.info('final evaluation of %d models: %s', self.count, ', '.join(self.corpus.splits))
    nll = {}
    for name, ids in self.corpus.splits.items():
      started = time.perf_counter()
      nll[name] = self.split_nll(name, self.join(params), f'final evaluation: {name}')
      ppl = ', '.join(f'{perplexity(n, len(ids))["ppl"]:.2f}' for n in nll[name])
      log.info('final evaluation: %s perplexity %s (%s, %s)', name, ppl,
               counted(len(ids), 'token'), duration(time.perf_counter() - started))
    return [self.summary(k, loop_status, {name: nll[name][k] for name in nll}, params[k])
            for k in range(self.count)]

  def summary(self, k: int, loop_status: RunStatus, nll: dict, params) -> dict:
    model, splits = self.models[k], self.corpus.splits
    results = {name: perplexity(nll[name], len(splits[name])) for name in nll}
    exploded_splits = [name for name in nll
                       if exploded(nll[name] / len(splits[name]), self.corpus.vocab.size)]
    if exploded_splits and not model.diverged:
      name = exploded_splits[0]
      model.diverge(f'the final {name} perplexity is {results[name]["ppl"]}')
    if model.diverged:
      return self.diverged_summary(model)
    steps = model.saved_step if model.saved_step is not None else self.step
    summary = run_summary(model.status(loop_status), model.config, self.corpus, self.mesh,
                          model.progress, steps, params, results, model.wall_seconds())
    if self.count > 1:
      summary['trained_together'] = self.count
    if self.main:
      write_json_atomically(model.workdir / 'summary.json', summary)
      model.writer.final(summary)
      plots.learning_curve(model.workdir)
    return summary

  @staticmethod
  def diverged_summary(model: ModelRun) -> dict:
    return {'status': RunStatus.DIVERGED, 'error': model.diverged,
            'workdir': str(model.workdir)}

  def startup_line(self) -> str:
    """What the run is: data, model, head, size, devices, workdir(s)."""
    config, corpus = self.config, self.corpus
    tokens = ', '.join(f'{name} {len(ids):,}' for name, ids in corpus.splits.items())
    mesh = ','.join(f'{axis}:{size}' for axis, size in self.mesh.shape.items())
    workdirs = (f'workdir {self.models[0].workdir}' if self.count == 1
                else f'{self.count} models trained together, workdirs '
                     f'{self.models[0].workdir} … {self.models[-1].workdir}')
    state = (f'resumed at step {self.step}' if self.step else 'new')
    return (f'{config.dataset} ({config.tokens}): |V| = {corpus.vocab.size:,}, tokens '
            f'{tokens} · model {models.MODELS[config.model].describe(config)} · head '
            f'{config.head} · {parameter_count(self.template.params, corpus.vocab.size):,} '
            f'parameters · {counted(self.feed.steps_per_epoch, "step")} per epoch · '
            f'{counted(jax.device_count(), jax.devices()[0].platform + " device")}, mesh {mesh} · '
            f'{workdirs} ({state})')


def train_models(configs: list[Config], corpus: Corpus) -> list[dict]:
  """Trains (or resumes) K >= 1 models in one program; one summary per model, in order.

  Stopped by SIGTERM/Ctrl-C, every model still training saves a checkpoint and each
  summary is {'status': 'interrupted', ...}; rerunning the same configs continues them.
  Stopped while the model is built: Interrupted, with its message (nothing to save).
  """
  configs = check_together(configs)
  with stop_requests.stop_requests() as stop:
    stop.phase = 'building the model'
    log.info('building the model and its train state')
    try:
      loop = _Loop(configs, corpus)
      try:
        status = loop.train(stop)
        if status != RunStatus.INTERRUPTED:
          try:
            return loop.summaries(status, stop)
          except RunInterrupted:  # Every checkpoint is saved.
            status = RunStatus.INTERRUPTED
        return [loop.diverged_summary(model) if model.diverged else
                {'status': status, 'steps': loop.step, 'workdir': str(model.workdir)}
                for model in loop.models]
      finally:
        loop.close()
    except RunInterrupted as stopped:  # While building or compiling: nothing to save.
      raise Interrupted(f'Interrupted ({stopped}); the checkpoints of '
                        f'{paths.shown(configs[0].workdir)} '
                        'are as they were. Rerun the same command to resume.') from None


def train_together(configs: list[Config], corpus: Corpus) -> list[dict]:
  """K feed-forward models of one shape trained in one program (one vmapped step): they
  differ only in PER_MODEL_FIELDS and share one --data_seed."""
  return train_models([config.resolved() for config in configs], corpus)


def train_and_evaluate(config: Config, corpus: Corpus) -> dict:
  """Trains (or resumes) in `config.workdir` and returns the summary (also summary.json).

  A run stopped by SIGTERM/Ctrl-C returns {'status': 'interrupted', ...} after saving a
  checkpoint; rerunning with the same workdir continues it to the same final numbers. A
  run whose loss explodes raises TrainingDiverged, its last good checkpoint kept.
  """
  (summary,) = train_models([config], corpus)
  if summary['status'] == RunStatus.DIVERGED:
    raise TrainingDiverged(summary['error'])
  if summary['status'] != RunStatus.INTERRUPTED:
    log.info('valid perplexity %.2f  test perplexity %.2f  (|V| = %d)',
             summary['valid_ppl'], summary['test_ppl'], summary['vocab_size'])
  return summary


def run(config: Config, corpus: Corpus | None = None) -> dict:
  """Loads the corpus the config names (--dataset; unless given) and trains on it."""
  config = config.resolved().validate().absolute_paths()
  parallel.initialize_processes(config)
  if corpus is None:
    log.info('loading --dataset=%s (%s)', config.dataset, config.tokens)
    with interrupting(f'loading --dataset={config.dataset}'):
      corpus = parallel.main_process_first(lambda: load_dataset(config))
  return train_and_evaluate(config, corpus)
