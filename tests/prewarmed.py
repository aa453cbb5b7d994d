"""The docs' commands without their imports' time: a server per page (tests/test_readme.py),
started in the page's environment (its HOME, PATH, ...), imports jax, flax, optax, Orbax,
TFDS, matplotlib and nplm's commands once, then forks a child for each command, which skips
the seconds a fresh Python spends importing them, for each of ~80 commands.

The child takes the command's arguments, current directory, environment and standard
streams, runs it as `python -m tests.readme_substitutions ARGS` would run it, and its exit
status is the command's; a stop signal sent to the command goes on to it. A command whose
environment differs from the server's (say JAX_NUM_CPU_DEVICES=8, which jax reads as it is
imported) runs in a fresh Python instead, as every command does where no server answers.
Nothing preloaded may start a thread (a fork copies only the calling one): gensim's BLAS
does, so it is not preloaded.

  python -m tests.prewarmed serve SOCKET      the server, until SIGTERM
  python -m tests.prewarmed SOCKET ARGS...    a command, ARGS as readme_substitutions takes
  python -m tests.prewarmed SOCKET --plain -m MODULE ARGS... (or -c CODE ARGS...)
                                              `python -m MODULE ARGS`, nothing substituted
                                              (the suite's other commands: tests/cli.py)
"""

import atexit
import contextlib
import importlib
import json
import os
import select
import signal
import socket
import sys
import threading

# Not a difference of environment: what bash sets for each command itself, pytest for each
# test (the test's name), and libraries in a test's process for themselves: torch once it
# compiles (the PyTorch peers' tests), tensorboardX once a run writes its events. Nothing
# preloaded reads those, and the child gets them all the same.
NOT_A_DIFFERENCE = {'PWD', 'OLDPWD', 'SHLVL', '_', 'PYTEST_CURRENT_TEST',
                    'TORCHINDUCTOR_CACHE_DIR', 'CRC32C_SW_MODE'}
PRELOADED = ('jax', 'flax.linen', 'optax', 'orbax.checkpoint', 'absl.app',
             'tensorflow_datasets.core.download.downloader', 'matplotlib.pyplot',
             'tests.readme_substitutions', 'tests.conftest',
             *(f'nplm.cli.{name}' for name in (
                 '__main__', 'train', 'evaluate', 'ngram', 'score', 'rank', 'predict',
                 'complete', 'correct', 'generate', 'neighbours', 'mix', 'compare', 'export',
                 'sweep', 'table1', 'clean', 'serve')))  # Not embeddings: it imports gensim.
NOT_PRELOADED = ('gensim', 'tensorflow')  # They start threads.
PLAIN = '--plain'  # A command's first argument: `python -m MODULE ARGS` as it is.


def environment(env) -> dict:
  return {name: value for name, value in env.items() if name not in NOT_A_DIFFERENCE}


# --- the server -------------------------------------------------------------------------

def serve(path: str):
  """Answers commands until killed; returns in each forked child, with its request."""
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(path)
  listener.listen(8)  # Commands sent while it imports wait for it.
  own, running = environment(os.environ), {}  # pid: the client's connection
  for name in PRELOADED:  # Some set variables (TF_CPP_MIN_LOG_LEVEL): not the commands'.
    importlib.import_module(name)
  loaded = [name for name in NOT_PRELOADED if name in sys.modules]
  assert not loaded and threading.active_count() == 1, f'preloading imported {loaded}'
  while True:
    ready = select.select([listener], [], [], 0.05)[0]
    reap(running)
    if not ready:
      continue
    connection, _ = listener.accept()
    request = receive(connection)
    pid = os.fork() if environment(request['env']) == own else None
    if pid == 0:
      listener.close()
      for other in [connection, *running.values()]:
        other.close()
      return request
    for fd in request['fds']:  # The child's now, or the fresh Python's.
      os.close(fd)
    if pid is None:
      answer(connection, 'fresh')
      continue
    connection.sendall(f'{pid}\n'.encode())
    running[pid] = connection


def receive(connection: socket.socket) -> dict:
  header, fds, _, _ = socket.recv_fds(connection, 8, 3)
  size, body = int.from_bytes(header, 'big'), b''
  while len(body) < size:
    body += connection.recv(size - len(body))
  return {**json.loads(body), 'fds': fds}


def answer(connection: socket.socket, text: str) -> None:
  connection.sendall(f'{text}\n'.encode())
  connection.close()


def reap(running: dict) -> None:
  """Each finished child's exit status, sent to its client."""
  while running:
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid == 0:
      return
    answer(running.pop(pid), str(os.waitstatus_to_exitcode(status)))


def run(request: dict) -> None:
  """In the forked child: the command, in the client's place."""
  for target, fd in enumerate(request['fds']):
    os.dup2(fd, target)
    os.close(fd)
  os.chdir(request['cwd'])
  os.environ.clear()
  os.environ.update(request['env'])
  sys.path[0] = request['cwd']  # As `python -m` puts it.
  argv = request['argv']
  from tests import readme_substitutions  # pylint: disable=import-outside-toplevel
  if argv[0] == PLAIN:
    readme_substitutions.run_python(argv[1:])
    return
  sys.argv = [readme_substitutions.__file__, *argv]
  readme_substitutions.main()


# --- the client -------------------------------------------------------------------------

def fresh(args: list[str]) -> None:
  if args[0] == PLAIN:
    os.execv(sys.executable, [sys.executable, *args[1:]])
  os.execv(sys.executable, [sys.executable, '-m', 'tests.readme_substitutions', *args])


def client(path: str, args: list[str]) -> None:
  server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  try:
    server.connect(path)
  except OSError:
    fresh(args)
  body = json.dumps({'argv': args, 'cwd': os.getcwd(), 'env': dict(os.environ)}).encode()
  socket.send_fds(server, [len(body).to_bytes(8, 'big')], [0, 1, 2])
  server.sendall(body)
  replies = server.makefile()
  pid = replies.readline().strip()
  if pid in ('fresh', ''):
    fresh(args)
  for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(stop, lambda signum, frame: os.kill(int(pid), signum))
  status = int(replies.readline())  # Resumed after a signal's handler (PEP 475).
  if status < 0:  # Ended by a signal: so is the client.
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
  sys.exit(status)


def end(code) -> None:
  """The forked child ends as Python ends a program that exits with `code` (SystemExit's),
  less the teardown of every module, a second with jax and TensorFlow loaded: its threads
  joined, its exit functions run, its streams flushed. Other exceptions end it as they would
  a program."""
  status = code if isinstance(code, int) else 0 if code is None else 1
  if not isinstance(code, int | None):
    print(code, file=sys.stderr)
  threading._shutdown()  # pylint: disable=protected-access  # As Python's exit does.
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in (sys.stdout, sys.stderr):
    with contextlib.suppress(Exception):
      stream.flush()
  os._exit(status)


if __name__ == '__main__':
  if sys.argv[1] == 'serve':
    request = serve(sys.argv[2])
    try:
      run(request)
    except SystemExit as exit_request:
      end(exit_request.code)
    end(None)
  else:
    client(sys.argv[1], sys.argv[2:])
