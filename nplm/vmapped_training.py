"""Many feed-forward models of one shape trained together: one compiled step, vmapped.

Small models such as the NNLM leave an accelerator mostly idle. K models that differ only in
PER_MODEL_FIELDS (seed, learning rate, its decay, weight decay) stack their parameters and
optimizer states along a leading axis, and one jit-compiled step updates all K with
`jax.vmap`. Every model reads the same batch: they share one --data_seed.

Each model keeps a workdir of its own, laid out as nplm.train lays out a run (run.json,
checkpoints, metrics, summary.json, learning_curve.png), so the tools that read a workdir
read these and nplm.train can go on with one alone. Each stops on its own: once its
validation perplexity has not improved for --patience epochs, or its loss stops being
finite, it is saved no more while the others go on. A model trained here equals the
same config trained alone (tests/test_vmapped_training.py).
"""

import functools
import logging
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from nplm import models, parallel, plots, train
from nplm.checkpoint import IncompatibleCheckpointError, abstract_of
from nplm.config import Config, ConfigError
from nplm.data import batching
from nplm.data.corpus import Corpus
from nplm.files import write_json_atomically
from nplm.lm import build_language_model
from nplm.window_training import WindowFeed, batch_loss, batch_nll, create_state, exact_nll
from nplm.perplexity import exploded, perplexity
from nplm.train import StopRequests

log = logging.getLogger(__name__)

# The fields in which models trained together may differ; each traces its own values.
PER_MODEL_FIELDS = ('seed', 'learning_rate', 'lr_decay', 'weight_decay', 'workdir')
HYPERPARAMETERS = ('learning_rate', 'lr_decay', 'weight_decay')


def check_together(configs: list[Config]) -> list[Config]:
  """The configs, validated; ConfigError if they cannot be trained as one program."""
  if not configs:
    raise ConfigError('no models to train together')
  configs = [config.validate() for config in configs]
  for name, value in configs[0].to_dict().items():
    values = sorted({repr(getattr(config, name)) for config in configs})
    if name not in PER_MODEL_FIELDS and len(values) > 1:
      raise ConfigError(f'models trained together differ only in {", ".join(PER_MODEL_FIELDS)}; '
                        f'their --{name} differ: {", ".join(values)}')
  if len({config.batch_order_seed for config in configs}) > 1:
    raise ConfigError('models trained together read the same batches: give them one '
                      '--data_seed (their --seed differ)')
  if configs[0].model in models.RECURRENT_MODELS:
    raise ConfigError(f'training together is for feed-forward models (--model=nnlm), not '
                      f'--model={configs[0].model}; train recurrent models one by one')
  workdirs = [Path(config.workdir).resolve() for config in configs]
  if len(set(workdirs)) < len(workdirs):
    raise ConfigError('each model trained together needs a --workdir of its own')
  return configs


def _member(tree, k: int):
  return jax.tree.map(lambda leaf: leaf[k], tree)


def make_steps(lm, config: Config, mesh):
  """The jitted steps over K stacked models: train (states donated) and eval (each model's
  sum of exact NLLs).

  A model that has stopped goes on being updated in memory, never saved again: masking its
  update out would cost a pass over every state each step (a quarter of the step of one
  MLP9 at batch 32 on a CPU), and its share of the vmapped work is spent either way."""

  def train_step(states, hyperparameters, padded_split, positions, mask, run_rngs):
    context, targets = batching.windows(padded_split, positions, config.order)

    def update(state, hyperparameters, run_rng):
      rng = jax.random.fold_in(run_rng, state.step)  # As nplm.window_training, per model.
      loss, grads = jax.value_and_grad(
          lambda params: batch_loss(lm, params, context, targets, mask, rng))(state.params)
      tx = train.make_optimizer(config, **hyperparameters)
      return state.replace(tx=tx).apply_gradients(grads=grads).replace(tx=state.tx), loss

    return jax.vmap(update)(states, hyperparameters, run_rngs)

  def eval_step(params, padded_split, positions, mask):
    context, targets = batching.windows(padded_split, positions, config.order)
    return jax.vmap(lambda one: batch_nll(lm, one, context, targets, mask))(params)

  replicated, batch = parallel.sharding(mesh), parallel.sharding(mesh, 'data')
  return (jax.jit(train_step, donate_argnums=0,
                  in_shardings=(replicated,) * 3 + (batch, batch, replicated),
                  out_shardings=(replicated, replicated)),
          jax.jit(eval_step, in_shardings=(replicated, replicated, batch, batch),
                  out_shardings=replicated))


