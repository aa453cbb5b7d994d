"""What a recurrent model's change does to the ln p's further on than READ_ON tokens past it
(nplm.use.variants' screen, README.md here): on run-on lines of three of the misspellings
benchmark's sentences (--seed=0, end marks left out), every first-round variant read to the
end:

  PYTHONPATH=. python experiments/results/misspellings/read_on_effect.py WORKDIR DATA_DIR \
      [READ_ON] [LINES]

Prints the largest and 99th percentile of |the variant's ln p's past READ_ON minus the
sentence's|, how far below the best screened estimate the variant that wins whole was (the
margin SCREEN_NATS must cover), and how many variants lie within 3, 5 and 10 nats of it."""

import sys

import numpy as np

import nplm
from experiments.benchmarks.brown_sentences import brown_splits, reads_back, sentences_of
from experiments.benchmarks.misspellings import (listed_misspellings, misspellings_by_word,
                                                 occurrences)
from nplm.use.correction import Corrector
from nplm.use.variants import variant_log_probs

workdir, data_dir = sys.argv[1:3]
read_on = int(sys.argv[3]) if len(sys.argv) > 3 else 10
lines = int(sys.argv[4]) if len(sys.argv) > 4 else 30
by_word, _ = misspellings_by_word(listed_misspellings(''))
readable = [s for s in sentences_of(brown_splits(data_dir)['test']) if reads_back(s)]
found = occurrences(readable, by_word, 3 * lines, seed=0)
model = nplm.load(workdir).read
corrector = Corrector(model)
effects, gaps, within = [], [], {3: [], 5: [], 10: []}
for first in range(0, 3 * lines, 3):
  typed = tuple(t for o in found[first:first + 3] for t in model.tokenizer.tokens(o.text)
                if set(t) - set('.!?'))
  variants = [(i, w) for i, x in enumerate(typed) for w in corrector.candidates(x)]
  current, scored = variant_log_probs(model, typed, None, variants, True)
  gains = np.array([corrector.channel.log_prob(typed[i], w) - corrector.channel.log_prob(
      typed[i], typed[i]) for i, w in variants])
  whole = np.array([s.sum() for s in scored]) + gains
  past = np.array([(s[i + read_on + 1:] - current[i + read_on + 1:]).sum()
                   for (i, _), s in zip(variants, scored)])
  screened = whole - past
  effects += list(np.abs(past))
  gaps.append(screened.max() - screened[whole.argmax()])
  for nats, counts in within.items():
    counts.append(int((screened >= screened.max() - nats).sum()))
print(f'{len(effects)} variants of {lines} lines, READ_ON {read_on}: past it, |effect| at most '
      f'{max(effects):.2f} nats (99th percentile {np.percentile(effects, 99):.2f}); the winner '
      f'at most {max(gaps):.3f} nats below the best screened; within 3, 5, 10 nats of it: '
      + ', '.join(f'median {np.median(c):g}, most {max(c)}' for c in within.values()))
