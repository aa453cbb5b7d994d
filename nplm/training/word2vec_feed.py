"""word2vec's models (CBOW, skip-gram) in the loop: subsampled streams, windows, exact scores.

What the word2vec tool and gensim do, as nplm's loop can drive it (the interface of
nplm.training.window_feed.WindowFeed):
- Frequent-word subsampling (the word2vec tool's form of Mikolov et al. 2013b, section 2.3,
  whose Eq. 5 discards with probability 1 - √(t/f)): each epoch, a training token of word w
  is kept with probability min(1, (√(f/tN) + 1)·tN/f), f its training count, N the training
  tokens; the discarded are removed before windows are taken, so windows reach further.
- A dynamic window (Mikolov et al. 2013a, section 3.2): each position draws its radius b
  uniformly from 1 … c, so near words are context more often.
- Windows never cross the ends of a split: slots beyond them are ABSENT, not padding words.

The keep decisions are systematic sampling: the tokens in a random order, their keep
probabilities laid end to end on a line from one random offset, and a token kept where an
integer falls in its stretch. Each token is kept with exactly its probability (to 2^-32), as
by independent draws, but the number kept is the expected number rounded down or up, so
every epoch has the same number of updates (the loop's resumption, progress and the linear
schedule's T count them) and only its last batch can be short (rarely, empty: a zero
gradient, masked like any padding). The draws of epoch e come
from a numpy rng seeded by (--data_seed or --seed, e), with the epoch's shuffle: every
update is rebuilt from its number, and a resumed run is exact.

The host sends each update B positions into the epoch's subsampled stream, which lives on
the device for the epoch; the step draws the radii from its own key and gathers the windows.
Evaluation scores every token of a split with the full window c and no subsampling, by the
model's own exact prediction (`token_log_probs`): not a language model's perplexity.
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax.training import train_state

from nplm import parallel
from nplm.training import optimizer
from nplm.training import sparse_rows
from nplm.training import window_feed
from nplm.data import batching
from nplm.errors import ConfigError
from nplm.heads import OUTPUT_ROW_HEADS
from nplm.models.word2vec import ABSENT
from nplm.perplexity import perplexity

_ONE = 2 ** 32  # Keep probabilities in fixed point: exact integer sums over the stream.


def keep_probabilities(counts: np.ndarray, subsample: float) -> np.ndarray:
  """min(1, (√(f/tN) + 1)·tN/f) per word [|V|] (1 for a word never seen, or with t = 0),
  f its training count, N the training tokens, t = `subsample`."""
  counts = np.asarray(counts, np.float64)
  if subsample == 0:
    return np.ones_like(counts)
  threshold = subsample * counts.sum()
  ratio = counts / threshold
  with np.errstate(divide='ignore'):
    keep = (np.sqrt(ratio) + 1.0) / ratio
  return np.where(counts > 0, np.minimum(keep, 1.0), 1.0)


class Subsampler:
  """The tokens of a training split kept in each epoch."""

  def __init__(self, ids: np.ndarray, subsample: float):
    if len(ids) >= 2 ** 31:
      raise ConfigError(f'subsampling sums keep probabilities of at most 2^31 tokens; the '
                        f'training split has {len(ids):,}')
    self.ids = np.asarray(ids, np.int32)
    counts = np.bincount(self.ids)
    self.keep = keep_probabilities(counts, subsample)
    self.fixed_keep = np.round(self.keep * _ONE).astype(np.int64)
    self.subsampled = bool(np.any(self.fixed_keep < _ONE))
    # The number kept is ⌊(Σ p + u)⌋ for an offset u in [0, 1): at most ⌈Σ p⌉.
    self.max_kept = -(-int(self.fixed_keep[self.ids].sum()) // _ONE)

  def keep_mask(self, rng: np.random.Generator) -> np.ndarray:
    """Which tokens of the split are kept this epoch, [N] bool."""
    if not self.subsampled:
      return np.ones(len(self.ids), bool)
    order = rng.permutation(len(self.ids))
    stretches = self.fixed_keep[self.ids[order]]
    ends = np.cumsum(stretches) + rng.integers(_ONE)
    crossed = (ends // _ONE) > ((ends - stretches) // _ONE)  # An integer in (end - p, end].
    keep = np.empty(len(self.ids), bool)
    keep[order] = crossed
    return keep


def padded_stream(ids: np.ndarray, window: int, length: int) -> np.ndarray:
  """ABSENT × c, the ids, then ABSENT up to `length` + 2c in all: position t's word is at
  t + c, and a window never reads past the split's ends."""
  stream = np.full(length + 2 * window, ABSENT, np.int32)
  stream[window:window + len(ids)] = ids
  return stream


