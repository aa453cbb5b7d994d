"""`nplm predict --typos` on a misspelt word while it is typed (docs/using-a-model.md):

  PYTHONPATH=CHECKOUT python experiments/results/typo_completion/predict_being_typed.py \
      DATA_DIR WORKDIR [SENTENCES]

The typo completion benchmark's prefixes (experiments.benchmarks.typo_completion: its
misspelt words typed whole, or to their first slip, no space after them; SENTENCES of the
misspellings benchmark's draw, --seed=0, 1,000 by default). For each, the 5 tokens
nplm.use.prediction.predictions lists with the default corrector: how often the word meant
is first and among them; and where the typed word is outside the vocabulary (predict reads
one of it whole, complete as still typed), how often the list, <unk> left out (complete never
proposes it), begins the first words of nplm complete's 5 completions of one word
(--max_words=1, the same corrector's channel), in their order.
Prints one line per cut, with predict's milliseconds a prefix."""

import sys
import time

import nplm
from experiments.benchmarks.brown_sentences import brown_splits, reads_back, sentences_of
from experiments.benchmarks.misspellings import (listed_misspellings, misspellings_by_word,
                                                 occurrences)
from experiments.benchmarks.typo_completion import prefixes
from nplm.data.vocab import UNK
from nplm.use.completion import Completer
from nplm.use.correction import Corrector
from nplm.use.prediction import predictions

K = 5


def _known(words: list[str]) -> list[str]:
  return [word for word in words if word != UNK]


data_dir, workdir = sys.argv[1], sys.argv[2]
limit = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
by_word, _ = misspellings_by_word(listed_misspellings(''))
readable = [s for s in sentences_of(brown_splits(data_dir)['test']) if reads_back(s)]
found = occurrences(readable, by_word, limit, seed=0)
model = nplm.load(workdir).read
corrector, completer = Corrector(model), Completer(model)
predictions(model, 'the jury said', K, corrector)  # Compiled before the clock starts.
for cut in ('whole', 'first slip'):
  typed = [prefixes(o)[('misspelt', cut)] for o in found]
  meant = [o.sentence[o.position] for o in found]
  started = time.perf_counter()
  listed = [[p.token for p in predictions(model, prefix, K, corrector)[1]] for prefix in typed]
  seconds = time.perf_counter() - started
  first = sum(words[:1] == [word] for words, word in zip(listed, meant))
  among = sum(word in words for words, word in zip(listed, meant))
  unknown = [(words, prefix) for words, prefix in zip(listed, typed)
             if prefix.split()[-1] not in model.vocab.words]
  same = sum(_known(words) == [c.tokens[0] for c in completer.complete(prefix, K, max_words=1)
                               ][:len(_known(words))] for words, prefix in unknown)
  print(f'{workdir} misspelt, {cut}: the word meant first {first / len(found):.1%}, among '
        f'{K} {among / len(found):.1%}; the same list as complete --max_words=1: '
        f'{same} of the {len(unknown)} outside the vocabulary ({1000 * seconds / len(found):.1f} ms a prefix)', flush=True)
