"""A model's word features C in word2vec's text and binary formats, and their scores on the
standard word similarity and analogy benchmarks, measured by gensim.

Every nplm model keeps its word features at params['model']['C']['embedding'] ([|V|, m], row i
the word of id i; with tied embeddings the same table is the output layer). The benchmarks:
WordSim-353 [Finkelstein et al. 2002] and SimLex-999 [Hill et al. 2015], scored by the Spearman
ρ between the human ratings and the cosine similarities; Google's analogy questions [Mikolov
et al. 2013a, section 4.1], "a is to b as c is to ?" answered by the word nearest to
b - a + c (3CosAdd). gensim's own evaluation is used, with its defaults (the 300,000 most
frequent words, case folded: the first, most frequent, spelling of a word stands for it, which
our frequency-sorted ids give), so the numbers compare with any gensim-evaluated vectors.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import numpy as np
from gensim.models import KeyedVectors
from gensim.test.utils import datapath

from nplm.errors import ConfigError
from nplm.files import atomic_file, write_text_atomically
from nplm.use.neighbours import feature_vectors
from nplm.use.trained import TrainedModel, load_trained

# gensim's evaluation files (gensim/test/test_data), by the name nplm reports them under.
PAIR_BENCHMARKS = {'wordsim353': 'wordsim353.tsv', 'simlex999': 'simlex999.txt'}
ANALOGY_BENCHMARK = 'questions-words.txt'
# gensim's default, written out because the scores depend on it (and on case folding,
# case_insensitive=True, also its default).
RESTRICT_VOCAB = 300_000
# A score over less than this share of a benchmark's pairs or questions measures the few
# words covered, not the vectors: it is flagged (`low_coverage`) as not comparable.
MIN_COVERAGE = 0.5


@dataclasses.dataclass(frozen=True, eq=False)
class WordVectors:
  words: tuple[str, ...]  # In id order: most frequent first.
  vectors: np.ndarray  # float32 [len(words), m]; row i is words[i]'s.

  @property
  def dim(self) -> int:
    return self.vectors.shape[1]


def of_trained(trained: TrainedModel) -> WordVectors:
  """Its C as saved (float32; a count model, which has none, is a one-line error)."""
  return WordVectors(trained.vocab.words, feature_vectors(trained).astype(np.float32))


def of_workdir(workdir: str | os.PathLike) -> WordVectors:
  """The word features of a run's workdir (the parameters its summary reports), read-only:
  a run still training there is not disturbed."""
  return of_trained(load_trained(workdir))


def check_words(words) -> None:
  """word2vec's formats, text and binary, end a word at the first space (its readers skip a
  '\\n' before one): a word holding whitespace (a character-level vocabulary's ' ' or
  '\\n') cannot be written in either."""
  for index, word in enumerate(words):
    if word.split() != [word]:
      raise ConfigError(f'word {index} ({word!r}) is empty or holds whitespace, which '
                        "word2vec's text and binary formats cannot hold; export a "
                        'word-level model')


def word2vec_text(word_vectors: WordVectors) -> str:
  """A header "count dim", then per word the word and its floats, one space apart; each float
  written as the shortest text that reads back as the same float32."""
  check_words(word_vectors.words)
  lines = [f'{len(word_vectors.words)} {word_vectors.dim}']
  lines += [f'{word} {" ".join(map(str, row))}'
            for word, row in zip(word_vectors.words, word_vectors.vectors)]
  return '\n'.join(lines) + '\n'


def write_word2vec_text(word_vectors: WordVectors, path: str | os.PathLike) -> None:
  write_text_atomically(path, word2vec_text(word_vectors))


def write_word2vec_binary(word_vectors: WordVectors, path: str | os.PathLike) -> None:
  """word2vec's binary format as its C tool writes it (-binary 1): a header "count dim\\n",
  then per word its UTF-8 bytes, a space, its dim floats as little-endian float32, "\\n".
  gensim's save_word2vec_format(binary=True) leaves out that "\\n" (the readers of both
  skip it) and writes the host's byte order, hence this writer; streamed row by row, written
  whole or not at all."""
  check_words(word_vectors.words)
  rows = word_vectors.vectors.astype('<f4', copy=False)
  with atomic_file(path, 'wb') as f:
    f.write(f'{len(word_vectors.words)} {word_vectors.dim}\n'.encode('utf-8'))
    for word, row in zip(word_vectors.words, rows):
      f.write(word.encode('utf-8') + b' ' + row.tobytes() + b'\n')


def keyed_vectors(source: TrainedModel | WordVectors) -> KeyedVectors:
  """A trained model's C (or given word vectors) as gensim's KeyedVectors: its vocabulary as
  keys, in id order (gensim's frequency rank), so most_similar, evaluate_word_pairs and the
  rest of gensim read it as they read word2vec's own vectors."""
  word_vectors = source if isinstance(source, WordVectors) else of_trained(source)
  keyed = KeyedVectors(word_vectors.dim)
  keyed.add_vectors(list(word_vectors.words), word_vectors.vectors)
  return keyed


def _finite_or_none(value: float) -> float | None:
  return float(value) if math.isfinite(value) else None


def _rated_pairs(path: str | os.PathLike) -> list[tuple[str, str]]:
  """The word pairs of a similarity file as gensim reads them: lines that are not '#'
  comments, with three tab-separated fields, a number last."""
  pairs = []
  for line in Path(path).read_text(encoding='utf-8').splitlines():
    fields = line.split('\t')
    if line.startswith('#') or len(fields) != 3:
      continue
    try:
      float(fields[2])
    except ValueError:
      continue
    pairs.append((fields[0], fields[1]))
  return pairs


def _known_words(keyed: KeyedVectors) -> set[str]:
  """The words gensim's evaluations look up: the RESTRICT_VOCAB most frequent, case folded."""
  return {word.upper() for word in keyed.index_to_key[:RESTRICT_VOCAB]}


def pair_score(keyed: KeyedVectors, path: str | os.PathLike) -> dict:
  """Spearman ρ between a file's human ratings and the cosine similarities of the pairs with
  both words in the vocabulary (None when fewer than two pairs are, or ρ is undefined), and
  the coverage: the share of the file's pairs scored (low_coverage: under MIN_COVERAGE)."""
  pairs, known = _rated_pairs(path), _known_words(keyed)
  covered = sum(a.upper() in known and b.upper() in known for a, b in pairs)
  rho = math.nan
  if covered >= 2:  # A correlation needs two points; gensim raises below that.
    _, (rho, _), _ = keyed.evaluate_word_pairs(str(path), restrict_vocab=RESTRICT_VOCAB,
                                               case_insensitive=True)
  coverage = covered / len(pairs) if pairs else 0.0
  return {'spearman': _finite_or_none(rho), 'coverage': coverage, 'covered': covered,
          'pairs': len(pairs), 'low_coverage': coverage < MIN_COVERAGE}


def _questions(path: str | os.PathLike) -> int:
  """The questions of an analogy file as gensim reads it: four words on a line that is not a
  ': section' header."""
  lines = Path(path).read_text(encoding='utf-8').splitlines()
  return sum(1 for line in lines if not line.startswith(': ') and len(line.split()) == 4)


def analogy_score(keyed: KeyedVectors, path: str | os.PathLike) -> dict:
  """The share of answered questions answered right (None if none could be), and the
  coverage: the share of all questions answered (all four words in the vocabulary;
  low_coverage: under MIN_COVERAGE)."""
  _, sections = keyed.evaluate_word_analogies(str(path), restrict_vocab=RESTRICT_VOCAB,
                                              case_insensitive=True)
  total = sections[-1]  # gensim appends the 'Total accuracy' section last.
  correct, answered = len(total['correct']), len(total['correct']) + len(total['incorrect'])
  questions = _questions(path)
  coverage = answered / questions if questions else 0.0
  return {'accuracy': correct / answered if answered else None, 'coverage': coverage,
          'correct': correct, 'answered': answered, 'questions': questions,
          'low_coverage': coverage < MIN_COVERAGE}


def benchmark_scores(keyed: KeyedVectors) -> dict:
  """WordSim-353 and SimLex-999 (pair_score) and Google's analogies (analogy_score)."""
  scores = {name: pair_score(keyed, datapath(file)) for name, file in PAIR_BENCHMARKS.items()}
  scores['analogies'] = analogy_score(keyed, datapath(ANALOGY_BENCHMARK))
  return scores
