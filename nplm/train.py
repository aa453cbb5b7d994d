"""The trainer: the optimizer, the loop and `run(config)`, for every model.

What one update reads and how a split is scored differ by model family: n-gram windows for
feed-forward models (nplm.window_training), BPTT streams for recurrent ones
(nplm.stream_training); the loop drives either through the same small interface.

Loop discipline (after big_vision): the state is created or resumed, every update is
rebuilt from its number (so a rerun resumes exactly), losses are checked on logged steps,
nothing NaN is ever checkpointed, and the reported perplexities all come from exact,
normalized log-probabilities summed over every token of a split.
"""

import contextlib
import functools
import logging
import math
import signal
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import optax
from tqdm import tqdm

from nplm import parallel, plots
from nplm.checkpoint import CheckpointError, Checkpoints, abstract_of, claim_workdir
from nplm.perplexity import exploded
from nplm.workdir_lock import WorkdirLock, prepare_workdir
from nplm.config import Config
from nplm.data.corpus import Corpus
from nplm.data.datasets import load_dataset
from nplm.files import write_json_atomically
from nplm.lm import build_language_model
from nplm.metrics import MetricsWriter
from nplm.stream_training import StreamFeed
from nplm.window_training import WindowFeed


log = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
  """The loss or the parameters stopped being finite."""


# --- optimizer and state --------------------------------------------------------------

def _decay_mask(params):
  """True for the weights and the features C, False for biases: the paper decays no bias."""
  return jax.tree_util.tree_map_with_path(lambda path, _: path[-1].key != 'bias', params)


def learning_rate_at(config: Config, t):
  """ε_t = ε0 / (1 + r·t), the rate of update t + 1 (t updates before it)."""
  return config.learning_rate / (1.0 + config.lr_decay * t)


def make_optimizer(config: Config, **hyperparameters) -> optax.GradientTransformation:
  """The config's optimizer; `hyperparameters` (learning_rate, lr_decay, weight_decay) may
  replace its values with arrays: models trained together each trace their own
  (nplm.vmapped_training)."""
  config = config.replace(**hyperparameters)
  learning_rate = functools.partial(learning_rate_at, config)
  if config.optimizer == 'sgd':  # θ ← θ - ε_t (∇ + λ θ): the paper's update with decay.
    update = optax.chain(optax.add_decayed_weights(config.weight_decay, _decay_mask),
                         optax.sgd(learning_rate))
  else:
    update = optax.adamw(learning_rate, weight_decay=config.weight_decay, mask=_decay_mask)
  if config.clip_norm:  # ∇ ← ∇ · min(1, c / ‖∇‖): exploding gradients (seed 004).
    return optax.chain(optax.clip_by_global_norm(config.clip_norm), update)
  return update


def _all_finite(tree) -> bool:
  return all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree.leaves(tree))


class RunInterrupted(Exception):
  """A stop request during the final evaluation: the checkpoints are all saved."""


# --- the loop -------------------------------------------------------------------------

class StopRequests:
  """Set by the first SIGTERM or Ctrl-C (the loop then saves and stops); a second Ctrl-C,
  or any during the final evaluation (`at_once`: nothing is lost by abandoning it), stops
  at once."""

  def __init__(self):
    self.requested = threading.Event()
    self.at_once = False

  def is_set(self) -> bool:
    return self.requested.is_set()

  def handler(self, signum, frame):
    if self.at_once:
      raise RunInterrupted(f'signal {signum} during the final evaluation')
    if self.requested.is_set():
      raise KeyboardInterrupt
    log.warning('Signal %d: saving a checkpoint and stopping.', signum)
    self.requested.set()


@contextlib.contextmanager
def stop_requests():
  """StopRequests, installed for SIGINT and SIGTERM while the context lasts."""
  stop = StopRequests()
  if threading.current_thread() is not threading.main_thread():
    yield stop  # Signals reach only the main thread; nothing to install.
    return
  previous = {s: signal.signal(s, stop.handler) for s in (signal.SIGINT, signal.SIGTERM)}
  try:
    yield stop
  finally:
    for s, h in previous.items():
      signal.signal(s, h)


