"""How an unknown word is spelt: the open vocabulary's q(w).

A word-level model gives a word w outside its vocabulary V

    p(w | h) = p(<unk> | h) · q(w),    q(w) = q_c(w) / Z,    Z = 1 - q_c('') - Σ_{v ∈ V} q_c(v)

so that the probabilities of all strings sum to 1 and a misspelling is charged for its
letters instead of passing for the whole class of rare words. q_c is an interpolated
modified Kneser-Ney character n-gram (Chen & Goodman 1998; nplm.ngram.kneser_ney) of the
training tokens that fell to <unk>, each spelt after order-1 start marks and closed by an end
mark: the
words a text's unknown words resemble (Good-Turing: the unseen look like the rare). Z takes
the spellings of the vocabulary and the empty string out, exactly, by scoring every one.

A character the training words never used is one symbol of q_c, its probability shared evenly
among the Unicode code points outside the alphabet: every string of code points has a
probability. A literal `<unk>` in a text (PTB, WikiText ship one) is a word whose spelling the
text withholds: it is in V, scored as `<unk>` alone (closed), q plays no part.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Container, Mapping, Sequence
from pathlib import Path

import numpy as np

from nplm.data.vocab import END_OF_SENTENCE, SPECIAL_TOKENS
from nplm import paths
from nplm.files import write_json_atomically
from nplm.ngram import saved
from nplm.ngram.kneser_ney import KneserNey

# Characters of context (with the word's start): on Brown's valid unknown words, 16.19 nats a
# word at 5, 15.24 at 7, 15.18 at 8 (the spelling model trained on train's).
ORDER = 7
END, UNSEEN = 0, 1  # Character ids: the word's end (and start mark); any unseen character.
CODE_POINTS = 0x110000 - 0x800  # Unicode scalar values: every code point but the surrogates.
MIN_TRAINING_TOKENS = 1000  # Fewer unknown training tokens: the rarest words help.
MAX_CHARACTERS = 4_000_000  # Enough to learn spelling; a larger corpus trains on its types.
WORDS_AT_ONCE = 1 << 15
_SPECIALS = frozenset((*SPECIAL_TOKENS, END_OF_SENTENCE))


@dataclasses.dataclass(frozen=True, eq=False)
class Spelling:
  """q(w) over the strings outside a vocabulary: `log_prob(words)`."""

  chars: KneserNey  # Over END, UNSEEN and the alphabet, in that order of ids.
  alphabet: str  # Characters with an id of their own (2, 3, …), sorted.
  log_z: float  # log Z: the mass q_c leaves to strings outside the vocabulary.
  trained_on: dict  # What q_c was fitted to: {'what', 'types', 'tokens'}.

  @property
  def order(self) -> int:
    return self.chars.order

  def log_prob(self, words: Sequence[str]) -> np.ndarray:
    """log q(w) per word (float64), for words outside the vocabulary (the caller's
    promise: a vocabulary word has q = 0, which this does not check)."""
    return char_log_probs(self.chars, self.alphabet, words) - self.log_z

  def cost(self, counts: Mapping[str, int]) -> float:
    """-Σ count · log q(w): what spelling these unknown words adds to a text's NLL."""
    if not counts:
      return 0.0
    words = list(counts)
    weights = np.fromiter(counts.values(), np.float64, len(words))
    return -math.fsum((weights * self.log_prob(words)).tolist())

  def draw(self, rng: np.random.Generator, excluded: Container[str]) -> str:
    """A word drawn from q: q_c's characters one at a time after the start marks, to the end
    mark, drawn again while it spells '' or a word of `excluded` (the vocabulary): a draw
    from q = q_c / Z, taken at the first try with probability Z. An unseen character is any
    code point outside the alphabet, evenly, as char_log_probs charges it."""
    ids = np.arange(len(self.alphabet) + 2)
    while True:
      context, word = [END] * (self.order - 1), []
      while True:
        windows = np.column_stack([np.tile(context, (len(ids), 1)), ids])
        probs = np.exp(self.chars.log_prob_windows(windows))
        char = int(rng.choice(ids, p=probs / probs.sum()))
        if char == END:
          break
        word.append(self._unseen_character(rng) if char == UNSEEN else self.alphabet[char - 2])
        context = [*context[1:], char]
      if word and ''.join(word) not in excluded:
        return ''.join(word)

  def _unseen_character(self, rng: np.random.Generator) -> str:
    while True:
      point = int(rng.integers(CODE_POINTS))
      character = chr(point + 0x800 if point >= 0xD800 else point)  # Past the surrogates.
      if character not in self.alphabet:
        return character


def char_log_probs(chars: KneserNey, alphabet: str, words: Sequence[str]) -> np.ndarray:
  """log q_c(w) per word: its characters and the end mark after order-1 start marks, an
  unseen character's share of UNSEEN included. WORDS_AT_ONCE at a time: a vocabulary of a
  million words is scored in the memory of a few blocks."""
  if len(words) > WORDS_AT_ONCE:
    return np.concatenate([char_log_probs(chars, alphabet, words[start:start + WORDS_AT_ONCE])
                           for start in range(0, len(words), WORDS_AT_ONCE)])
  if not len(words):
    return np.zeros(0)
  stream, real, starts = spelt(words, alphabet, chars.order)
  windows = np.lib.stride_tricks.sliding_window_view(stream, chars.order)[real[chars.order - 1:]]
  per_char = chars.log_prob_windows(windows)
  unseen_share = -math.log(CODE_POINTS - len(alphabet))
  per_char += np.where(stream[real] == UNSEEN, unseen_share, 0.0)
  return np.add.reduceat(per_char, starts)


