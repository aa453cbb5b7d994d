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
E = --eval_batch_size examples per device (split over 'data'), are what the model says
(its `activation_words`: each model's formula is in its file, nplm/models/) with the head's
scores per example, S (its `scores_per_example`: 3·S in training, the scores, their softmax
or sigmoid, their gradient; S in evaluation; nplm/heads/), and in training what the feed's
step holds beside XLA's buffers (its `host_scratch_words`: word2vec's compiled update's
threads' copies of the tables). Checked against XLA's own count
of a compiled step's temporaries (tests/test_resources.py): within a factor of 2.
"""

import dataclasses
import math
import os
import resource
from pathlib import Path

import jax

from nplm import heads, models, parallel
from nplm.errors import ConfigError
from nplm.lm import build_language_model
from nplm.training.families import feed_of

WORD = 4  # float32 and int32 bytes
# The size knobs tried at half their value to see which cut the figure most.
SIZE_KNOBS = ('order', 'feature_size', 'hidden_size', 'num_layers', 'batch_size',
              'eval_batch_size', 'bptt_length', 'window', 'num_samples')
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


def _ceil(a: int, b: int) -> int:
  return -(-a // b)


def activations(config, lm, data: int = 1, shards: int = 1) -> tuple[int, int]:
  """(train step, evaluation step) activation bytes per device: what the model says, its
  head's scores included (the module's docstring)."""
  batch, evaluated = _ceil(config.batch_size, data), _ceil(config.eval_batch_size, data)
  train, evaluation = lm.model.activation_words(config, lm.head, batch, evaluated, shards)
  train_word = 2 if config.dtype == 'bfloat16' else WORD
  return train_word * train, WORD * evaluation


def data_bytes(config, lm, split_sizes: dict, data: int = 1) -> int:
  """The splits as the model's feed keeps them on each device (int32)."""
  if not split_sizes:
    return 0
  return WORD * feed_of(lm.model).data_words(config, split_sizes, data)


def state_bytes(config, lm, mesh=None) -> tuple[int, int]:
  """(the train state's, the parameters') bytes per device, exactly, from the traced
  initialization (nothing allocated)."""
  feed = feed_of(lm.model)
  abstract, batch_axes = feed.abstract_state(config, lm), feed.batch_axes
  return (device_bytes(abstract, mesh, lm.vocab_parallel, batch_axes),
          device_bytes(abstract.params, mesh, lm.vocab_parallel))


def estimate(config, lm, split_sizes: dict | None = None, mesh=None,
             num_models: int = 1, training: bool = True, devices: int = 1,
             state: tuple[int, int] | None = None) -> Estimate:
  """The bytes a run (`training`) or a reader of a trained model needs per device;
  `state` from `state_bytes`, or None: not counted."""
  data = mesh.shape['data'] if mesh is not None else 1
  shards = mesh.shape['model'] if mesh is not None and lm.vocab_parallel else 1
  train, evaluation = activations(config, lm, data, shards)
  if training:  # Held during one model's update at a time (trained together: in turn).
    train = num_models * train + WORD * feed_of(lm.model).host_scratch_words(config, lm, mesh)
  state_total, params = state or (0, 0)
  return Estimate(state=num_models * (state_total if training else params)
                  if state is not None else None,
                  gradients=num_models * params if training else 0,
                  data=data_bytes(config, lm, split_sizes or {}, data),
                  train=train if training else 0,
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
    key = (id(lm.model), config.batch_size)
    if with_state and key not in traced:
      traced[key] = lm, state_bytes(config, lm, mesh)
    return estimate(config, lm, split_sizes, mesh, num_models, training, devices,
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
  model_knobs = models.model_class(config.model).knobs
  head_knobs = heads.head_class(config.head).knobs
  for name in SIZE_KNOBS:
    value = getattr(config, name)
    smaller = (value - 1) // 2 + 1 if name == 'order' else value // 2
    if value <= (2 if name == 'order' else 1):
      continue
    candidate = config.replace(**{name: smaller})
    try:
      if name in model_knobs:  # Built again: the model (and the state) it shapes.
        candidate_lm = build_language_model(candidate, counts, mesh)
      elif name in head_knobs:  # The head's sizes (its samples), the model's state kept.
        candidate_lm = lm.clone(head=heads.build_head(candidate, counts,
                                                      lm.model.output_width, mesh))
      else:
        candidate_lm = lm
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