class _Run:
  """One invocation of the loop over a workdir: trains, evaluates, checkpoints."""

  def __init__(self, config: Config, corpus: Corpus):
    self.config, self.corpus = config, corpus
    self.workdir = Path(config.workdir)
    self.mesh = parallel.make_mesh(config.mesh)
    # Built before the workdir is claimed: a head or the mesh may still refuse the config.
    self.lm = build_language_model(config, corpus.vocab.counts, self.mesh)
    feed = StreamFeed if self.lm.model.recurrent else WindowFeed
    self.feed = feed(config, self.lm, corpus.splits, corpus.boundary_id, self.mesh)
    self.main = parallel.is_main_process()  # Only process 0 writes the run's own files.
    self.checkpoints, self.writer, self.lock = open_workdir(config, corpus, self.main)
    try:  # A refused checkpoint must not keep the workdir locked in this process.
      self.state, self.progress = self.start_or_resume()
    except BaseException:
      self.close()
      raise
    self.started = time.perf_counter()
    self.compiled = False
    self.wall_before = self.progress['wall_seconds']

  def start_or_resume(self):
    """(state, progress): the newest good checkpoint's, or a new run's."""
    init_rng, self.step_rng = jax.random.split(jax.random.key(self.config.seed))
    state = self.feed.create_state(init_rng, make_optimizer(self.config))
    restored = self.checkpoints.restore_latest(abstract_of(state))
    if restored is None:
      return state, new_progress()
    log.info('Resumed from %s at step %d.', self.workdir, int(restored[0].step))
    return restored

  def close(self) -> None:
    self.writer.close()
    self.lock.release()

  def evaluate(self, name: str, params=None) -> dict:
    return self.feed.evaluate(self.state.params if params is None else params, name)

  def save(self, best: bool = False) -> None:
    """Checkpoints the current state, which must be finite: the last good one is kept."""
    step = int(self.state.step)
    if not _all_finite(self.state.params):
      raise self.diverged(f'the parameters are not finite at step {step}')
    self.progress['wall_seconds'] = self.wall_before + time.perf_counter() - self.started
    (self.checkpoints.save_best if best else self.checkpoints.save_latest)(
        step, self.state, self.progress)

  def diverged(self, what: str) -> TrainingDiverged:
    kept = self.checkpoints.latest_step
    where = (f'the last good checkpoint (step {kept}) is kept in {self.workdir}'
             if kept is not None else 'no checkpoint had been saved yet')
    return TrainingDiverged(f'Training diverged: {what}; {where}. '
                            'Lower --learning_rate (or --lr_decay) and rerun in a new --workdir.')

  def train(self, stop: StopRequests) -> str:
    """Runs epochs until the bound, early stopping, --max_steps or a stop request."""
    config, progress = self.config, self.progress
    steps_per_epoch = self.feed.steps_per_epoch
    if config.max_steps and int(self.state.step) >= config.max_steps:
      return 'max_steps'  # Resumed from a run that had already taken them all.
    while progress['epochs_done'] < config.epochs and not progress['stopped_early']:
      epoch = progress['epochs_done']
      status = self.train_epoch(epoch, steps_per_epoch, stop)
      if status != 'epoch_done':
        self.save()
        return status
      self.end_epoch(epoch)
    return 'early_stopped' if progress['stopped_early'] else 'epochs_done'

  def train_epoch(self, epoch: int, steps_per_epoch: int, stop: StopRequests) -> str:
    config, progress = self.config, self.progress
    step = int(self.state.step)
    start = step - epoch * steps_per_epoch
    self.state, batches = self.feed.start_epoch(self.state, epoch, start)
    bar = tqdm(batches, total=steps_per_epoch, initial=start, desc=f'epoch {epoch + 1}',
               unit='step', disable=None, leave=False)
    clock, examples = time.perf_counter(), 0
    for batch, batch_examples in bar:
      self.state, loss = self.feed.step(self.state, batch, self.step_rng)
      step, examples = step + 1, examples + batch_examples
      if not self.compiled:  # Throughput counts updates, not the compilation before them.
        jax.block_until_ready(loss)
        self.compiled, clock, examples = True, time.perf_counter(), 0
      at_log = step % config.log_every == 0
      at_checkpoint = step % config.checkpoint_every == 0 and step % steps_per_epoch != 0
      out_of_steps = config.max_steps and step >= config.max_steps
      stopping = parallel.agreed_stop(stop.is_set(), at_log or at_checkpoint)
      if at_log or at_checkpoint or out_of_steps or stopping:
        loss = float(loss)  # Waits for the step: the clock below is honest.
        if exploded(loss, self.corpus.vocab.size):
          raise self.diverged(f'the training loss is {loss} at step {step}')
        seconds = time.perf_counter() - clock
        progress['train_seconds'] += seconds
        progress['train_examples'] += examples
        rate = examples / max(seconds, 1e-9)
        clock, examples = time.perf_counter(), 0
        bar.set_postfix(loss=f'{loss:.3f}', examples_per_s=f'{rate:.0f}')
        if at_log:
          log.info('step %d  epoch %d  loss %.4f  %.0f examples/s', step, epoch + 1, loss,
                   rate)
          self.writer.write('train', step, loss=loss, examples_per_second=rate,
                            learning_rate=learning_rate_at(config, step - 1))
        if stopping:
          return 'interrupted'
        if out_of_steps:
          return 'max_steps'
        if at_checkpoint:
          self.save()
          clock = time.perf_counter()
    jax.block_until_ready(self.state)
    progress['train_seconds'] += time.perf_counter() - clock
    progress['train_examples'] += examples
    return 'epoch_done'

  def end_epoch(self, epoch: int) -> None:
    """Validates, keeps the best state, and decides on early stopping."""
    valid = self.evaluate('valid')
    if exploded(valid['nll'] / valid['tokens'], self.corpus.vocab.size):
      raise self.diverged(f'the validation perplexity is {valid["ppl"]} after epoch {epoch + 1}')
    if record_validation(self.progress, valid['ppl'], self.config.patience):
      self.save(best=True)
    self.writer.write('valid', int(self.state.step), ppl=valid['ppl'], epoch=epoch + 1)
    self.save()

  def summary(self, status: str) -> dict:
    """Exact perplexities of every split with the best parameters (or the last, if none),
    checked like the training loss: a diverged model reports no numbers."""
    best = self.checkpoints.restore_best(abstract_of(self.state))
    if best is None and self.progress['best_epoch'] is not None:
      raise CheckpointError(f'{self.workdir}/best holds no checkpoint, though epoch '
                            f'{self.progress["best_epoch"]} was the best: its parameters are '
                            'lost; train again in a new --workdir.')
    params = self.state.params if best is None else best[0].params
    log.info('final evaluation: %s with the %s parameters', ', '.join(self.corpus.splits),
             'last' if best is None else f'best (step {int(best[0].step)})')
    results = {name: self.evaluate(name, params) for name in self.corpus.splits}
    for name, result in results.items():
      if exploded(result['nll'] / result['tokens'], self.corpus.vocab.size):
        raise self.diverged(f'the final {name} perplexity is {result["ppl"]}')
    return run_summary(status, self.config, self.corpus, self.mesh, self.progress,
                       self.state, results, self.wall_before + time.perf_counter() - self.started)


