r"""Requests per second and latency of `nplm serve`: /score, /complete, and /complete of a word
being typed, at 1, 8 and 32 concurrent clients, for each trained run named.

  python -m experiments.benchmarks.serve --workdirs=runs/mlp9,runs/lstm --out=/tmp/serve

For each workdir it starts `nplm serve --port=0` as a user does, warms every request up once
(each new text length compiles), then for each endpoint and client count runs the clients
for --seconds, each sending its next request as soon as the last is answered (closed loop),
over texts taken in turn from TEXTS (TYPING for a word being typed: what the page sends
between keystrokes, read back and spelt out by a subword model, nplm.use.prompts). Requests/s: answered requests over the wall time;
p50/p99: of each request's latency, client-side (the queue for the model included).
"""

import concurrent.futures
import json
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
from absl import flags

from experiments.benchmarks import harness
from nplm.cli import fail, refuse_arguments, run_experiment

FLAGS = flags.FLAGS
# What a search box and a spelling checker send: short prefixes, one sentence at a time.
TEXTS = ['The jury said', 'It was the first time that', 'He did not know what',
         'The city of Atlanta', 'In the morning the', 'She had never seen such a']
TYPING = ['The jury sa', 'It was the fir', 'He did not kn', 'The city of Atl',
          'In the morn', 'She had never seen su']
# Each row: (its name in the report, the endpoint, the texts it sends).
REQUESTS = [('/score', 'score', TEXTS), ('/complete', 'complete', TEXTS),
            ('/complete, typing', 'complete', TYPING)]
STARTUP_SECONDS = 300


def start_server(workdir: str) -> tuple[subprocess.Popen, str, str]:
  """(the server, its URL, what it serves) once it listens."""
  process = subprocess.Popen([sys.executable, '-m', 'nplm.cli', 'serve', f'--workdir={workdir}',
                              '--port=0'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
  lines = []
  reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()),
                            daemon=True)
  reader.start()
  reader.join(STARTUP_SECONDS)
  if not lines or not lines[0].startswith('serving '):
    process.kill()
    fail(f'nplm serve --workdir={workdir} did not start: {process.stderr.read().strip()}')
  served = lines[0].split(' from ')[0].removeprefix('serving ')
  return process, lines[0].split(' at ')[1].split(' ')[0], served


def body(endpoint: str, text: str) -> bytes:
  request = ({'texts': [text + ' .']} if endpoint == 'score'
             else {'prefix': text, 'k': 10, 'max_words': 3})
  return json.dumps(request).encode()


def ask(url: str, payload: bytes) -> None:
  with urllib.request.urlopen(urllib.request.Request(url, data=payload), timeout=120) as answer:
    if answer.status != 200:
      raise RuntimeError(f'{url} answered {answer.status}')
    answer.read()


def measure(url: str, endpoint: str, texts: list[str], clients: int, seconds: float) -> dict:
  """Closed-loop clients for `seconds`: {'requests', 'requests_per_second', 'p50_ms',
  'p99_ms'}."""
  latencies, deadline = [], time.perf_counter() + seconds

  def client(number: int) -> list[float]:
    mine, turn = [], number
    while time.perf_counter() < deadline:
      started = time.perf_counter()
      ask(url + endpoint, body(endpoint, texts[turn % len(texts)]))
      mine.append(time.perf_counter() - started)
      turn += clients
    return mine

  started = time.perf_counter()
  with concurrent.futures.ThreadPoolExecutor(clients) as pool:
    for mine in pool.map(client, range(clients)):
      latencies += mine
  wall = time.perf_counter() - started
  return {'requests': len(latencies), 'requests_per_second': len(latencies) / wall,
          'p50_ms': 1e3 * float(np.percentile(latencies, 50)),
          'p99_ms': 1e3 * float(np.percentile(latencies, 99))}


def benchmark(workdirs: list[str], client_counts: list[int], seconds: float) -> dict:
  rows = []
  for workdir in workdirs:
    process, url, served = start_server(workdir)
    try:
      for name, endpoint, texts in REQUESTS:
        for text in texts:  # Each length compiled before the clock starts.
          ask(url + endpoint, body(endpoint, text))
        for clients in client_counts:
          rows.append({'workdir': workdir, 'model': served, 'endpoint': name,
                       'clients': clients, **measure(url, endpoint, texts, clients, seconds)})
    finally:
      process.terminate()
      process.wait(60)
  return {'machine': harness.machine_info(), 'seconds': seconds, 'rows': rows}


def format_report(report: dict, markdown: bool = False) -> str:
  table = [['run', 'endpoint', 'clients', 'requests', 'requests/s', 'p50 ms', 'p99 ms']]
  table += [[f'{row["workdir"]} ({row["model"]})', row['endpoint'], str(row['clients']),
             f'{row["requests"]:,}', f'{row["requests_per_second"]:,.1f}',
             f'{row["p50_ms"]:,.1f}', f'{row["p99_ms"]:,.1f}'] for row in report['rows']]
  return '\n'.join([harness.machine_line(report['machine']),
                    f'Closed-loop clients for {report["seconds"]:g} s each; latency measured '
                    'by the client, the wait for the model included.', '',
                    *harness.table_lines(table, markdown)]) + '\n'


def main(argv):
  refuse_arguments(argv)
  if not FLAGS.workdirs:
    fail('--workdirs names the trained runs to serve, comma-separated')
  counts = [int(count) for count in FLAGS.clients.split(',')]
  if min(counts) < 1 or FLAGS.seconds <= 0:
    fail('--clients must be positive counts and --seconds positive')
  harness.report(benchmark(FLAGS.workdirs.split(','), counts, FLAGS.seconds), format_report,
                 FLAGS.out)


if __name__ == '__main__':
  flags.DEFINE_string('workdirs', '', 'Trained runs to serve, comma-separated.')
  flags.DEFINE_string('clients', '1,8,32', 'Concurrent client counts.')
  flags.DEFINE_float('seconds', 10.0, 'Seconds each measurement runs its clients.')
  flags.DEFINE_string('out', '', 'If set, OUT.json and OUT.md receive the report.')
  run_experiment(main)
