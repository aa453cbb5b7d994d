r"""Requests per second and latency of `nplm serve`: /score, /complete, /complete of a word
being typed, and /complete as a person types, at 1, 8 and 32 concurrent clients, for each
trained run named.

  python -m experiments.benchmarks.serve --workdirs=runs/mlp9,runs/lstm --out=/tmp/serve

For each workdir it starts `nplm serve --port=0` as a user does, warms every request up once
(each new text length compiles), then for each endpoint and client count runs the clients
for --seconds, each sending its next request as soon as the last is answered (closed loop),
over texts taken in turn from TEXTS (TYPING for a word being typed: what the page sends
between keystrokes, read back and spelt out by a subword model, nplm.use.prompts).
The keystroke rows send Brown's test sentences (--data_dir) as a person types them, a prefix
per keystroke, each prefix once in the run (`Keystrokes`): the server's caches see what
typing gives them, where the rows above send their six texts again and again. They are
sent with `"typos": true` (the default: the word being typed read through the spelling
channel, the words before it corrected) and `false` (as typed). Requests/s: answered
requests over the wall time; p50/p99: of each request's latency, client-side (the queue for
the model included).
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
from experiments.benchmarks.brown_sentences import brown_splits, reads_back, sentences_of
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
# Each keystroke row: (its name in the report, its request's "typos").
KEYSTROKE_ROWS = [('/complete, keystrokes', True), ('/complete, keystrokes, typos off', False)]
TYPED_WORDS = (3, 40)  # The words of a sentence typed, at least and at most.
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


def body(endpoint: str, text: str, typos: bool | None = None) -> bytes:
  request = ({'texts': [text + ' .']} if endpoint == 'score'
             else {'prefix': text, 'k': 10, 'max_words': 3})
  if typos is not None:
    request['typos'] = typos
  return json.dumps(request).encode()


def keystrokes(sentences: list[list[str]]) -> list[str]:
  """Each sentence typed a character at a time, its words spaced: every prefix as typed."""
  typed = [' '.join(words) for words in sentences]
  return [text[:end] for text in typed for end in range(1, len(text) + 1)]


def typed_sentences(tokens: list[str]) -> list[list[str]]:
  """A split's sentences that a person types as Brown's tokens, of TYPED_WORDS words."""
  fewest, most = TYPED_WORDS
  return [s for s in sentences_of(tokens) if fewest <= len(s) <= most and reads_back(s)]


class Keystrokes:
  """Brown's test sentences typed, handed out one prefix at a time to all clients of all the
  keystroke rows, never the same twice in a run (unless the split runs out: `wrapped`)."""

  def __init__(self, typed: list[str]):
    self.typed, self.sent, self.lock = typed, 0, threading.Lock()

  def __call__(self, turn: int) -> str:
    del turn  # The next keystroke, whichever client asks.
    with self.lock:
      self.sent += 1
      return self.typed[(self.sent - 1) % len(self.typed)]

  @property
  def wrapped(self) -> bool:
    return self.sent > len(self.typed)


def ask(url: str, payload: bytes) -> None:
  with urllib.request.urlopen(urllib.request.Request(url, data=payload), timeout=120) as answer:
    if answer.status != 200:
      raise RuntimeError(f'{url} answered {answer.status}')
    answer.read()


def measure(url: str, endpoint: str, text_of, clients: int, seconds: float,
            typos: bool | None = None) -> dict:
  """Closed-loop clients for `seconds`, client n's k-th request sending text_of(n + k *
  clients): {'requests', 'requests_per_second', 'p50_ms', 'p99_ms'}."""
  latencies, deadline = [], time.perf_counter() + seconds

  def client(number: int) -> list[float]:
    mine, turn = [], number
    while time.perf_counter() < deadline:
      started = time.perf_counter()
      ask(url + endpoint, body(endpoint, text_of(turn), typos))
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


def benchmark(workdirs: list[str], client_counts: list[int], seconds: float,
              splits: dict[str, list[str]]) -> dict:
  rows, wrapped = [], []
  typed = keystrokes(typed_sentences(splits['test']))
  # Each prefix length (the lengths compiled) before the clock starts: the longest sentence
  # of valid's, a word and a word's beginning at a time.
  longest = max(typed_sentences(splits['valid']), key=len, default=[])
  warm_up = [' '.join(longest[:words]) + end for words in range(len(longest) + 1)
             for end in (' ', ' a')]
  for workdir in workdirs:
    process, url, served = start_server(workdir)
    try:
      for name, endpoint, texts in REQUESTS:
        for text in texts:  # Each length compiled before the clock starts.
          ask(url + endpoint, body(endpoint, text))
        for clients in client_counts:
          rows.append({'workdir': workdir, 'model': served, 'endpoint': name,
                       'clients': clients, **measure(url, endpoint, lambda turn, texts=texts:
                                                     texts[turn % len(texts)], clients,
                                                     seconds)})
      sent = Keystrokes(typed)  # One stream for the server's keystroke rows.
      for name, typos in KEYSTROKE_ROWS:
        for text in warm_up:
          ask(url + 'complete', body('complete', text, typos))
        for clients in client_counts:
          rows.append({'workdir': workdir, 'model': served, 'endpoint': name,
                       'clients': clients, **measure(url, 'complete', sent, clients, seconds,
                                                     typos)})
      if sent.wrapped:
        wrapped.append(workdir)
    finally:
      process.terminate()
      process.wait(60)
  return {'machine': harness.machine_info(), 'seconds': seconds, 'keystrokes': len(typed),
          'wrapped': wrapped, 'rows': rows}


def format_report(report: dict, markdown: bool = False) -> str:
  table = [['run', 'endpoint', 'clients', 'requests', 'requests/s', 'p50 ms', 'p99 ms']]
  table += [[f'{row["workdir"]} ({row["model"]})', row['endpoint'], str(row['clients']),
             f'{row["requests"]:,}', f'{row["requests_per_second"]:,.1f}',
             f'{row["p50_ms"]:,.1f}', f'{row["p99_ms"]:,.1f}'] for row in report['rows']]
  typed = (f'The keystroke rows: {report["keystrokes"]:,} prefixes typed (Brown\'s test '
           'sentences of {}-{} words), each sent once in a server\'s run'.format(*TYPED_WORDS))
  if report['wrapped']:
    typed += (f'; they ran out and were sent again for {", ".join(report["wrapped"])} (its '
              'caches warm: those rows are faster than typing)')
  return '\n'.join([harness.machine_line(report['machine']),
                    f'Closed-loop clients for {report["seconds"]:g} s each; latency measured '
                    'by the client, the wait for the model included.', typed + '.', '',
                    *harness.table_lines(table, markdown)]) + '\n'


def main(argv):
  refuse_arguments(argv)
  if not FLAGS.workdirs:
    fail('--workdirs names the trained runs to serve, comma-separated')
  counts = [int(count) for count in FLAGS.clients.split(',')]
  if min(counts) < 1 or FLAGS.seconds <= 0:
    fail('--clients must be positive counts and --seconds positive')
  try:
    splits = brown_splits(FLAGS.data_dir)
  except harness.CorpusNotPrepared as error:
    fail(error)
  if not typed_sentences(splits['test']):
    fail('Brown\'s test split has no sentence of {}-{} words to type'.format(*TYPED_WORDS))
  harness.report(benchmark(FLAGS.workdirs.split(','), counts, FLAGS.seconds, splits),
                 format_report, FLAGS.out)


if __name__ == '__main__':
  flags.DEFINE_string('workdirs', '', 'Trained runs to serve, comma-separated.')
  flags.DEFINE_string('clients', '1,8,32', 'Concurrent client counts.')
  flags.DEFINE_float('seconds', 10.0, 'Seconds each measurement runs its clients.')
  flags.DEFINE_string('out', '', 'If set, OUT.json and OUT.md receive the report.')
  flags.DEFINE_string('data_dir', '', 'TFDS data dir of the prepared Brown corpus, whose test '
                      'sentences the keystroke rows type (empty: TFDS default).')
  run_experiment(main)
