"""The milliseconds of one completion (k = 8, typos off, as the page asks) after prefixes of
2 to 26 words, the median of 5 (README.md here):

  PYTHONPATH=CHECKOUT python experiments/results/serve/completion_seconds.py WORKDIR

CHECKOUT: the nplm to time. Each prefix is completed whole and with a letter of the next word
typed; both are read once before they are timed (their shapes compiled)."""

import statistics
import sys
import time

import nplm
from nplm.use.completion import Completer

completer = Completer(nplm.load(sys.argv[1]).read, typos=False)
words = ('It urged that the city take steps to remedy this problem and that the office of the '
         'mayor should be given more power over the').split()
for count in (2, 5, 10, 20, 26):
  prefixes = [' '.join(words[:count]) + ' ', ' '.join(words[:count]) + ' a']
  seconds = []
  for repeat in range(6):
    started = time.perf_counter()
    for prefix in prefixes:
      completer.complete(prefix, 8)
    if repeat:
      seconds.append((time.perf_counter() - started) / len(prefixes))
  print(f'{count} words: {statistics.median(seconds) * 1e3:.1f} ms')
