"""Milliseconds a keystroke of nplm complete's Completer (typos read), no server: Brown's test
sentences typed (as experiments.benchmarks.serve's keystroke rows), 300 keystrokes to compile,
then 500 timed on a fresh Completer (README.md here):

  PYTHONPATH=CHECKOUT python experiments/results/serve/keystroke_seconds.py WORKDIR DATA_DIR
"""

import sys
import time

import nplm
from experiments.benchmarks import serve
from experiments.benchmarks.brown_sentences import brown_splits
from nplm.use.completion import Completer

model = nplm.load(sys.argv[1])
typed = serve.keystrokes(serve.typed_sentences(brown_splits(sys.argv[2])['test']))
completer = Completer(model.read, typos=True)
for text in typed[:300]:
  completer.complete(text, k=10, max_words=3)
completer = Completer(model.read, typos=True)
started = time.perf_counter()
for text in typed[300:800]:
  completer.complete(text, k=10, max_words=3)
print(f'{(time.perf_counter() - started) / 500 * 1e3:.1f} ms per keystroke')
