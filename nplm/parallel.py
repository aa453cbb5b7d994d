"""Devices and processes: the mesh, where every array lives, and multi-process start-up.

Section 3 of the paper trains in parallel two ways, and the mesh has one axis for each:
- 'data' (section 3.1): every device holds the parameters and scores its slice of the global
  batch; `jax.jit` sums the gradients across the slices.
- 'model' (section 3.2, parameter-parallel): the |V| output rows of the full-softmax and
  sampling heads are split along the vocabulary (nplm.heads.vocab_parallel); every other
  parameter is replicated.
The mesh always has both axes, either of size 1. `--mesh=data:2,model:4` names the sizes;
an axis left out takes the devices that remain, so the default (empty) puts every device
on 'data'.

Multi-process runs (one process per host) start with `jax.distributed.initialize` before
any device is touched; each process then places only the shards its own devices hold
(`jax.make_array_from_callback`), so every process feeds its slice of the global batch.
"""

import logging
import math
import os

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from nplm.errors import ConfigError

log = logging.getLogger(__name__)

AXES = ('data', 'model')


def parse_mesh(spec: str) -> dict[str, int]:
  """{'data': d, 'model': m} from 'data:2,model:4'; an axis left out is absent (-1 later)."""
  sizes = {}
  for part in filter(None, (p.strip() for p in spec.split(','))):
    name, _, size = part.partition(':')
    if name not in AXES or not size.strip().isdigit() or int(size) < 1 or name in sizes:
      raise ConfigError(f'--mesh={spec!r}: each part must be data:N or model:N with N ≥ 1, '
                        'each axis once (for example --mesh=data:2,model:4)')
    sizes[name] = int(size)
  return sizes


def mesh_shape(spec: str, num_devices: int) -> tuple[int, int]:
  """(data, model) sizes that use all `num_devices`; a missing axis takes what is left."""
  sizes = parse_mesh(spec)
  named = math.prod(sizes.values())
  if num_devices % named:
    raise ConfigError(f'--mesh={spec!r} needs a multiple of {named} devices; there are '
                      f'{num_devices}')
  rest = num_devices // named
  if len(sizes) == 2 and rest != 1:
    raise ConfigError(f'--mesh={spec!r} uses {named} devices; there are {num_devices}: '
                      'name a shape that uses them all, or leave an axis out')
  model = sizes.get('model', rest if 'data' in sizes else 1)
  data = sizes.get('data', num_devices // model)
  return data, model


def make_mesh(spec: str = '', devices=None) -> Mesh:
  """The ('data', 'model') mesh over `devices` (default: every device of every process)."""
  devices = jax.devices() if devices is None else devices
  shape = mesh_shape(spec, len(devices))
  # Auto axes: with the Explicit default of jax.make_mesh, nn.Embed fails on a sharded batch.
  return jax.make_mesh(shape, AXES, axis_types=(jax.sharding.AxisType.Auto,) * 2,
                       devices=devices)


def initialize_processes(config) -> None:
  """Joins a multi-process run (before any device is used), if the config asks for one and
  this process has not joined yet (a sweep calls `run` again in the same processes)."""
  if jax.distributed.is_initialized():
    return
  if config.distributed:  # The cluster (Cloud TPU, Slurm) tells JAX who and where we are.
    jax.distributed.initialize()
  elif config.num_processes > 1:
    jax.distributed.initialize(coordinator_address=config.coordinator_address,
                               num_processes=config.num_processes,
                               process_id=config.process_id)
  else:
    return
  log.info('Process %d of %d, %d of %d devices here.', jax.process_index(),
           jax.process_count(), jax.local_device_count(), jax.device_count())
  if not is_main_process():  # Process 0 speaks for the run; the others only warn.
    logging.getLogger('nplm').setLevel(logging.WARNING)


def usable_cores() -> int:
  return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()


def request_cpu_devices(count: int) -> None:
  """Starts JAX's CPU backend with `count` devices (an update whose loop XLA runs on one core
  can then run a copy on each: word2vec's), unless JAX_NUM_CPU_DEVICES already chose or the
  backend has started (its devices stay, for a later run in the same Python process too)."""
  if count > 1 and 'JAX_NUM_CPU_DEVICES' not in os.environ:
    try:
      jax.config.update('jax_num_cpu_devices', count)
    except RuntimeError:  # The backend has started.
      log.info('JAX has started with %d CPU device(s); the update would use %d (set '
               'JAX_NUM_CPU_DEVICES before jax starts)', jax.device_count('cpu'), count)


def main_process_first(load):
  """load() in process 0 first, then in the others: what it prepares on a shared disk (the
  corpus) is then prepared once, not raced for."""
  if jax.process_count() == 1:
    return load()
  if is_main_process():
    result = load()
  multihost_utils.sync_global_devices('nplm: process 0 has loaded')
  if not is_main_process():
    result = load()
  return result


def is_main_process() -> bool:
  """Process 0 alone writes logs, metrics and summaries."""
  return jax.process_index() == 0


def agreed_stop(requested: bool, at_sync_point: bool) -> bool:
  """Whether the run stops now. One process acts on its own signal at once; the processes of
  a multi-process run must stop at the same update (the checkpoint they then save together
  is a collective), so they agree, at log and checkpoint steps only, whether any of them was
  asked to stop."""
  if jax.process_count() == 1:
    return requested
  if not at_sync_point:
    return False
  return any_process(requested)


def any_process(flag: bool) -> bool:
  """Whether `flag` holds in any process (a collective: every process calls it at once)."""
  if jax.process_count() == 1:
    return flag
  return bool(np.any(multihost_utils.process_allgather(np.array(flag))))


def wait_on_cpu_devices(result):
  """`result`, after waiting for it when the computation spans several CPU devices. There,
  about a hundred calls in flight at once, each with its collectives, deadlock: one device's
  thread never reaches an all-reduce and XLA aborts after 40 s, or, across processes (gloo),
  every process blocks for good; async dispatch on or off (jax 0.10.2: 120 un-awaited
  evaluation batches on 8 simulated devices, or 2 processes × 2 devices; 60 pass).
  Accelerators' collectives do not need it, and one CPU device has no collectives."""
  if jax.default_backend() == 'cpu' and jax.device_count() > 1:
    jax.block_until_ready(result)
  return result


def sharding(mesh: Mesh, *spec) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec(*spec))


