"""Whether a run fits in memory: an estimate made before anything large is allocated.

nplm.trainer (before a model's state is created and its step compiled) and nplm.use.trained
(before a trained model's parameters are read) call `require_fit`, which refuses what cannot
fit in one ConfigError line: the figure, the memory there is, and the flags whose lowering
cuts the figure most.

The estimate, in bytes per device:
  state        the parameters and the optimizer's state (and a recurrent model's carried
               state), exactly: `jax.eval_shape` traces the initialization without
               allocating, and each leaf counts as much of it as one device holds (output
               rows split over the mesh's 'model' axis); a reader counts the parameters only
  gradients    as large as the parameters (train step)
  data         the splits as the feeds keep them on the devices (int32 ids)
  activations  of the train step and of the evaluation step, by the formula below
  needed = state + data + max(gradients + train-step activations, evaluation activations)
On a CPU every device is host memory: K local devices need K times that, against the
memory this process can have: the least of the host's MemAvailable, the address-space limit
(`ulimit -v`) less what the process maps already, and a cgroup's limit less its use; the
refusal names the one that bounds it. On an
accelerator, one device's share against its memory_stats()['bytes_limit'].

Activations, in 4-byte words (2 in a bfloat16 train step), for B = --batch_size and
E = --eval_batch_size examples per device (split over 'data'). Checked against XLA's own
count of a compiled step's temporaries (tests/test_resources.py): within a factor of 2.
  head, per example scored: 3·S in training (the scores, their softmax or sigmoid, their
    gradient), S in evaluation; S, what the head scores per example: |V| (softmax,
    adaptive, and the exact log p of is, nce, negative_sampling; |V| / the 'model' shards
    when vocabulary-parallel); in evaluation on one shard, the rows one chunk of the
    normalizer scores at once, chunk_rows(E, |V|) (nplm.heads.output_layer: at most
    PLAIN_BYTES for the E examples, else CHUNK_BYTES); the adaptive head's whole layers
    summed, plus its largest chunk of a chunked layer; k+1 in training for is, nce,
    negative_sampling ((k+1)·(D+1) rows gathered with --noise_per_example); the path's depth·(D+1) (tree);
    the classes plus the largest class·(D+1) (class)
  model, per example (twice in training: the values kept for the backward pass and their
    gradients; once in evaluation), m = --feature_size, h = --hidden_size, D the hidden
    vector's width, L = --num_layers, n = --order, c = --window:
    nnlm          (n-1)·m + 2h + D
    cbow          2c·m + m, one head example per position, in evaluation
    skipgram      in evaluation one full distribution per position (heads with output
                  rows), else 2c pairs
    word2vec's update (both, training): the batch's examples (ids, rows, labels, counts)
                  and one --chunk_positions chunk's vectors, output rows and updates
    rnn/lstm/gru  per word L·(m + (g+2)·h), g = 1, 4, 3 gates; B streams × --bptt_length
                  words in training, one stream of E words (on every device) in evaluation
    transformer   per window L·(n-1)·(9m + 2h + 2·heads·(n-1)): the projections, the
                  feed-forward layer and the attention logits and weights [heads, n-1, n-1];
                  training scores all n-1 positions of a window; evaluation holds one
                  block's (n-1)·(4m + h + heads·(n-1)) and scores the last position only
"""

import dataclasses
import math
import os
import resource
from pathlib import Path

import jax

from nplm import parallel
from nplm.training.families import feed_of
from nplm.errors import ConfigError
from nplm.heads import OUTPUT_ROW_HEADS
from nplm.heads.output_layer import chunk_rows
from nplm.lm import build_language_model
from nplm.models.word2vec import chunk_positions

