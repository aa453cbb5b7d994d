"""What `nplm predict --typos` costs a prefix, against predict as typed (docs/using-a-model.md):

  PYTHONPATH=CHECKOUT python experiments/results/typo_completion/predict_typos_cost.py \
      DATA_DIR WORKDIR...

The prefixes are the misspellings benchmark's typed Brown test sentences (--seed=0, 200
drawn), each cut after the word after its misspelling, a space ending it (no word being
typed). Prints, per workdir, the milliseconds a prefix of nplm.use.prediction.predictions
(k = 10) as typed and with the default corrector, after one call of each that compiles."""

import sys
import time

import nplm
from experiments.benchmarks.brown_sentences import brown_splits, reads_back, sentences_of
from experiments.benchmarks.misspellings import (listed_misspellings, misspellings_by_word,
                                                 occurrences)
from nplm.use.correction import Corrector
from nplm.use.prediction import predictions

data_dir, workdirs = sys.argv[1], sys.argv[2:]
by_word, _ = misspellings_by_word(listed_misspellings(''))
readable = [s for s in sentences_of(brown_splits(data_dir)['test']) if reads_back(s)]
found = occurrences(readable, by_word, 200, seed=0)
prefixes = [' '.join(o.text.split(' ')[:o.position + 2]) + ' ' for o in found]
for workdir in workdirs:
  model = nplm.load(workdir).read
  corrector = Corrector(model)
  for reader in (None, corrector):
    predictions(model, 'the jury said', 10, reader)
  for label, reader in (('as typed', None), ('--typos', corrector)):
    started = time.perf_counter()
    for prefix in prefixes:
      predictions(model, prefix, 10, reader)
    each = 1000 * (time.perf_counter() - started) / len(prefixes)
    print(f'{workdir} {label}: {each:.1f} ms a prefix ({len(prefixes)} prefixes)', flush=True)
