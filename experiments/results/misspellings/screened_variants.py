"""A recurrent model's corrections with its variants screened (nplm.use.variants' READ_ON,
the default) against every variant read to the sentence's end (READ_ON so large that each
is), on Brown's test sentences with one slip each (the misspellings benchmark's, --seed=0),
alone and three to a run-on line (their end marks left out), in one run (README.md here):

  PYTHONPATH=CHECKOUT python experiments/results/misspellings/screened_variants.py \
      WORKDIR DATA_DIR [SENTENCES]

Prints, each way, how many texts are corrected alike, the largest difference between
their ln P(w) P(typed | w), and the seconds each took (each with a corrector of its own,
after one correction that compiles the model's programs)."""

import sys
import time

import nplm
from experiments.benchmarks.brown_sentences import brown_splits, reads_back, sentences_of
from experiments.benchmarks.misspellings import (listed_misspellings, misspellings_by_word,
                                                 occurrences)
from nplm.use import variants
from nplm.use.correction import Corrector

workdir, data_dir = sys.argv[1:3]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 300
by_word, _ = misspellings_by_word(listed_misspellings(''))
readable = [s for s in sentences_of(brown_splits(data_dir)['test']) if reads_back(s)]
found = occurrences(readable, by_word, count, seed=0)
model = nplm.load(workdir).read
unmarked = lambda text: [t for t in text.split() if set(t) - set('.!?')]
texts = {'alone': [o.text for o in found],
         'three a line, unmarked': [' '.join(t for o in found[k:k + 3] for t in unmarked(o.text))
                                    for k in range(0, count, 3)]}
Corrector(model).correct('the jury said it was recieved by the comittee and the goverment .')
screened = variants.READ_ON
for kind, lines in texts.items():
  corrected, seconds = {}, {}
  for label, read_on in (('whole', 10**9), ('screened', screened)):
    variants.READ_ON = read_on
    corrector = Corrector(model)
    started = time.perf_counter()
    corrected[label] = [corrector.correct(text) for text in lines]
    seconds[label] = time.perf_counter() - started
  pairs = list(zip(corrected['whole'], corrected['screened']))
  alike = sum(a.tokens == b.tokens for a, b in pairs)
  differs = max(abs(a.log_prob - b.log_prob) for a, b in pairs)
  print(f'{kind}: {len(lines)} texts, {alike} corrected alike, ln P differs by at most '
        f'{differs:.1e}; every variant whole {seconds["whole"]:.1f} s, screened (READ_ON '
        f'{screened}) {seconds["screened"]:.1f} s ({seconds["whole"] / seconds["screened"]:.2f}x)',
        flush=True)