def initial_states(configs: list[Config], lm, mesh):
  """(each model's initial state, as nplm.train creates it from its seed; their stacked
  step keys; their stacked optimizer hyperparameters)."""
  tx = train.make_optimizer(configs[0])  # The structure; each model's values are traced.
  make_state = functools.partial(create_state, configs[0], lm, tx=tx)
  states, run_rngs = [], []
  for config in configs:
    init_rng, run_rng = jax.random.split(jax.random.key(config.seed))
    states.append(parallel.create_state(make_state, init_rng, mesh, False)[0])
    run_rngs.append(run_rng)
  hyperparameters = {name: jnp.asarray([getattr(c, name) for c in configs], jnp.float32)
                     for name in HYPERPARAMETERS}
  return states, jnp.stack(run_rngs), hyperparameters


def stack(trees):
  """Trees of one structure as one, each leaf with a new leading axis (the model)."""
  return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


class _Member:
  """One model's workdir: its identity, checkpoints, metrics and progress."""

  def __init__(self, config: Config, corpus: Corpus, main: bool):
    self.config, self.workdir = config, Path(config.workdir)
    self.checkpoints, self.writer, self.lock = train.open_workdir(config, corpus, main)
    self.progress = train.new_progress()
    self.diverged = ''  # What went wrong, once its loss or parameters stop being finite.

  @property
  def training(self) -> bool:
    progress = self.progress
    return (not self.diverged and not progress['stopped_early']
            and progress['epochs_done'] < self.config.epochs)

  def status(self, loop_status: str) -> str:
    if self.diverged:
      return 'diverged'
    return 'early_stopped' if self.progress['stopped_early'] else loop_status

  def close(self) -> None:
    self.writer.close()
    self.lock.release()


