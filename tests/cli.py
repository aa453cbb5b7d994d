"""Commands as a user types them, from the tests: `python -m MODULE ARGS` (`nplm` by default)
or `python -c CODE ARGS` in a directory, with the checkout on PYTHONPATH.

Each runs in a child forked by this worker's server (tests/prewarmed.py, started at the first
command), which imported jax, flax, Orbax, TFDS, matplotlib and nplm's commands once: a fresh
Python spends seconds on them for every command. A command given variables of its own
(JAX_NUM_CPU_DEVICES, XLA_FLAGS: read as jax is imported), or from a test that changed the
environment, runs in a fresh Python, as do the
tests that send a command signals or time its start (they start it themselves) and those of
what a command imports (`fresh`).
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.prewarmed import environment

ROOT = Path(__file__).resolve().parents[1]
_server: dict = {}  # This process's server, once started: 'socket', 'process'.
# The environment the server runs commands in: the session's, as tests/conftest.py's session
# fixtures set it (not one a test changed for itself, which would send every later
# command to a fresh Python).
BASE_ENVIRONMENT: dict = {}


def run(*args: str, module: str = 'nplm.cli', code: str | None = None,
        cwd: Path | str = ROOT, stdin: str = '', timeout: float = 300, fresh: bool = False,
        **variables: str) -> subprocess.CompletedProcess:
  """`python -m MODULE ARGS` (with `code`: `python -c CODE ARGS`) run in `cwd`, `stdin` its
  input, its text output captured, with `variables` added to the environment; `fresh`: in a
  fresh Python (a test of what the command imports)."""
  command, env = _command(args, module, code, variables, fresh)
  return subprocess.run(command, cwd=cwd, env=env, input=stdin, capture_output=True,
                        text=True, timeout=timeout, check=False)


def start(*args: str, module: str = 'nplm.cli', code: str | None = None,
          cwd: Path | str = ROOT, **variables: str) -> subprocess.Popen:
  """`run`'s command started: its output read by communicate() (stdin: none)."""
  command, env = _command(args, module, code, variables, fresh=False)
  return subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _command(args, module: str, code: str | None, variables: dict,
             fresh: bool) -> tuple[list, dict]:
  env = {**os.environ, 'PYTHONPATH': str(ROOT), **variables}
  python = ['-c', code] if code is not None else ['-m', module]
  base = {**BASE_ENVIRONMENT, 'PYTHONPATH': str(ROOT)}
  if fresh or not BASE_ENVIRONMENT or environment(env) != environment(base):
    return [sys.executable, *python, *args], env
  return [sys.executable, '-m', 'tests.prewarmed', _socket(env), '--plain', *python, *args], env


def _socket(env: dict) -> str:
  """The server's socket, the server started if it is not yet (a command sent meanwhile
  waits for its imports)."""
  if not _server:
    path = os.path.join(tempfile.mkdtemp(prefix='nplm-tests-'), 'prewarmed')
    process = subprocess.Popen([sys.executable, '-m', 'tests.prewarmed', 'serve', path],
                               cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL)
    while not os.path.exists(path) and process.poll() is None:
      time.sleep(0.01)
    _server.update(socket=path, process=process)
    atexit.register(_stop_server)
  return _server['socket']


def server_pid() -> int | None:
  """The process id of this worker's server, if it has started."""
  return _server['process'].pid if _server else None


def _stop_server() -> None:
  _server['process'].terminate()
  _server['process'].wait()
  shutil.rmtree(os.path.dirname(_server['socket']), ignore_errors=True)


def finish(child: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
  """A started command's status, standard output and standard error, once it ends."""
  stdout, stderr = child.communicate(timeout=timeout)
  return child.returncode, stdout, stderr
