"""A compiled program's temporaries are reused from call to call, not faulted in anew
(nplm.host_memory): counted by the kernel (getrusage's minor page faults) in child
processes, one that asks for it and one that does not."""

import pytest

from nplm import host_memory
from tests import cli

# A program whose product [256, 50,000] float32 (51 MB, above glibc's largest dynamic mmap
# threshold) is a temporary of every call; prints the page faults of one call, averaged. Run
# as argv[1] says: malloc told first ('keep'), left alone ('leave'), or as nplm's programs
# ('a program': cli.start, which `nplm X` and `python -m experiments.X` run) and the
# benchmarks ('a benchmark': `python -m experiments.benchmarks.X` imports the package) start.
_CHILD = """
import resource, sys
import jax, jax.numpy as jnp
from nplm import host_memory

def faults_per_call(argv=None):
  step = jax.jit(lambda x, w: ((x @ w) @ w.T).sum())
  x, w = jnp.ones((256, 100)), jnp.ones((100, 50_000)) * 1e-3
  for _ in range(2):
    step(x, w).block_until_ready()
  before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
  for _ in range(10):
    step(x, w).block_until_ready()
  print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)

if sys.argv[1] == 'keep':
  assert host_memory.keep_freed_blocks()
if sys.argv[1] == 'a program':
  from nplm import cli
  cli.start(faults_per_call, argv=['a program'])
else:
  if sys.argv[1] == 'a benchmark':
    import experiments.benchmarks
  faults_per_call()
"""
TEMPORARY_PAGES = 256 * 50_000 * 4 // 4096


def faults_per_call(how: str) -> float:
  """In a child the worker's server forked: it imported JAX, which starts no thread before
  its first computation, so malloc is told here as `nplm` tells it before JAX's threads."""
  child = cli.run(how, code=_CHILD)
  assert child.returncode == 0, child.stderr
  return float(child.stdout.split()[-1])


@pytest.mark.skipif(not host_memory._glibc(), reason='glibc only: its malloc is what is told')
@pytest.mark.parametrize('how', ['keep', 'a program', 'a benchmark'])
def test_a_programs_temporaries_are_not_faulted_in_at_every_call(how):
  """Told after JAX's first computation (as the feed tells it), JAX's threads keep arenas
  whose heaps hold at most 64 MiB: the LSTM's 63 MB of scores were faulted in at every
  update of `python -m experiments.train --flagfile=lstm` and its benchmark."""
  faults = faults_per_call(how)
  assert faults < TEMPORARY_PAGES / 10, (faults, TEMPORARY_PAGES)


@pytest.mark.skipif(not host_memory._glibc(), reason='glibc only: its malloc is what is told')
def test_left_alone_glibc_maps_a_programs_temporaries_anew():
  """The premise, that the tests above can fail."""
  assert faults_per_call('leave') > TEMPORARY_PAGES / 2


@pytest.mark.parametrize('variable, value', [('MALLOC_TRIM_THRESHOLD_', '1000000'),
                                             ('GLIBC_TUNABLES', 'glibc.malloc.arena_max=2')])
def test_a_users_own_malloc_settings_are_left_as_they_are(monkeypatch, variable, value):
  monkeypatch.setenv(variable, value)
  assert host_memory.keep_freed_blocks.__wrapped__() is False


def test_another_c_library_is_left_alone(monkeypatch):
  def no_such_name(name):
    raise ValueError(f'unrecognized configuration name {name!r}')
  monkeypatch.setattr(host_memory.os, 'confstr', no_such_name)
  assert host_memory.keep_freed_blocks.__wrapped__() is False
