"""What every feed shares: the train state laid out over the mesh, the compiled steps, the
optimizer, the lazy decay's payment, and the exact per-token log-probs of a split.

A feed serves one model family (nplm.training.families) to the loop (nplm.training.loop)
and to the readers of a trained model (nplm.use.trained). Its family supplies:
  example(config, lm)   one example's inputs: the shapes the parameters are initialized for
  prepare_training(ids) its training data on the devices; returns the updates per epoch
  start_epoch           the batches of (epoch, start), and step_data: a batch as the train
                        step's data arguments, laid out over the mesh as `batch_layout` says
  update                one update, traced: (state, *data, run key) -> (state, loss)
  placed, score         a split as its scoring pass reads it; the exact log-probs of one
                        batch, traced (its data arguments laid out as `scoring_layout` says);
                        scoring_pass, if the pass is not over eval batches of positions;
                        placed_prefix, if a split's first tokens are not scored as the
                        split cut there (windows that read later tokens)

K models of one shape may be trained together (nplm.trainer.run of a list): their states are
stacked along a leading axis, replicated, and one compiled step updates all of them with
`jax.vmap`, every model reading the same batch with the hyperparameters its own optimizer
state holds (nplm.training.optimizer).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax.training import train_state

from nplm import host_memory, parallel, sparse_rows, stop_requests
from nplm.data import batching
from nplm.display import progress as show_progress
from nplm.errors import ConfigError
from nplm.training import optimizer


def prefix_name(split: str, tokens: int) -> str:
  """The name of a split's first `tokens` tokens placed as a split of their own."""
  return f'{split}[:{tokens}]'


def masked_mean(losses, mask):
  """The losses averaged over the batch's real examples (mask 1)."""
  return jnp.sum(jnp.where(mask > 0, losses, 0.0)) / jnp.maximum(jnp.sum(mask), 1.0)