WORD = 4  # float32 and int32 bytes
GATES = {'rnn': 1, 'lstm': 4, 'gru': 3}
# The size knobs tried at half their value to see which cut the figure most: those that
# shape the parameters, and those that do not.
MODEL_KNOBS = ('order', 'feature_size', 'hidden_size', 'num_layers')
RUN_KNOBS = ('batch_size', 'eval_batch_size', 'bptt_length', 'window', 'num_samples')
# Deeper models take long to trace: their state is counted only when the rest fits.
MAX_TRACED_LAYERS = 32


@dataclasses.dataclass(frozen=True)
class Estimate:
  """Bytes per device (`devices` of them share the memory compared against)."""
  state: int | None  # None: not counted (what else is needed does not fit already)
  gradients: int
  data: int
  train: int
  evaluation: int
  devices: int = 1
  state_name: str = 'parameters'

  @property
  def needed(self) -> int:
    return self.devices * ((self.state or 0) + self.data
                           + max(self.gradients + self.train, self.evaluation))

  def parts(self) -> str:
    """The parts that make up most of the figure, largest first."""
    step = ([(self.gradients, 'gradients'), (self.train, 'train-step activations')]
            if self.gradients + self.train > self.evaluation
            else [(self.evaluation, 'evaluation activations')])
    parts = [(self.state or 0, self.state_name), *step, (self.data, 'data')]
    parts = sorted((p for p in parts if p[0] * self.devices >= 0.05 * self.needed), reverse=True)
    return ', '.join(f'{name} {size(self.devices * bytes_)}' for bytes_, name in parts)


def size(bytes_: float) -> str:
  """1.2 GB, 312 GB, 4.1 TB: powers of 1000, as memory is sold."""
  for unit, scale in (('PB', 1e15), ('TB', 1e12), ('GB', 1e9), ('MB', 1e6)):
    if bytes_ >= scale:
      value = bytes_ / scale
      return f'{value:,.0f} {unit}' if value >= 10 else f'{value:.1f} {unit}'
  return f'{bytes_ / 1e3:.0f} kB'


def device_bytes(tree, mesh=None, vocab_parallel: bool = False, batch_axes=None) -> int:
  """Bytes of a tree of arrays (or shapes) that one device holds, laid out as the loop lays
  out a state (nplm.parallel.state_shardings); the whole tree without a mesh."""
  leaves = jax.tree.leaves(tree)
  if mesh is None:
    return sum(math.prod(leaf.shape) * leaf.dtype.itemsize for leaf in leaves)
  shardings = jax.tree.leaves(parallel.state_shardings(tree, mesh, vocab_parallel, batch_axes))
  return sum(math.prod(sharding.shard_shape(leaf.shape)) * leaf.dtype.itemsize
             for leaf, sharding in zip(leaves, shardings))


def _scores_per_example(config, lm, vocab_size: int, shards: int, training: bool,
                        batch: int | None = None) -> int:
  """S: what the head scores per example (module docstring); `batch`: the global batch of
  an exact log p that chunks its normalizer, if it does."""
  head, width = lm.head, lm.model.output_width + 1
  if config.head == 'tree' and hasattr(head, 'tree'):
    return head.tree.paths.shape[1] * width
  if config.head == 'class' and hasattr(head, 'classes'):
    return head.classes.num_classes + int(head.classes.size.max()) * width
  if training and config.head in ('is', 'nce', 'negative_sampling'):
    samples = config.num_samples + 1
    return samples * width if config.noise_per_example else samples
  if batch is not None and shards == 1 and config.head in OUTPUT_ROW_HEADS:
    return chunk_rows(batch, vocab_size)
  if batch is not None and config.head == 'adaptive' and hasattr(head, 'bounds'):
    layers = [head.cutoffs[0] + len(head.bounds)] + [end - start for start, end in head.bounds]
    rows = [chunk_rows(batch, units) for units in layers]
    # Whole layers' log-softmaxes are live together (XLA's count); chunked layers' loops run
    # one after another in one chunk's buffers.
    return (sum(r for r, units in zip(rows, layers) if r == units)
            + max((r for r, units in zip(rows, layers) if r < units), default=0))
  return _ceil(vocab_size, shards)