def put(array: np.ndarray, mesh: Mesh, *spec) -> jax.Array:
  """A host array as a global array laid out by `spec`; this process places only the
  pieces its own devices hold (every process computes the same host array)."""
  array = np.asarray(array)
  return jax.make_array_from_callback(array.shape, sharding(mesh, *spec),
                                      lambda index: array[index])


def step_input(array: np.ndarray, mesh: Mesh, *spec):
  """A host array as an argument of a compiled step whose in_shardings lay it out by `spec`:
  in one process the array itself, which jit places in C++ (on a 2-core CPU a step's
  positions and mask took 15 µs so, 70 µs through `put`'s Python callback); across
  processes the global array jit requires (`put`)."""
  if jax.process_count() == 1:
    return np.asarray(array)
  return put(array, mesh, *spec)


def fetch(array: jax.Array) -> np.ndarray:
  """A replicated global array's value on the host, in any process."""
  return np.asarray(array.addressable_data(0))


def read_on_this_host(leaf) -> bool:
  """Whether numpy can read the whole array where it lies, without a device program: one of
  this process's arrays on CPU devices, or numpy's own."""
  if isinstance(leaf, jax.Array):
    return leaf.is_fully_addressable and all(
        device.platform == 'cpu' for device in leaf.sharding.device_set)
  return isinstance(leaf, (np.ndarray, np.generic))


def is_output_row(path) -> bool:
  """True for the output rows of a head (params or optimizer moments): the path runs
  through 'head' then 'output', the OutputLayer that vocab-parallel heads shard."""
  keys = [getattr(entry, 'key', None) for entry in path]
  return 'head' in keys and 'output' in keys[keys.index('head'):]


def unpadded_output_rows(tree, vocab_size: int):
  """The tree with its output rows cut to the vocabulary: a vocabulary-parallel run's
  parameters as a one-device model holds them (the rows past |V| are zero padding)."""
  return jax.tree_util.tree_map_with_path(
      lambda path, leaf: leaf[:vocab_size] if leaf.ndim and is_output_row(path) else leaf, tree)


def state_shardings(abstract_state, mesh: Mesh, vocab_parallel: bool, batch_axes=None):
  """Where each leaf of a train state lives: the output rows split over 'model' for a
  vocab-parallel head (their first axis is the vocabulary), everything else replicated.
  `batch_axes` maps a top-level field (the recurrent carry) to its batch axis, split over
  'data'."""
  batch_axes = batch_axes or {}

  def place(path, leaf):
    top = getattr(path[0], 'name', None)
    if top in batch_axes:
      spec = [None] * leaf.ndim
      spec[batch_axes[top]] = 'data'
      return sharding(mesh, *spec)
    if vocab_parallel and leaf.ndim >= 1 and is_output_row(path):
      return sharding(mesh, 'model')
    return sharding(mesh)

  return jax.tree_util.tree_map_with_path(place, abstract_state)


def state_maker(make_state, mesh: Mesh, vocab_parallel: bool, batch_axes=None):
  """(`make_state` jitted, the shardings of the state it returns): every leaf created where
  it lives, a split leaf never whole on one device. One program for every key."""
  abstract = jax.eval_shape(make_state, jax.random.key(0))
  shardings = state_shardings(abstract, mesh, vocab_parallel, batch_axes)
  return jax.jit(make_state, out_shardings=shardings), shardings


def check_divides(what: str, size: int, mesh: Mesh) -> None:
  """Batches are split evenly over 'data': refuse a size it does not divide."""
  data = mesh.shape['data']
  if size % data:
    raise ConfigError(f'{what}={size} must be a multiple of the {data} devices on the mesh\'s '
                      f'data axis (--mesh={"data:%d,model:%d" % (data, mesh.shape["model"])})')
