"""Misspelt sentences typed several to a line, each line corrected whole as `nplm correct`
corrects a line, against each sentence corrected alone (README.md here):

  PYTHONPATH=CHECKOUT python experiments/results/misspellings/lines_of_sentences.py \
      WORKDIR DATA_DIR [SENTENCES] [A_LINE] [unmarked]

CHECKOUT: the nplm to time. The sentences are the misspellings benchmark's (Brown's test
sentences, one word of each misspelt, --seed=0, SENTENCES of them drawn: 600 by default), in
corpus order, joined A_LINE (3) to a line; the Corrector has nplm correct's defaults.
`unmarked`: the lines typed without the sentences' end marks (each token of '.', '!' and '?'
alone left out: run-on text, as a transcript or a chat is typed), the marks put back in the
corrections before they are counted. Prints how many misspellings each way restores as
Brown wrote them, and its seconds."""

import sys
import time

import nplm
from experiments.benchmarks.brown_sentences import brown_splits, reads_back, sentences_of
from experiments.benchmarks.misspellings import (listed_misspellings, misspellings_by_word,
                                                 occurrences, outcome)
from nplm.use.correction import Corrector

workdir, data_dir = sys.argv[1:3]
count, a_line = (int(sys.argv[3]) if len(sys.argv) > 3 else 600,
                 int(sys.argv[4]) if len(sys.argv) > 4 else 3)
unmarked = sys.argv[5:] == ['unmarked']
by_word, _ = misspellings_by_word(listed_misspellings(''))
readable = [s for s in sentences_of(brown_splits(data_dir)['test']) if reads_back(s)]
found = occurrences(readable, by_word, count, seed=0)
corrector = Corrector(nplm.load(workdir).read)

started = time.perf_counter()
alone = [corrector.correct(o.text).tokens for o in found]
alone_seconds = time.perf_counter() - started



def is_mark(token: str) -> bool:
  return unmarked and set(token) <= set('.!?')


corrector = Corrector(nplm.load(workdir).read)  # Its own: none of the sentences' kept.
started, in_lines = time.perf_counter(), []
for first in range(0, len(found), a_line):
  line = found[first:first + a_line]
  typed = [[t for t in o.text.split() if not is_mark(t)] for o in line]
  tokens = list(corrector.correct(' '.join(' '.join(t) for t in typed)).tokens)
  for o, kept in zip(line, typed):  # A correction replaces a word by one word.
    corrected, tokens = tokens[:len(kept)], tokens[len(kept):]
    in_lines.append([t if is_mark(t) else corrected.pop(0) for t in o.sentence])
lines_seconds = time.perf_counter() - started

for label, corrected, seconds in (('each sentence alone', alone, alone_seconds),
                                  (f'{a_line} sentences a line{", unmarked" * unmarked}',
                                   in_lines, lines_seconds)):
  restored = sum(outcome(o, tokens) == 'restored' for o, tokens in zip(found, corrected))
  print(f'{label}: {restored} of {len(found)} misspellings restored '
        f'({100 * restored / len(found):.1f}%), {seconds:.1f} s')