def open_workdir(config: Config, corpus: Corpus, main: bool):
  """(checkpoints, metrics writer, lock) of config.workdir, locked and claimed for this run
  (or checked against the run it holds); process 0 (`main`) alone locks it and writes its
  vocab.txt and metrics."""
  workdir = Path(config.workdir)
  prepare_workdir(workdir)
  lock = WorkdirLock(workdir)
  if main:
    lock.acquire()
  try:
    claim_workdir(workdir, config, corpus.vocab.fingerprint(), corpus.fingerprint, write=main)
    if main:
      corpus.vocab.save(workdir / 'vocab.txt')  # Ids to words, for reading the model.
    return Checkpoints(workdir, main), MetricsWriter(workdir if main else None), lock
  except BaseException:
    lock.release()
    raise


def new_progress() -> dict:
  """The loop's record of a run, checkpointed with its state (JSON)."""
  return {'epochs_done': 0, 'valid_ppl_history': [], 'best_valid_ppl': None,
          'best_epoch': None, 'stopped_early': False, 'train_examples': 0,
          'train_seconds': 0.0, 'wall_seconds': 0.0}


def record_validation(progress: dict, ppl: float, patience: int) -> bool:
  """Records an epoch's validation perplexity in `progress` and whether it stops the run
  early; returns whether it is the best so far (the caller saves the best state)."""
  progress['epochs_done'] += 1
  progress['valid_ppl_history'].append(ppl)
  improved = progress['best_valid_ppl'] is None or ppl < progress['best_valid_ppl']
  if improved:
    progress['best_valid_ppl'], progress['best_epoch'] = ppl, progress['epochs_done']
  since_best = progress['epochs_done'] - progress['best_epoch']
  progress['stopped_early'] = since_best >= patience
  log.info('epoch %d  valid perplexity %.2f%s', progress['epochs_done'], ppl,
           '  (best)' if improved else f'  ({since_best} epochs since the best)')
  return improved