def window_radii(rng, batch: int, window: int) -> jnp.ndarray:
  """b per position, uniform in 1 … c (Mikolov et al. 2013a, section 3.2)."""
  return jax.random.randint(rng, (batch,), 1, window + 1)


def context_windows(stream, positions, radii, window: int):
  """The words at offsets -c … -1, 1 … c of each position [B, 2c], ABSENT beyond the
  position's radius or the split's ends; and the words at the positions [B]."""
  offsets = np.concatenate([np.arange(-window, 0), np.arange(1, window + 1)])
  centers = positions + window  # Into the padded stream.
  words = stream[centers[:, None] + offsets]
  in_radius = np.abs(offsets) <= radii[:, None]
  return jnp.where(in_radius, words, ABSENT), stream[centers]


def make_train_step(lm, config, mesh, state_sharding, num_models: int = 1):
  """The jitted update (states donated): (states, hyperparameters, stream, positions, mask,
  run keys) -> (states, losses); over K stacked models when num_models > 1."""
  model = lm.model

  def update(state, hyperparameters, stream, positions, mask, run_rng):
    window_rng, head_rng = jax.random.split(jax.random.fold_in(run_rng, state.step))
    radii = window_radii(window_rng, positions.shape[0], config.window)
    windows, centers = context_windows(stream, positions, radii, config.window)
    context, targets, examples = model.examples(windows, centers, mask)
    loss, grads, rows = window_feed.loss_and_grads(lm, config, state, context, targets,
                                                       examples, head_rng)
    return optimizer.apply_gradients(config, state, grads, hyperparameters, rows), loss

  step = update if num_models == 1 else jax.vmap(update, in_axes=(0, 0, None, None, None, 0))
  replicated, batch = parallel.sharding(mesh), parallel.sharding(mesh, 'data')
  return jax.jit(step, donate_argnums=0,
                 in_shardings=(state_sharding, replicated, replicated, batch, batch,
                               replicated),
                 out_shardings=(state_sharding, replicated))


def make_log_prob_step(lm, window: int, mesh, params_sharding=None, num_models: int = 1,
                       whole_distribution: bool = False):
  """The jitted model's own exact log-prob of each position (full window): [B], or [K, B];
  `whole_distribution` as the models' token_log_probs take it."""

  def per_token(bound, windows, centers):
    return bound.model.token_log_probs(bound.head, windows, centers, whole_distribution)

  def log_probs(params, stream, positions):
    radii = jnp.full(positions.shape, window)
    windows, centers = context_windows(stream, positions, radii, window)
    return lm.apply(lm.variables_of(params), windows, centers, method=per_token)

  step = log_probs if num_models == 1 else jax.vmap(log_probs, in_axes=(0, None, None))
  replicated = parallel.sharding(mesh)
  return jax.jit(step, in_shardings=(params_sharding or replicated, replicated,
                                     parallel.sharding(mesh, 'data')),
                 out_shardings=replicated)


def _example(model, window: int):
  """One position's (context, target) for initialization: the shapes its model reads."""
  windows, centers = jnp.zeros((1, 2 * window), jnp.int32), jnp.zeros(1, jnp.int32)
  context, targets, _ = model.examples(windows, centers, jnp.ones(1))
  return context, targets


def tables_read(config, lm) -> tuple:
  """The parameters the train step reads by row (nplm.training.sparse_rows), if it does."""
  if not optimizer.reads_rows(config):
    return ()
  key, (context, targets) = jax.random.key(0), _example(lm.model, config.window)
  return sparse_rows.tables_read(lambda: lm.init(key, context, targets, key, method=lm.loss))


def init_state(config, lm, rng, tx) -> train_state.TrainState:
  """One model's initial state on the default device (Word2VecFeed.create_state lays it
  out)."""
  context, targets = _example(lm.model, config.window)
  params = lm.init(rng, context, targets, method=lm.log_prob)['params']
  return train_state.TrainState.create(apply_fn=lm.apply, params=lm.stored_params(params),
                                       tx=tx)


def abstract_state(config, lm) -> train_state.TrainState:
  """One model's initial state as shapes and dtypes only: `jax.eval_shape` traces the
  initialization and allocates nothing (nplm.training.memory)."""
  tx = optimizer.make_optimizer(config, tables_read(config, lm))
  return jax.eval_shape(lambda rng: init_state(config, lm, rng, tx), jax.random.key(0))