class _Together:
  """K models trained in one program, each with its own workdir."""

  def __init__(self, configs: list[Config], corpus: Corpus):
    self.configs, self.corpus, self.config = configs, corpus, configs[0]
    self.mesh = parallel.make_mesh(self.config.mesh)
    if self.mesh.shape['model'] > 1:
      raise ConfigError('models trained together keep their output rows whole: use a mesh '
                        'with data only (e.g. --mesh=data:8)')
    self.lm = build_language_model(self.config, corpus.vocab.counts, self.mesh)
    self.feed = WindowFeed(self.config, self.lm, corpus.splits, corpus.boundary_id, self.mesh)
    self.main = parallel.is_main_process()
    self.members = []
    try:  # A refused workdir or checkpoint must not keep the others locked in this process.
      for config in configs:
        self.members.append(_Member(config, corpus, self.main))
      states = self._start_or_resume(configs)
    except BaseException:
      self.close()
      raise
    self.template = states[0]
    self.states = stack(states)
    self.train_step, self.eval_step = make_steps(self.lm, self.config, self.mesh)
    self.started, self.compiled = time.perf_counter(), False
    self.wall_before = [member.progress['wall_seconds'] for member in self.members]

  def _start_or_resume(self, configs: list[Config]) -> list:
    """Each model's state (its newest good checkpoint's, or a new one); sets the step."""
    states, self.run_rngs, self.hyperparameters = initial_states(configs, self.lm, self.mesh)
    for k, member in enumerate(self.members):
      restored = member.checkpoints.restore_latest(abstract_of(states[k]))
      if restored is not None:
        states[k], member.progress = restored
    self.step = self._common_step(states)
    return states

  def _common_step(self, states) -> int:
    """The step every model still training is at: they train in lockstep."""
    steps = {int(state.step) for member, state in zip(self.members, states) if member.training}
    if len(steps) > 1:
      behind = [str(m.workdir) for m, s in zip(self.members, states)
                if m.training and int(s.step) < max(steps)]
      raise IncompatibleCheckpointError(
          f'the models to train together were saved at different steps ({sorted(steps)}); '
          f'finish {", ".join(behind)} alone (nplm train with its config and '
          'workdir), or delete those workdirs to train them from the start')
    return steps.pop() if steps else int(states[0].step)

  def close(self) -> None:
    for member in self.members:
      member.close()

  def training(self) -> list[int]:
    return [k for k, member in enumerate(self.members) if member.training]

  def save(self, k: int, best: bool = False) -> None:
    member, state = self.members[k], _member(self.states, k)
    member.progress['wall_seconds'] = self.wall_before[k] + time.perf_counter() - self.started
    (member.checkpoints.save_best if best else member.checkpoints.save_latest)(
        int(state.step), state, member.progress)

  def diverge(self, k: int, what: str) -> None:
    """Stops model k for good; its last good checkpoint stays, the others go on."""
    member = self.members[k]
    kept = member.checkpoints.latest_step
    member.diverged = (f'Training diverged: {what}; the last good checkpoint '
                       f'({"none" if kept is None else f"step {kept}"}) is kept in '
                       f'{member.workdir}. Lower its --learning_rate and train it again.')
    log.warning('%s', member.diverged)

  def train(self, stop: StopRequests) -> str:
    """Runs epochs until every model has stopped, --max_steps, or a stop request."""
    if self.config.max_steps and self.step >= self.config.max_steps:
      return 'max_steps'
    while self.training():
      epoch = self.members[self.training()[0]].progress['epochs_done']
      status = self.train_epoch(epoch, stop)
      if status != 'epoch_done':
        for k in self.training():
          self.save(k)
        return status
      self.end_epoch(epoch)
    return 'epochs_done'

  def train_epoch(self, epoch: int, stop: StopRequests) -> str:
    config, steps_per_epoch = self.config, self.feed.steps_per_epoch
    _, batches = self.feed.start_epoch(None, epoch, self.step - epoch * steps_per_epoch)
    bar = tqdm(batches, total=steps_per_epoch, initial=self.step - epoch * steps_per_epoch,
               desc=f'epoch {epoch + 1} ({len(self.training())} models)', unit='step',
               disable=None, leave=False)
    clock, examples = time.perf_counter(), 0
    for (positions, mask), batch_examples in bar:
      self.states, losses = parallel.settle(self.train_step(
          self.states, self.hyperparameters, self.feed.splits['train'],
          parallel.put(positions, self.mesh, 'data'), parallel.put(mask, self.mesh, 'data'),
          self.run_rngs))
      self.step, examples = self.step + 1, examples + batch_examples
      if not self.compiled:  # Throughput counts updates, not the compilation before them.
        jax.block_until_ready(losses)
        self.compiled, clock, examples = True, time.perf_counter(), 0
      at_log = self.step % config.log_every == 0
      at_checkpoint = self.step % config.checkpoint_every == 0 and self.step % steps_per_epoch != 0
      out_of_steps = config.max_steps and self.step >= config.max_steps
      stopping = parallel.agreed_stop(stop.is_set(), at_log or at_checkpoint)
      if at_log or at_checkpoint or out_of_steps or stopping:
        seconds = time.perf_counter() - clock
        self.record(parallel.fetch(losses), examples, seconds, at_log)
        clock, examples = time.perf_counter(), 0
        if stopping:
          return 'interrupted'
        if out_of_steps:
          return 'max_steps'
        if at_checkpoint:
          for k in self.training():
            self.save(k)
          clock = time.perf_counter()
        if not self.training():
          return 'epoch_done'
    jax.block_until_ready(self.states)
    for k in self.training():
      self.members[k].progress['train_seconds'] += time.perf_counter() - clock
      self.members[k].progress['train_examples'] += examples
    return 'epoch_done'

  def record(self, losses: np.ndarray, examples: int, seconds: float, at_log: bool) -> None:
    """Each training model's progress and log record; a model whose loss is not finite
    stops (its state of this step is not saved)."""
    rate = examples / max(seconds, 1e-9)
    for k in self.training():
      member, loss = self.members[k], float(losses[k])
      if exploded(loss, self.corpus.vocab.size):
        self.diverge(k, f'the training loss is {loss} at step {self.step}')
        continue
      member.progress['train_seconds'] += seconds
      member.progress['train_examples'] += examples
      if at_log:
        member.writer.write('train', self.step, loss=loss, examples_per_second=rate,
                            learning_rate=train.learning_rate_at(member.config, self.step - 1))
    if at_log:  # The models still training: a stopped one's slot computes on, unsaved.
      log.info('step %d  losses %s  %.0f examples/s per model', self.step,
               ' '.join(f'{k}:{losses[k]:.3f}' for k in self.training()), rate)

  def end_epoch(self, epoch: int) -> None:
    """Validates every model still training; each keeps its best and decides its stop."""
    training = self.training()
    valid = exact_nll(self.eval_step, self.states.params, self.feed.splits['valid'],
                      self.feed.sizes['valid'], self.config.eval_batch_size, self.mesh)
    for k in training:
      member, ppl = self.members[k], perplexity(valid[k], self.feed.sizes['valid'])['ppl']
      if exploded(valid[k] / self.feed.sizes['valid'], self.corpus.vocab.size):
        self.diverge(k, f'the validation perplexity is {ppl} after epoch {epoch + 1}')
        continue
      if train.record_validation(member.progress, ppl, member.config.patience):
        self.save(k, best=True)
      member.writer.write('valid', self.step, ppl=ppl, epoch=epoch + 1)
      self.save(k)

  def summaries(self, loop_status: str) -> list[dict]:
    """Each model's summary (also its summary.json): exact perplexities of every split with
    its best parameters (its last saved, if none was best yet), read back from its
    checkpoints; a diverged model's is its error and no file."""
    abstract, saved, params = abstract_of(self.template), [], []
    for member in self.members:
      latest = member.checkpoints.restore_latest(abstract)
      best = member.checkpoints.restore_best(abstract)
      saved.append(self.template if latest is None else latest[0])  # None: diverged early.
      params.append(saved[-1].params if best is None else best[0].params)
    stacked = stack(params)
    nll = {name: exact_nll(self.eval_step, stacked, self.feed.splits[name],
                           self.feed.sizes[name], self.config.eval_batch_size, self.mesh)
           for name in self.corpus.splits}
    summaries = []
    for k, member in enumerate(self.members):
      if member.diverged:
        summaries.append({'status': 'diverged', 'error': member.diverged,
                          'workdir': str(member.workdir)})
        continue
      results = {name: perplexity(nll[name][k], self.feed.sizes[name]) for name in nll}
      failed = [name for name in nll if exploded(nll[name][k] / self.feed.sizes[name],
                                                 self.corpus.vocab.size)]
      if failed:
        self.diverge(k, f'the final {failed[0]} perplexity is {results[failed[0]]["ppl"]}')
        summaries.append({'status': 'diverged', 'error': member.diverged,
                          'workdir': str(member.workdir)})
        continue
      summary = train.run_summary(
          member.status(loop_status), member.config, self.corpus, self.mesh, member.progress,
          saved[k], results,
          self.wall_before[k] + time.perf_counter() - self.started)
      summary['trained_together'] = len(self.members)
      if self.main:
        write_json_atomically(member.workdir / 'summary.json', summary)
        plots.learning_curve(member.workdir)
      summaries.append(summary)
    return summaries


def train_together(configs: list[Config], corpus: Corpus) -> list[dict]:
  """Trains (or resumes) K models in one program; one summary per model, in order.

  Stopped by SIGTERM/Ctrl-C, every model still training saves a checkpoint and each
  summary is {'status': 'interrupted', ...}; rerunning the same configs continues them.
  """
  configs = check_together([config.resolved() for config in configs])
  run = _Together(configs, corpus)
  try:
    with train.stop_requests() as stop:
      status = run.train(stop)
      if status != 'interrupted':
        stop.at_once = True
        try:
          return run.summaries(status)
        except train.RunInterrupted:
          status = 'interrupted'
    return [{'status': status, 'steps': run.step, 'workdir': str(m.workdir)}
            for m in run.members]
  finally:
    run.close()
