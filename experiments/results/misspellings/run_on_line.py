"""One run-on line with seven slips (no end mark in it), and the same line twice, corrected
as `nplm correct` corrects a line (README.md here, "Text without end marks"):

  PYTHONPATH=CHECKOUT python experiments/results/misspellings/run_on_line.py WORKDIR...

CHECKOUT: the nplm to time. Prints, per workdir and line, the words changed and the median
seconds of three corrections, each by a corrector of its own (none of the others' kept),
after one correction that compiles the model's programs."""

import statistics
import sys
import time

import nplm
from nplm.use.correction import Corrector

LINE = ('the jury said it was recieved by the comittee and the goverment said that the new law '
        'would be pased next week but the mayor said he did not beleive it and the city '
        'counsil would not agree to it untill the state had paid for it')

for workdir in sys.argv[1:]:
  model = nplm.load(workdir).read
  Corrector(model).correct('the jury said it .')
  for text in (LINE, f'{LINE} and {LINE}'):
    seconds = []
    for _ in range(3):
      corrector = Corrector(model)
      started = time.perf_counter()
      correction = corrector.correct(text)
      seconds.append(time.perf_counter() - started)
    changed = ', '.join(f'{c.typed} -> {c.corrected}' for c in correction.changes)
    print(f'{workdir}: {len(text.split())} tokens, {len(correction.changes)} changed '
          f'({changed}), {statistics.median(seconds):.2f} s', flush=True)