class Word2VecFeed:
  """What the loop needs for a word2vec model: states, subsampled batches, steps, scores."""

  recurrent = False

  def __init__(self, config, lm, splits: dict, boundary_id: int, mesh=None,
               num_models: int = 1):
    del boundary_id  # Windows stop at a split's ends: nothing is read before its start.
    mesh = mesh or parallel.make_mesh()
    parallel.check_divides('--batch_size', config.batch_size, mesh)
    parallel.check_divides('--eval_batch_size', config.eval_batch_size, mesh)
    if num_models > 1 and lm.vocab_parallel:
      raise ConfigError('models trained together keep their output rows whole: use a mesh '
                        'with data only (e.g. --mesh=data:8)')
    self.config, self.lm, self.mesh, self.num_models = config, lm, mesh, num_models
    self.subsampler = Subsampler(splits['train'], config.subsample)
    self.splits = {name: parallel.put(padded_stream(ids, config.window, len(ids)), mesh)
                   for name, ids in splits.items()}
    self.sizes = {name: len(ids) for name, ids in splits.items()}
    self.steps_per_epoch = batching.num_batches(self.subsampler.max_kept, config.batch_size)
    self.tables = tables_read(config, lm)
    self.tx = optimizer.make_optimizer(config, self.tables)

  def init_state(self, rng):
    """One model's initial state on the default device (create_state lays it out)."""
    return init_state(self.config, self.lm, rng, self.tx)

  def create_state(self, rng):
    """One model's initial state, laid out over the mesh; the steps are compiled for that
    layout (K models together: replicated, stacked)."""
    state, sharding = parallel.create_state(self.init_state, rng, self.mesh,
                                            self.lm.vocab_parallel)
    if self.num_models > 1:
      sharding = jax.tree.map(lambda _: parallel.sharding(self.mesh), sharding)
    self.train_step = make_train_step(self.lm, self.config, self.mesh, sharding,
                                      self.num_models)
    # Heads whose log_prob normalizes over every output row score a position's context
    # words from one distribution; the tree, class and adaptive heads score each pair.
    self.log_prob_step = make_log_prob_step(self.lm, self.config.window, self.mesh,
                                            sharding.params, self.num_models,
                                            self.config.head in OUTPUT_ROW_HEADS)
    settle = optimizer.pay_decay_debts if self.num_models == 1 else jax.vmap(optimizer.pay_decay_debts)
    self.pay_decay_debts = (jax.jit(settle, donate_argnums=0, out_shardings=sharding) if self.tables
                   else lambda state: state)
    return state

  def epoch_stream(self, epoch: int):
    """(the epoch's subsampled stream, padded to a fixed length; its shuffled positions)."""
    rng = np.random.default_rng([self.config.batch_order_seed, epoch])
    kept = self.subsampler.ids[self.subsampler.keep_mask(rng)]
    stream = padded_stream(kept, self.config.window, self.subsampler.max_kept)
    return stream, rng.permutation(len(kept))

  def start_epoch(self, state, epoch: int, start: int):
    """The state to continue with and the epoch's batches from batch `start` on, each
    (arguments of the step, center positions in it)."""
    stream, order = self.epoch_stream(epoch)
    stream = parallel.put(stream, self.mesh)
    batch_size = self.config.batch_size

    def batches():
      for index in range(start, self.steps_per_epoch):
        chunk = order[index * batch_size:(index + 1) * batch_size]
        positions, mask = np.zeros(batch_size, np.int32), np.zeros(batch_size, np.float32)
        positions[:len(chunk)], mask[:len(chunk)] = chunk, 1.0
        yield (stream, positions, mask), len(chunk)

    return state, batches()

  def step(self, state, batch, run_rng, hyperparameters=None):
    """(state, loss) after one update: K stacked states and K losses for K models, each
    with its own `hyperparameters` (nplm.training.optimizer.hyperparameters_of; default: the
    config's)."""
    hyperparameters = hyperparameters or optimizer.hyperparameters_of([self.config],
                                                                      self.steps_per_epoch)
    stream, positions, mask = batch
    positions, mask = (parallel.put(array, self.mesh, 'data') for array in (positions, mask))
    return parallel.wait_on_cpu_devices(self.train_step(state, hyperparameters, stream, positions, mask,
                                           run_rng))

  def log_probs(self, params, split: str, progress: str = '') -> np.ndarray:
    """The model's own exact log-prob of every token of the split, in order: [N], or [K, N]
    for K models (CBOW: log p(w_t | its ±c words); skip-gram: the mean over them of
    log p(w_{t+j} | w_t))."""
    return window_feed.split_log_probs(self.log_prob_step, params, self.splits[split],
                                           self.sizes[split], self.config.eval_batch_size,
                                           self.mesh, progress)

  def evaluate(self, params, split: str) -> dict:
    """exp(-mean) of the split's log_probs (one model): not a language model's perplexity."""
    return perplexity(-np.sum(self.log_probs(params, split)), self.sizes[split])
