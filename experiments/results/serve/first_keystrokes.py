"""A fresh server's first keystrokes: what compiling costs a search box before its shapes are
met (experiments/results/serve/README.md):

  PYTHONPATH=CHECKOUT python experiments/results/serve/first_keystrokes.py WORKDIR [SENTENCE...]

Starts `python -m nplm serve --port=0` (the checkout's), times its start to the ready line,
then sends one /complete per keystroke of each sentence in turn (its prefixes one character
longer each; k = 8, max_words = 3, typos read: the page's request), and prints per sentence
the keystrokes' median, the slowest five and those over 200 ms, in milliseconds."""

import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

SENTENCES = ('The grand jury said Friday an investigation of recent primary elections produced '
             'no evidence', 'It was a long time before the committee met again to hear the new '
             'report')

workdir, sentences = sys.argv[1], sys.argv[2:] or SENTENCES
started = time.perf_counter()
server = subprocess.Popen([sys.executable, '-m', 'nplm', 'serve', f'--workdir={workdir}',
                           '--port=0'], stdout=subprocess.PIPE, text=True,
                          env={**os.environ, 'PYTHONUNBUFFERED': '1'})
ready = server.stdout.readline()
print(f'{workdir}: ready after {time.perf_counter() - started:.2f} s', flush=True)
url = ready.split(' at ')[1].split()[0].rstrip('/')
try:
  for sentence in sentences:
    seconds = []
    for end in range(1, len(sentence) + 1):
      body = json.dumps({'prefix': sentence[:end], 'k': 8, 'max_words': 3}).encode()
      sent = time.perf_counter()
      urllib.request.urlopen(urllib.request.Request(f'{url}/complete', body)).read()
      seconds.append(time.perf_counter() - sent)
    slow = [f'{sentence[:i + 1]!r} {1000 * s:.0f}' for i, s in enumerate(seconds) if s > 0.2]
    print(f'  {sentence[:30]!r}...: {len(seconds)} keystrokes, median '
          f'{1000 * statistics.median(seconds):.1f} ms, slowest '
          f'{[round(1000 * s) for s in sorted(seconds)[-5:]]} ms, {sum(seconds):.2f} s in all; '
          f'over 200 ms: {slow}', flush=True)
finally:
  server.terminate()
  server.wait()