def spelt(words: Sequence[str], alphabet: str, order: int
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(the words as one stream of character ids, each after order-1 END marks and closed by
  END; which positions are the words' own (characters and closing END); where each word's
  first one is among those). The marks before a word are its whole context: every word is
  read from the same start, whatever precedes it."""
  index = {c: i + 2 for i, c in enumerate(alphabet)}
  gap = [END] * (order - 1)
  ids, lengths = [], np.empty(len(words), np.int64)
  for i, word in enumerate(words):
    ids += gap
    ids += [index.get(c, UNSEEN) for c in word]
    ids.append(END)
    lengths[i] = len(word) + 1
  real = np.ones(len(ids), bool)
  word_ends = np.cumsum(lengths + order - 1)
  for k in range(order - 1):  # The marks before each word.
    real[word_ends - lengths - 1 - k] = False
  return np.array(ids, np.int64), real, np.concatenate([[0], np.cumsum(lengths)[:-1]])


def training_words(unknown_train: Mapping[str, int], vocab_words: Sequence[str],
                   vocab_counts: np.ndarray) -> tuple[dict[str, int], str]:
  """(word -> count, what they are) that q_c learns from: the training tokens that fell to
  <unk>; where there are too few (a text that ships its own <unk>, a vocabulary that keeps
  every type), the rarest tenth of the vocabulary's words join them."""
  words = {w: int(n) for w, n in unknown_train.items() if w not in _SPECIALS}
  what = 'the training tokens that fell to <unk>'
  if sum(words.values()) >= MIN_TRAINING_TOKENS:
    return words, what
  candidates = [(int(n), w) for w, n in zip(vocab_words, np.asarray(vocab_counts).tolist())
                if w not in _SPECIALS and n > 0]
  candidates.sort()
  for count, word in candidates[:max(1, len(candidates) // 10)]:
    words[word] = words.get(word, 0) + count
  return words, ('the rarest tenth of the vocabulary' if not unknown_train else
                 f'{what} and the rarest tenth of the vocabulary')


def fit(unknown_train: Mapping[str, int], vocab_words: Sequence[str],
        vocab_counts: np.ndarray, order: int = ORDER) -> Spelling:
  """q over the strings outside the vocabulary `vocab_words`, learned from the training
  split's unknown tokens (`unknown_train`: word -> count) as training_words picks them."""
  words, what = training_words(unknown_train, vocab_words, vocab_counts)
  if not words:
    raise ValueError('no words to learn spelling from: the vocabulary is empty of words')
  alphabet = ''.join(sorted(set(''.join(words)) | set(''.join(vocab_words))))
  repeats = np.fromiter(words.values(), np.int64, len(words))
  lengths = np.fromiter(map(len, words), np.int64, len(words)) + 1
  if int(repeats @ lengths) > MAX_CHARACTERS:  # Each type once.
    repeats = np.ones_like(repeats)
  stream, events, _ = spelt(np.repeat(list(words), repeats).tolist(), alphabet, order)
  # The stream's own first order-1 marks are the table's padding: events start after them.
  chars = KneserNey.fit(stream[order - 1:], order, len(alphabet) + 2, END,
                        events=events[order - 1:], warn=False)
  in_vocab = np.exp(char_log_probs(chars, alphabet, ['', *vocab_words]))
  log_z = math.log1p(-math.fsum(in_vocab.tolist()))
  return Spelling(chars, alphabet, log_z, {'what': what, 'types': len(words),
                                          'tokens': int(repeats.sum())})


MODEL_FILE, RECORD_FILE = 'spelling.npz', 'spelling.json'


class DamagedSpellingError(ValueError):
  """A workdir's spelling model is not the one recorded."""


def save(spelling: Spelling, workdir: str | os.PathLike) -> None:
  """spelling.npz (the character model) then spelling.json (what it is, its SHA-256):
  a workdir whose spelling.json exists holds both."""
  where = Path(workdir)
  sha256 = saved.save(spelling.chars, where / MODEL_FILE)
  write_json_atomically(where / RECORD_FILE, {
      'order': spelling.order, 'alphabet': spelling.alphabet, 'log_z': spelling.log_z,
      'trained_on': spelling.trained_on, 'sha256': sha256})


def load(workdir: str | os.PathLike) -> Spelling | None:
  """The spelling model saved in `workdir`, None if it has none; damage in one line."""
  where = Path(workdir)
  if not (where / RECORD_FILE).is_file():
    return None
  try:
    record = json.loads((where / RECORD_FILE).read_text())
    chars = saved.load(where / MODEL_FILE, 'kn', record['sha256'])
    return Spelling(chars, record['alphabet'], float(record['log_z']), record['trained_on'])
  except (OSError, ValueError, KeyError, TypeError) as error:
    raise DamagedSpellingError(
        f'{paths.shown(where / RECORD_FILE)}: the spelling model of unknown words is damaged '
        f'({error}); '
        f'delete {RECORD_FILE} and {MODEL_FILE} and it is rebuilt from the data') from None


def of_corpus(corpus) -> Spelling:
  """The spelling model of a corpus (nplm.data.corpus.Corpus): its training split's unknown
  words under its vocabulary."""
  return fit(corpus.unknown_words.get('train', {}), corpus.vocab.words, corpus.vocab.counts)


def split_costs(spelling: Spelling, corpus) -> dict[str, float]:
  """Per split of the corpus, -Σ log q over its unknown words: the open vocabulary's part."""
  return {name: spelling.cost(corpus.unknown_words.get(name, {})) for name in corpus.splits}
