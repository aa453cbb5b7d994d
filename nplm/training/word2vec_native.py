"""word2vec's update loop on a CPU as compiled C++ (word2vec_update.cc), called from the
step as an XLA FFI custom call: the same arithmetic as `word2vec_update.chunked_step`'s loop
over chunks, each row read and updated where it lies instead of XLA's CPU gathers and
scatter-adds, and the chunks shared among threads, each with its own copy of the rows it
changes (summed at the end: what a CPU device per core did, without an all-reduce of whole
tables).

The source is compiled once per machine, with the host's C++ compiler ($CXX, else c++)
against the FFI headers jaxlib ships, into $NPLM_CACHE_DIR (default
$XDG_CACHE_HOME/nplm, else ~/.cache/nplm), keyed by the source, compiler, jaxlib and CPU,
with its SHA-256 beside it (a damaged library is built again, never loaded): a few seconds
at a machine's first word2vec run. Where it cannot be built (no compiler), the
update stays XLA's loop and `unavailable()` says why.
"""

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np

from nplm.paths import cache_dir

SOURCE = Path(__file__).with_name('word2vec_update.cc')
HEADERS = tuple(SOURCE.with_name(name) for name in ('word2vec_arithmetic.h',
                                                    'word2vec_sampler.h'))  # #included
TARGET = 'nplm_word2vec_update'
SYMBOL = 'NplmWord2vecUpdate'
# -march=native: the library is built on the machine that runs it (its CPU is in the key).
FLAGS = ('-O3', '-march=native', '-fopenmp-simd', '-std=c++17', '-shared', '-fPIC',
         '-pthread')


class NativeUnavailable(RuntimeError):
  """The C++ update cannot be built or loaded here (the message says why)."""


def compiler() -> str:
  found = shutil.which(os.environ.get('CXX', 'c++'))
  if not found:
    raise NativeUnavailable(f'no C++ compiler ({os.environ.get("CXX", "c++")} not on PATH)')
  return found


def cpu_signature() -> str:
  """What -march=native compiles for: /proc/cpuinfo's model and flags where Linux has it."""
  try:
    lines = Path('/proc/cpuinfo').read_text().splitlines()
  except OSError:
    return platform.machine() + platform.processor()
  wanted = [line for line in lines if line.startswith(('model name', 'flags', 'Features'))]
  return '\n'.join(sorted(set(wanted))) or platform.machine()


def library_path(cxx: str) -> Path:
  version = subprocess.run([cxx, '--version'], capture_output=True, text=True).stdout
  sources = [path.read_text() for path in (SOURCE, *HEADERS)]
  key = hashlib.sha256('\0'.join([*sources, cxx, version, jaxlib.__version__, ' '.join(FLAGS),
                                  cpu_signature()]).encode()).hexdigest()
  return cache_dir() / f'word2vec_update-{key[:16]}.so'


def digest_path(library: Path) -> Path:
  return library.with_suffix('.sha256')


def intact(library: Path) -> bool:
  """Whether the library is as it was built: its SHA-256 is the one written beside it. A
  library cut short (a full disk, a copy stopped) would crash the process as it loads."""
  try:
    written = digest_path(library).read_text().strip()
    return hashlib.sha256(library.read_bytes()).hexdigest() == written
  except OSError:
    return False


def compile_source(cxx: str, source: Path, library: Path) -> None:
  """`source` compiled into the shared library `library`, or NativeUnavailable (why, in a
  line)."""
  result = subprocess.run([cxx, *FLAGS, f'-I{jax.ffi.include_dir()}', str(source), '-o',
                           str(library)], capture_output=True, text=True)
  if result.returncode != 0:
    errors = [line for line in result.stderr.splitlines() if 'error' in line]
    first = (errors or result.stderr.strip().splitlines() or ['no message'])[0][:300]
    raise NativeUnavailable(f'{Path(cxx).name} could not compile {source.name}: {first}')


def register(library: Path, target: str) -> None:
  """The library's update registered with XLA as the custom call `target`."""
  handle = ctypes.cdll.LoadLibrary(str(library))
  jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(handle, SYMBOL)),
                              platform='cpu')


def build() -> Path:
  """The compiled library, built now if this machine has none intact: written to temporary
  files and renamed, its digest first, so that no reader sees it half written."""
  cxx = compiler()
  path = library_path(cxx)
  if intact(path):
    return path
  path.parent.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
    built = Path(scratch) / path.name
    compile_source(cxx, SOURCE, built)
    digest = digest_path(built)
    digest.write_text(hashlib.sha256(built.read_bytes()).hexdigest() + '\n')
    os.replace(digest, digest_path(path))
    os.replace(built, path)
  return path


@functools.cache
def _registered() -> str | None:
  """Builds, loads and registers the update once per process: None, or why it cannot."""
  try:
    register(build(), TARGET)
  except (NativeUnavailable, OSError) as error:  # OSError: e.g. a cache dir not writable.
    return str(error)
  return None


def unavailable() -> str | None:
  """None where the C++ update runs here, else why it does not."""
  return _registered()


def apply_chunks(model: str, vectors, out_table, examples, alpha, chunk: int, filled,
                 threads: int, output, rng):
  """`word2vec_update.chunked_step`'s loop: the first `filled` chunks of `chunk` examples,
  one after another, shared among `threads` threads, each with its own copy of the tables,
  their changes summed at the end. `output`: ('tree', ...), the examples' rows its paths;
  or ('sampled', proposal, k): the examples' rows [N, J, 1] their targets, k negatives
  each drawn here from the proposal's alias table, seeded from `rng`. -> (C, output vectors,
  the summed loss, the examples counted)."""
  if (reason := unavailable()) is not None:
    raise NativeUnavailable(reason)
  if output[0] == 'sampled':
    _, proposal, negatives = output
    threshold, alias = (jnp.asarray(table) for table in proposal.alias_table)
  else:  # Nothing drawn: one-word stand-ins for the tables.
    negatives, threshold, alias = 0, jnp.zeros(1, jnp.uint32), jnp.zeros(1, jnp.int32)
  seed = jax.random.bits(rng, (2,), jnp.uint32)
  shapes = (jax.ShapeDtypeStruct(vectors.shape, jnp.float32),
            jax.ShapeDtypeStruct(out_table.shape, jnp.float32),
            jax.ShapeDtypeStruct((), jnp.float32), jax.ShapeDtypeStruct((), jnp.int32))
  # Models trained together (vmapped): one call after another, each on its own tables.
  call = jax.ffi.ffi_call(TARGET, shapes, input_output_aliases={0: 0, 1: 1},
                          vmap_method='sequential')
  return call(vectors, out_table, examples.context.astype(jnp.int32), examples.present,
              examples.counted, examples.rows.astype(jnp.int32),
              examples.labels.astype(jnp.float32), examples.counts, threshold, alias, seed,
              jnp.asarray(alpha, jnp.float32), jnp.asarray(filled, jnp.int32),
              cbow=model == 'cbow', hierarchical=output[0] == 'tree',
              negatives=np.int64(negatives), chunk=np.int64(chunk), threads=np.int64(threads))