def _ceil(a: int, b: int) -> int:
  return -(-a // b)


def _word2vec_update(config, lm, batch: int) -> int:
  """Words word2vec's update holds for `batch` positions (nplm.training.word2vec_update):
  the batch's examples (context ids, their rows, labels and counts), and one chunk's vectors
  read, output rows read and their updates."""
  examples = 2 * config.window if config.model == 'skipgram' else 1
  rows = (lm.head.tree.paths.shape[1] if config.head == 'tree' and hasattr(lm.head, 'tree')
          else config.num_samples + 1)
  chunk = min(chunk_positions(config), batch)
  m = config.feature_size
  return (batch * (4 * config.window + 3 * examples * rows)
          + chunk * m * (4 * config.window + 2 * examples * rows + examples))


def activations(config, lm, vocab_size: int, data: int = 1, shards: int = 1) -> tuple[int, int]:
  """(train step, evaluation step) activation bytes per device, by the module's formula."""
  model = lm.model
  batch, evaluated = _ceil(config.batch_size, data), _ceil(config.eval_batch_size, data)
  m, h, n, layers = config.feature_size, config.hidden_size, config.order, config.num_layers
  head_train = 3 * _scores_per_example(config, lm, vocab_size, shards, True)
  # The global eval batch sets the chunk (it is what the compiled step sees); skip-gram's
  # output-row heads score whole distributions (log_probs), never chunked.
  exact_batch = (None if config.model == 'skipgram' and config.head in OUTPUT_ROW_HEADS
                 else config.eval_batch_size)
  head_eval = _scores_per_example(config, lm, vocab_size, shards, False, exact_batch)
  family = model.family
  if family == 'streams':
    per_word = layers * (m + (GATES.get(config.model, 4) + 2) * h)
    train = batch * config.bptt_length * (2 * per_word + head_train)
    evaluation = config.eval_batch_size * (per_word + head_eval)  # One stream, every device.
  elif family == 'word2vec':
    train = _word2vec_update(config, lm, batch)
    pairs = 2 * config.window
    if config.model == 'skipgram':
      per_position = (head_eval + pairs if config.head in OUTPUT_ROW_HEADS
                      else pairs * head_eval)
      evaluation = evaluated * (m + per_position)
    else:  # CBOW
      evaluation = evaluated * (pairs * m + m + head_eval)
  elif lm.trains_every_position:  # The windows family: the Transformer.
    context = n - 1
    per_window = context * (9 * m + 2 * h + 2 * config.num_heads * context)
    train = batch * (2 * layers * per_window + context * head_train)
    one_block = context * (4 * m + h + config.num_heads * context)
    evaluation = evaluated * (one_block + head_eval)
  else:  # The NNLM, and any other model of the windows family.
    per_example = (n - 1) * m + 2 * h + model.output_width
    train = batch * (2 * per_example + head_train)
    evaluation = evaluated * (per_example + head_eval)
  train_word = 2 if config.dtype == 'bfloat16' else WORD
  return train_word * train, WORD * evaluation


def data_bytes(config, lm, split_sizes: dict, data: int = 1) -> int:
  """The splits as the feeds keep them on each device (int32)."""
  if not split_sizes:
    return 0
  family = lm.model.family
  if family == 'word2vec':  # Padded by c both sides; the epoch's subsampled stream.
    pad = 2 * config.window
    return WORD * (sum(n + pad for n in split_sizes.values()) + split_sizes['train'] + pad)
  if family == 'streams':  # Words, targets, mask of B streams; one stream in evaluation.
    streams, length = config.batch_size, config.bptt_length
    per_stream = _ceil(_ceil(split_sizes.get('train', 0), streams), length) * length
    longest, segment = max(split_sizes.values()), config.eval_batch_size
    return WORD * 3 * (_ceil(streams, data) * per_stream + _ceil(longest, segment) * segment)
  return WORD * sum(n + config.order - 1 for n in split_sizes.values())


def state_bytes(config, lm, mesh=None) -> tuple[int, int]:
  """(the train state's, the parameters') bytes per device, exactly, from the traced
  initialization (nothing allocated)."""
  feed = feed_of(lm.model)
  abstract, batch_axes = feed.abstract_state(config, lm), feed.batch_axes
  return (device_bytes(abstract, mesh, lm.vocab_parallel, batch_axes),
          device_bytes(abstract.params, mesh, lm.vocab_parallel))


def estimate(config, lm, vocab_size: int, split_sizes: dict | None = None, mesh=None,
             num_models: int = 1, training: bool = True, devices: int = 1,
             state: tuple[int, int] | None = None) -> Estimate:
  """The bytes a run (`training`) or a reader of a trained model needs per device;
  `state` from `state_bytes`, or None: not counted."""
  data = mesh.shape['data'] if mesh is not None else 1
  shards = mesh.shape['model'] if mesh is not None and lm.vocab_parallel else 1
  train, evaluation = activations(config, lm, vocab_size, data, shards)
  state_total, params = state or (0, 0)
  return Estimate(state=num_models * (state_total if training else params)
                  if state is not None else None,
                  gradients=num_models * params if training else 0,
                  data=data_bytes(config, lm, split_sizes or {}, data),
                  train=num_models * train if training else 0,
                  evaluation=num_models * evaluation, devices=devices,
                  state_name=(f'parameters and {config.optimizer} state' if training
                              else 'parameters'))


def traced_host_bytes(config, lm) -> int:
  """Host memory that tracing the initialization takes (jax.eval_shape allocates no array
  of the model, but numpy constants are made): the Transformer's sinusoidal table
  [n-1, m], float64. Too large, the state is not counted (the figure is a lower bound)."""
  if lm.trains_every_position and config.positions == 'sinusoidal':
    return 8 * (config.order - 1) * config.feature_size
  return 0


def host_limits() -> dict[str, int]:
  """What bounds this process's memory, by what the refusal calls it: the host's
  MemAvailable; the address-space limit (`ulimit -v`, RLIMIT_AS) less what the process
  already maps (VmSize), since JAX's own mappings count against it too; a cgroup's
  memory.max less its memory.current. Only the bounds that are set."""
  limits = {'this machine has': _mem_available()}
  soft, _ = resource.getrlimit(resource.RLIMIT_AS)
  if soft != resource.RLIM_INFINITY:
    limits['the address-space limit (ulimit -v) leaves'] = max(
        0, soft - _status_bytes('/proc/self/status', 'VmSize:'))
  cgroup = _cgroup_room(Path('/sys/fs/cgroup'))
  if cgroup is not None:
    limits["the cgroup's memory limit (memory.max) leaves"] = cgroup
  return limits


def _mem_available() -> int:
  available = _status_bytes('/proc/meminfo', 'MemAvailable:')
  return available or os.sysconf('SC_AVPHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')


def _status_bytes(path: str, key: str) -> int:
  """A `key: N kB` line of a /proc file in bytes; 0 where it cannot be read."""
  try:
    for line in Path(path).read_text().splitlines():
      if line.startswith(key):
        return int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError):
    pass
  return 0