class Feed:
  """A model family's data, steps and states, as the loop and the readers use them. Without
  a 'train' split it has no epochs: it scores (nplm.use.trained), or its compiled step is
  given the caller's data (experiments/benchmarks)."""

  batch_axes = None  # State fields split over 'data' by example (nplm.parallel.state_maker).
  batch_layout: tuple  # Per data argument of the train step: None replicated, or 'data'.
  # Per data argument: whether each update reads its own (stacked when several updates run
  # in one call: `steps`, under --updates_per_call) or every update the same array (a split
  # placed once).
  per_update: tuple
  scoring_layout: tuple  # The same for the scoring step's data arguments.
  scoring_unit = 'batch'  # What its progress lines count.
  trains_together = True  # K models of one shape in one vmapped step.
  # Whether --updates_per_call=0 may choose several updates a call: their numbers are one a
  # call's to the last bit (tests/test_updates_per_call.py). Not the stream feed's: the
  # Transformer's move in the last bits, and the LSTM's 150 ms updates gain nothing.
  chooses_updates_per_call = False

  @classmethod
  def cpu_devices(cls, config) -> int:
    """The CPU devices its update wants when the config names no mesh (nplm.parallel.
    request_cpu_devices): one, where XLA spreads each operation over the cores itself."""
    del config
    return 1

  @classmethod
  def example_span(cls, config) -> tuple[str, int, str]:
    """(the flag that sets it, the tokens one training example reads, what it reads), for
    the refusal of a train split shorter than one example (run_checks.check_corpus)."""
    raise NotImplementedError

  @classmethod
  def epoch_examples(cls, config, lm, train: int) -> tuple[str, int, int, str, int]:
    """(the batch as said, what it holds, what an epoch of `train` tokens holds, of what,
    the largest useful --batch_size), in what --batch_size counts for this feed (Config's
    help), for the warning of a batch larger than an epoch (run_checks.check_corpus)."""
    raise NotImplementedError

  @classmethod
  def host_scratch_words(cls, config, lm, mesh) -> int:
    """The words (float32) a train step takes on each device beside XLA's buffers, which
    `lm.model.activation_words` counts (nplm.training.memory): none; word2vec's compiled
    update takes some."""
    del config, lm, mesh
    return 0

  @classmethod
  def data_words(cls, config, split_sizes: dict, data: int) -> int:
    """The words (int32) of the splits (`split_sizes`: tokens) this feed keeps on each of
    the `data` devices (nplm.training.memory)."""
    raise NotImplementedError

  def __init__(self, config, lm, splits: dict, boundary_id: int, mesh=None,
               num_models: int = 1, prefixes: dict[str, int] | None = None):
    """`prefixes` {split: tokens}: the first tokens of those splits placed too, once, as
    the splits prefix_name(split, tokens) (the epoch-end validation's part of valid)."""
    self.config, self.lm, self.boundary_id, self.num_models = config, lm, boundary_id, num_models
    self.mesh = mesh or parallel.make_mesh()
    parallel.check_divides('--batch_size', config.batch_size, self.mesh)
    if 'data' in self.scoring_layout:  # Its eval batches are split over 'data' too.
      parallel.check_divides('--eval_batch_size', config.eval_batch_size, self.mesh)
    if num_models > 1 and lm.vocab_parallel:
      raise ConfigError('models trained together keep their output rows whole: use a mesh '
                        'with data only (e.g. --mesh=data:8)')
    if 'train' in splits:
      self.steps_per_epoch = self.prepare_training(splits['train'])
    self.splits = {name: self.placed(ids) for name, ids in splits.items()}
    self.sizes = {name: len(ids) for name, ids in splits.items()}
    for name, tokens in (prefixes or {}).items():
      self.splits[prefix_name(name, tokens)] = self.placed_prefix(splits[name], tokens)
      self.sizes[prefix_name(name, tokens)] = tokens
    self.log_prob_step = self.compile_scoring(parallel.sharding(self.mesh))

  def placed_prefix(self, ids, tokens: int):
    """The first `tokens` of a split placed so that each is scored exactly as within the
    whole split: the split cut there, where a token's score reads no later token."""
    return self.placed(ids[:tokens])

  # --- the state: initialized for the family's example, laid out over the mesh ---------

  @classmethod
  def initial_params(cls, config, lm, rng) -> dict:
    """One model's parameters as trained and saved. Through log_prob, which every head
    computes from all its parameters: the heads' full log_probs can be slow op by op (the
    tree walks its levels)."""
    params = lm.init(rng, *cls.example(config, lm), method=lm.log_prob)['params']
    return lm.stored_params(params)

  @classmethod
  def init_state(cls, config, lm, rng, tx) -> train_state.TrainState:
    """One model's initial state, on the default device (create_state lays it out)."""
    return train_state.TrainState.create(apply_fn=lm.apply,
                                         params=cls.initial_params(config, lm, rng), tx=tx)

  @classmethod
  def tables_read(cls, config, lm) -> tuple:
    """The parameters the train step reads by row (nplm.sparse_rows), if it does."""
    if not optimizer.reads_rows(config):
      return ()
    key = jax.random.key(0)
    return sparse_rows.tables_read(
        lambda: lm.init(key, *cls.example(config, lm), key, method=lm.loss))

  @classmethod
  def abstract_state(cls, config, lm) -> train_state.TrainState:
    """One model's initial state (parameters and optimizer state) as shapes and dtypes only:
    `jax.eval_shape` traces the initialization and allocates nothing (nplm.training.memory)."""
    tx = optimizer.make_optimizer(config, cls.tables_read(config, lm))
    return jax.eval_shape(lambda rng: cls.init_state(config, lm, rng, tx), jax.random.key(0))

  @functools.cached_property
  def tables(self) -> tuple:
    return self.tables_read(self.config, self.lm)

  @functools.cached_property
  def tx(self):
    """One optimizer for every state the feed creates: K models' states join as one tree,
    each holding its own hyperparameters (set by the loop: optimizer.with_hyperparameters)."""
    return optimizer.make_optimizer(self.config, self.tables, getattr(self, 'steps_per_epoch',
                                                                      None))

  def create_state(self, rng):
    """One model's initial state, laid out over the mesh."""
    return self.make_state(rng)

  def restore_target(self, rng):
    """The shapes, dtypes and layout of create_state(rng), traced only: no program compiled
    or run, no state held; the target a checkpoint is restored into, as abstract_of of the
    state itself gives it (no weak types)."""
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype,
                                                          sharding=leaf.sharding),
                        self.make_state.trace(rng).out_info)

  @functools.cached_property
  def make_state(self):
    """key -> one model's initial state laid out over the mesh: one program for every state
    the feed creates (K models together each compiled their own: a second each on 2
    cores). The steps are compiled for that layout (K models together: replicated,
    stacked)."""
    host_memory.keep_freed_blocks()  # The steps' temporaries reused, not faulted in anew.
    make_state, sharding = parallel.state_maker(
        lambda rng: self.init_state(self.config, self.lm, rng, self.tx), self.mesh,
        self.lm.vocab_parallel, batch_axes=self.batch_axes)
    if self.num_models > 1:
      sharding = jax.tree.map(lambda _: parallel.sharding(self.mesh), sharding)
    self.train_step = self.compile_update(sharding)
    self.train_steps = self.compile_updates(sharding)  # Compiled only if a call runs it.
    self.log_prob_step = self.compile_scoring(sharding.params)
    pay = functools.partial(optimizer.pay_decay_debts, self.config)
    pay = pay if self.num_models == 1 else jax.vmap(pay)
    self.pay_decay_debts = (jax.jit(pay, donate_argnums=0, out_shardings=sharding)
                            if self.tables else lambda state: state)
    # The same, the states kept: what a periodic checkpoint saves.
    self.settled_copy = (jax.jit(pay, out_shardings=sharding) if self.tables
                         else lambda state: state)
    return make_state

  # --- the compiled steps ------------------------------------------------------------

  def _shardings(self, layout: tuple) -> list:
    return [parallel.sharding(self.mesh, *([axis] if axis else [])) for axis in layout]

  def compile_update(self, state_sharding):
    """The jitted update (states donated): (states, *data, run keys) -> (states, losses);
    over K stacked models when num_models > 1."""
    data = len(self.batch_layout)
    update = (self.update if self.num_models == 1
              else jax.vmap(self.update, in_axes=(0, *[None] * data, 0)))
    replicated = parallel.sharding(self.mesh)
    return jax.jit(update, donate_argnums=0,
                   in_shardings=(state_sharding, *self._shardings(self.batch_layout),
                                 replicated),
                   out_shardings=(state_sharding, replicated))

  def compile_updates(self, state_sharding):
    """Several updates in one call (--updates_per_call): (states, *data, run keys) ->
    (states, losses [updates, ...]), `jax.lax.scan` over the update with the data arguments
    that each update reads its own (per_update) stacked along a leading axis. One call where
    the loop would make several: their dispatch, which sets the rate of a small update on
    an accelerator, paid once (experiments/benchmarks/dispatch.py)."""
    data = len(self.batch_layout)
    update = (self.update if self.num_models == 1
              else jax.vmap(self.update, in_axes=(0, *[None] * data, 0)))

    def updates(state, *arguments):
      *data_arguments, run_rng = arguments
      own = tuple(a for a, each in zip(data_arguments, self.per_update) if each)

      def one(state, slices):
        slices = iter(slices)
        step_data = [next(slices) if each else a
                     for a, each in zip(data_arguments, self.per_update)]
        return update(state, *step_data, run_rng)
      return jax.lax.scan(one, state, own)

    replicated = parallel.sharding(self.mesh)
    stacked = [parallel.sharding(self.mesh, *([None] if each else []), *([axis] if axis else []))
               for axis, each in zip(self.batch_layout, self.per_update)]
    return jax.jit(updates, donate_argnums=0,
                   in_shardings=(state_sharding, *stacked, replicated),
                   out_shardings=(state_sharding, replicated))

  def compile_scoring(self, params_sharding):
    """The jitted `score` (params, *data), over K stacked models when num_models > 1."""
    score = (self.score if self.num_models == 1
             else jax.vmap(self.score, in_axes=(0, *[None] * len(self.scoring_layout))))
    return jax.jit(score, in_shardings=(params_sharding, *self._shardings(self.scoring_layout)),
                   out_shardings=parallel.sharding(self.mesh))

  def step(self, state, batch, run_rng):
    """(state, loss) after one update on a batch of start_epoch: K stacked states and K
    losses for K models."""
    return parallel.wait_on_cpu_devices(self.train_step(state, *self.step_data(batch),
                                                        run_rng))

  def compile_steps(self, state, batch, run_rng, updates: int) -> None:
    """Both programs of `updates` > 1 a call (one update a call, and that many) compiled for
    a batch of this one's shapes, not run (jit reuses them): the loop's first call compiles
    the other too, not a call in the middle of training (2.5 s on a CPU, a seventh of a
    short run's)."""
    self.train_step.lower(state, *self.step_data(batch), run_rng).compile()
    self.compile_several(state, batch, run_rng, updates)

  def compile_several(self, state, batch, run_rng, updates: int) -> None:
    """The program of `updates` updates a call compiled for a batch of this one's shapes,
    not run."""
    self.train_steps.lower(state, *self._stacked([batch] * updates), run_rng).compile()

  def steps(self, state, batches: list, run_rng):
    """(state, losses [len(batches), ...]) after one update on each of `batches` in turn,
    in one call (compile_updates): the same numbers as `step` on each."""
    return parallel.wait_on_cpu_devices(self.train_steps(state, *self._stacked(batches),
                                                         run_rng))

  def _stacked(self, batches: list) -> list:
    """The data arguments of `batches`' updates, each update's own stacked (per_update)."""
    data = [self.step_data(batch) for batch in batches]
    return [np.stack([np.asarray(d[i]) for d in data]) if each else data[0][i]
            for i, each in enumerate(self.per_update)]

  # --- exact log-probs ---------------------------------------------------------------

  def log_probs(self, params, split: str, progress: str = '') -> np.ndarray:
    """Exact log p of every token of the split, in order (float64): [N], or [K, N] for K
    models. `progress` names the pass in progress lines (nplm.display)."""
    return self.scored(params, self.splits[split], self.sizes[split], progress)

  def scored(self, params, data, num_tokens: int, progress: str = '') -> np.ndarray:
    """The scoring pass over a split's `data` (as `placed` gives it), in order (float64)."""
    pieces, count = self.scoring_pass(params, data, num_tokens)
    log_probs, masks = [], []
    for log_p, mask in show_progress(pieces, count, progress, self.scoring_unit):
      log_probs.append(parallel.wait_on_cpu_devices(log_p))
      masks.append(mask)
      stop_requests.pace(log_probs)  # A few queued at most; a stop request ends the pass.
    return np.concatenate([parallel.fetch(log_p)[..., mask > 0]
                           for log_p, mask in zip(log_probs, masks)], axis=-1).astype(np.float64)

  def scoring_pass(self, params, data, num_tokens: int):
    """(the pass's pieces, each (log p [..., b] on the devices, mask [b]); how many): every
    position once, --eval_batch_size at a time split over 'data', the last batch padded."""
    size = batching.pass_batch_size(num_tokens, self.config.eval_batch_size,
                                    8 * self.mesh.shape['data'])
    pieces = ((self.log_prob_step(params, data, parallel.step_input(positions, self.mesh, 'data')), mask)
              for positions, mask in batching.eval_batches(num_tokens, size))
    return pieces, batching.num_batches(num_tokens, size)
