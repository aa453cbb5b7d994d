"""The seconds of one correction of a 33-word prefix under a recurrent model (README.md here):

  PYTHONPATH=CHECKOUT python experiments/results/serve/correction_seconds.py WORKDIR

CHECKOUT: the nplm to time. The three shorter prefixes before it compile the shapes."""

import sys
import time

import nplm
from nplm.use.correction import Corrector

corrector = Corrector(nplm.load(sys.argv[1]).read)
typed = tuple(('The glorious news had been held up pending Heavenly confirmation of the elevation '
               'of a new Supreme Bishop , Huey Short -- a candidate accepted by the Boone faction '
               'after lots had been').split())
for words in range(len(typed) - 3, len(typed) + 1):
  started = time.perf_counter()
  corrector.corrected_tokens(typed[:words], ended=False)
print(f'{len(typed)} words: {time.perf_counter() - started:.2f} s')