def _cgroup_room(cgroup: Path) -> int | None:
  """memory.max - memory.current of a cgroup (v2), None where it sets no limit."""
  try:
    limit = (cgroup / 'memory.max').read_text().strip()
    if limit == 'max':
      return None
    return max(0, int(limit) - int((cgroup / 'memory.current').read_text()))
  except (OSError, ValueError):
    return None


def host_available() -> tuple[int, str]:
  """(the least of host_limits, what bounds it: 'this machine has', 'the address-space
  limit (ulimit -v) leaves', ...), for a message '... and {what} {size} available'."""
  limits = host_limits()
  bound = min(limits, key=limits.get)
  return limits[bound], bound


def available_memory() -> tuple[int, str, bool] | None:
  """(bytes, where they are, whether every device shares them: a CPU's are the host's);
  None where an accelerator does not say."""
  device = jax.local_devices()[0]
  if device.platform == 'cpu':
    return (*host_available(), True)
  try:
    limit = (device.memory_stats() or {}).get('bytes_limit')
  except Exception:  # pylint: disable=broad-except
    limit = None
  if not limit:
    return None
  return int(limit), f'each {device.platform.upper()} device has', False


def require_fit(config, lm, counts, split_sizes: dict | None = None, mesh=None,
                num_models: int = 1, training: bool = True) -> None:
  """ConfigError, one line, if the run (or a reader: not `training`) cannot fit in memory:
  the figure, the memory there is, and the flags to lower."""
  available = available_memory()
  if available is None:
    return
  budget, where, shared = available
  devices = mesh.devices.size if shared and mesh is not None else 1

  traced = {}  # (model, state bytes) by model and streams (a recurrent state holds B's).

  def needed(config, lm, with_state: bool) -> Estimate:
    key = (id(lm), config.batch_size)
    if with_state and key not in traced:
      traced[key] = lm, state_bytes(config, lm, mesh)
    return estimate(config, lm, len(counts), split_sizes, mesh, num_models, training, devices,
                    traced[key][1] if with_state else None)

  # The state is traced (jax.eval_shape) unless tracing is itself costly and what needs no
  # tracing is too large already: then the figure is a lower bound.
  found = needed(config, lm, with_state=False)
  cheap = (traced_host_bytes(config, lm) <= budget / 2
           and config.num_layers <= MAX_TRACED_LAYERS)
  if found.needed <= budget or cheap:
    found = needed(config, lm, with_state=True)
    if found.needed <= budget:
      return
  with_state = found.state is not None
  names = _to_lower(config, lm, counts, mesh, found.needed,
                    lambda c, l: needed(c, l, with_state).needed)
  flags = ' '.join([f'--{name}={getattr(config, name)}' for name in names]
                   + [f'--model={config.model}', f'--head={config.head}'])
  per_device = f' on its {devices} devices' if devices > 1 else ''
  about = 'about' if with_state else 'more than'
  raise ConfigError(
      f'{flags} needs {about} '
      f'{size(found.needed)} of memory{per_device} ({found.parts()}), and {where} '
      f'{size(budget)} available: '
      + (f'lower {_either(names)}' if training else
         'the run recorded these values; read it where more memory is available'))