def run_summary(status: str, config: Config, corpus: Corpus, mesh, progress: dict, state,
                results: dict, wall_seconds: float) -> dict:
  """summary.json of a run: its exact perplexities (`results`, per split), how it went, and
  on what."""
  stats, train_seconds = corpus.stats, progress['train_seconds']
  return {
      'status': status,
      'dataset': config.dataset,
      'data_fingerprint': corpus.fingerprint,
      'vocab_size': corpus.vocab.size,
      'tokens': {name: stats[name]['tokens'] for name in results},
      'unk_rate': {name: stats[name]['unk_rate'] for name in results},
      **{f'{name}_ppl': results[name]['ppl'] for name in results},
      **({'bpc': {name: bits_per_token(results[name]) for name in results}}
         if config.tokens == 'chars' else {}),
      'nll': {name: results[name]['nll'] for name in results},
      'epochs': progress['epochs_done'],
      'best_epoch': progress['best_epoch'],
      'valid_ppl_history': progress['valid_ppl_history'],
      'steps': int(state.step),
      'parameters': sum(x.size for x in jax.tree.leaves(  # Padding rows are not the model's.
          parallel.unpadded_output_rows(state.params, corpus.vocab.size))),
      'wall_seconds': wall_seconds,
      'train_seconds': train_seconds,
      'train_examples_per_second': progress['train_examples'] / max(train_seconds, 1e-9),
      'device': str(jax.devices()[0].device_kind),
      'devices': {'count': jax.device_count(), 'processes': jax.process_count(),
                  'mesh': dict(mesh.shape)},
      'config': config.to_dict(),
  }


def bits_per_token(result: dict) -> float:
  """Σ -log2 p / tokens: bits per character for a character-level model."""
  return result['nll'] / result['tokens'] / math.log(2)


def train_and_evaluate(config: Config, corpus: Corpus) -> dict:
  """Trains (or resumes) in `config.workdir` and returns the summary (also summary.json).

  A run stopped by SIGTERM/Ctrl-C returns {'status': 'interrupted', ...} after saving a
  checkpoint; rerunning with the same workdir continues it to the same final numbers.
  """
  config.validate()
  run = _Run(config, corpus)
  try:
    with stop_requests() as stop:
      status = run.train(stop)
      if status != 'interrupted':
        stop.at_once = True
        try:
          summary = run.summary(status)
        except RunInterrupted:
          status = 'interrupted'
    if status == 'interrupted':
      return {'status': status, 'steps': int(run.state.step), 'workdir': str(run.workdir)}
    if run.main:
      write_json_atomically(run.workdir / 'summary.json', summary)
      plots.learning_curve(run.workdir)
    log.info('valid perplexity %.2f  test perplexity %.2f  (|V| = %d)',
                 summary['valid_ppl'], summary['test_ppl'], summary['vocab_size'])
    return summary
  finally:
    run.close()


def run(config: Config, corpus: Corpus | None = None) -> dict:
  """Loads the corpus the config names (--dataset; unless given) and trains on it."""
  config = config.resolved().validate()
  parallel.initialize_processes(config)
  if corpus is None:
    log.info('loading --dataset=%s (%s)', config.dataset, config.tokens)
    corpus = parallel.main_process_first(lambda: load_dataset(config))
  return train_and_evaluate(config, corpus)
