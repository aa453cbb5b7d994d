"""The compiled steps' temporaries kept in the process for the next call: glibc's malloc told
not to hand them back to the kernel.

XLA's CPU runtime allocates a program's temporaries at every call and frees them after it
(MLP9's update at batch 256: its scores [256, |V|] and their gradient, about 35 MB). glibc
serves a block above its mmap threshold (adjusted at run time, at most 32 MiB) with a fresh
mapping, gives back freed memory above its trim threshold, and holds a thread's blocks in
that thread's arena, whose heaps are at most 64 MiB: every update then faults its
temporaries' pages in again, each zeroed by the kernel first. On a 2-core AMD EPYC that took
MLP9's update from 22-24 ms to 37-41 ms, and `nplm train --flagfile=mlp9` from
10,000-10,600 to 6,300-6,500 examples/s (docs/decisions.md). Here both thresholds are
KEPT_BYTES and every thread allocates from the main arena (one heap, of any size): a freed
block up to KEPT_BYTES stays in the heap and the next call reuses its pages; a larger one
(a split's tokens at scale) is still mapped by itself.

Written by hand (ctypes' mallopt) because no library sets it, and an environment variable
would have to be set before the process starts. It changes the whole process, once, and
works best before JAX runs its first computation (a thread keeps the arena of its first
allocation): the `nplm` command asks for it as it starts (nplm.console), as do every
program (nplm.cli.start, `python -m experiments.X` too), `nplm.train` and the benchmarks'
package; a feed asks as it compiles its steps (a notebook that computed before). After
JAX's first computations the thresholds alone still keep MLP9's temporaries, but not the
LSTM's 63 MB of scores: JAX's threads then hold arenas of their own, whose heaps hold at
most 64 MiB (experiments/results/cpu/lstm_malloc/). A user's own
settings of malloc (MALLOC_*_ variables, GLIBC_TUNABLES' glibc.malloc) are left as they are,
and another C library (macOS, musl) is left alone.
"""

import ctypes
import functools
import os

KEPT_BYTES = 512 * 2 ** 20
# mallopt's parameter numbers (glibc's malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8


def _glibc() -> bool:
  try:
    return os.confstr('CS_GNU_LIBC_VERSION').startswith('glibc')
  except (AttributeError, ValueError, OSError):  # No confstr, or not this name.
    return False


@functools.cache
def keep_freed_blocks() -> bool:
  """Whether freed blocks up to KEPT_BYTES now stay in the process for reuse."""
  if not _glibc() or any(name.startswith('MALLOC_') and name.endswith('_')
                         for name in os.environ) or (
      'glibc.malloc' in os.environ.get('GLIBC_TUNABLES', '')):
    return False
  mallopt = ctypes.CDLL(None).mallopt
  return all([mallopt(_M_ARENA_MAX, 1), mallopt(_M_MMAP_THRESHOLD, KEPT_BYTES),
              mallopt(_M_TRIM_THRESHOLD, KEPT_BYTES)])