def _to_lower(config, lm, counts, mesh, base: int, needed) -> list[str]:
  """The knobs whose halving cuts the figure most (by a quarter or more; else the best)."""
  cuts, defaults = [], type(config)()
  for name in MODEL_KNOBS + RUN_KNOBS:
    value = getattr(config, name)
    smaller = (value - 1) // 2 + 1 if name == 'order' else value // 2
    if value <= (2 if name == 'order' else 1):
      continue
    candidate = config.replace(**{name: smaller})
    try:
      candidate_lm = (build_language_model(candidate, counts, mesh) if name in MODEL_KNOBS
                      else lm)
      cut = 1 - needed(candidate, candidate_lm) / base
    except Exception:  # pylint: disable=broad-except  # A shape this model cannot take.
      continue
    if cut > 0.01:  # Similar cuts: the knobs set away from their defaults first.
      changed = value != getattr(defaults, name)
      cuts.append((round(cut, 1), changed, cut, name))
  cuts.sort(reverse=True)
  return ([name for *_, cut, name in cuts if cut >= 0.25][:3]
          or [name for *_, name in cuts[:1]])


def _either(names: list[str]) -> str:
  flags = [f'--{name}' for name in names] or ['the sizes']
  return flags[0] if len(flags) == 1 else f'{", ".join(flags[:-1])} or {flags[-1]}'
