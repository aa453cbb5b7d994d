"""The vocabulary: tokens of the training split with ids sorted by descending frequency.

Sampled heads (log-uniform proposals, frequency-binned class and adaptive softmaxes) rely
on id order following training frequency, `<unk>` included at the rank of its merged count.
A dataset's special tokens (`<eos>`, Brown's marks, a subword tokenizer's pieces) are
reserved: they always keep an id, and their count, however rare (one seen no more than
unk_max_count times ranks as an unseen one, the ids runs were trained with).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import os
import types
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from nplm.errors import ConfigError
from nplm.files import write_text_atomically

UNK = '<unk>'
PARAGRAPH_END = '</p>'
TEXT_END = '</text>'
END_OF_SENTENCE = '<eos>'  # Text datasets: after every line, as PyTorch's word_language_model.
SPECIAL_TOKENS = (UNK, PARAGRAPH_END, TEXT_END)  # Brown's.

_HEADER_PREFIX = '#nplm-vocabulary unk_max_count='


def trained_unk_max_count(types: Sequence[str], counts: np.ndarray) -> int:
  """0 (keep every training type) where the training text has its own <unk> (PTB and
  WikiText ship their vocabulary cut: their counts are the published ones), else 1: the
  words seen once become <unk>, so that <unk> is trained on what the unseen resemble (Good-
  Turing: the rate of the unseen is that of the words seen once)."""
  has_own = any(t == UNK and n > 0 for t, n in zip(types, np.asarray(counts).tolist()))
  return 0 if has_own else 1


@dataclasses.dataclass(frozen=True, eq=False)
class Vocabulary:
  """Immutable word <-> id mapping with the training count of every id."""

  words: tuple[str, ...]
  counts: np.ndarray  # int64 [size]: training-split count of each id (<unk>: merged count).
  unk_max_count: int
  _ids: Mapping[str, int] = dataclasses.field(init=False, repr=False)

  def __post_init__(self):
    if UNK not in self.words:
      raise ValueError(f'a vocabulary needs {UNK}')
    if len(set(self.words)) != len(self.words) or len(self.counts) != len(self.words):
      raise ValueError('vocabulary words must be unique, with one count each')
    counts = np.array(self.counts, dtype=np.int64)
    counts.setflags(write=False)
    object.__setattr__(self, 'counts', counts)
    ids = types.MappingProxyType({word: i for i, word in enumerate(self.words)})
    object.__setattr__(self, '_ids', ids)

  @classmethod
  def build(cls, train_tokens: Iterable[str], unk_max_count: int = 3, max_size: int = 0,
            reserved: Sequence[str] = ()) -> Vocabulary:
    """From the training split's tokens; see from_counts."""
    counts = collections.Counter(train_tokens)
    return cls.from_counts(list(counts), np.fromiter(counts.values(), np.int64, len(counts)),
                           unk_max_count, max_size, reserved)

  @classmethod
  def from_counts(cls, types: Sequence[str], counts: np.ndarray, unk_max_count: int = 3,
                  max_size: int = 0, reserved: Sequence[str] = ()) -> Vocabulary:
    """Types seen more than unk_max_count times keep an id, at most max_size ids in all
    (0: no bound; the most frequent kept, ties by the word); the others merge into <unk>.
    `reserved` tokens always keep an id, with their training count (0 if never seen).
    unk_max_count -1: trained_unk_max_count's choice."""
    counts = np.asarray(counts, np.int64)
    if unk_max_count == -1:
      unk_max_count = trained_unk_max_count(types, counts)
    # <unk> already in the tokens (a decoded or exported stream, a corpus that ships its own
    # unknown token) stays <unk>: rebuilding from such a stream gives the same vocabulary.
    # A reserved token keeps its own count however rare, so that the counts are those of the
    # encoded training split (a sampled head's proposal, word2vec's negatives read them).
    reserved = {t: 0 for t in reserved if t != UNK}
    candidates = []
    for word, count in zip(types, counts.tolist()):
      if word in reserved:
        reserved[word] = count
      elif count > unk_max_count and word != UNK:
        candidates.append((-count, word))
    candidates.sort()
    room = len(candidates) if not max_size else max_size - 1 - len(reserved)
    if room < 0:
      raise ConfigError(f'--max_vocab_size={max_size} leaves no room: <unk> and the '
                       f'{len(reserved)} reserved tokens need {len(reserved) + 1} ids')
    kept = {word: -negative for negative, word in candidates[:room]}
    kept.update(reserved)
    kept[UNK] = int(counts.sum()) - sum(kept.values())  # Every other training token.
    # Ranked as the threshold sees them: a reserved token seen unk_max_count times or fewer
    # ranks as an unseen one, its tokens at <unk>'s rank. These are the ids of every run
    # trained before such a token kept its count (its checkpoints' rows, its fingerprint).
    rare = {w: n for w, n in reserved.items() if n <= unk_max_count}
    rank = {**kept, **dict.fromkeys(rare, 0), UNK: kept[UNK] + sum(rare.values())}
    ranked = sorted(kept, key=lambda word: (-rank[word], word))
    return cls(tuple(ranked), np.array([kept[w] for w in ranked]), unk_max_count)

  @property
  def size(self) -> int:
    return len(self.words)

  def __len__(self) -> int:
    return len(self.words)

  @property
  def unk_id(self) -> int:
    return self._ids[UNK]

  def id_of(self, word: str) -> int:
    return self._ids.get(word, self.unk_id)

  def encode(self, tokens: Sequence[str]) -> np.ndarray:
    unk_id, ids = self.unk_id, self._ids
    return np.fromiter((ids.get(t, unk_id) for t in tokens), dtype=np.int32, count=len(tokens))

  def decode(self, ids: Iterable[int]) -> list[str]:
    return [self.words[i] for i in np.asarray(ids).tolist()]

  def fingerprint(self) -> str:
    """Short digest of the word list and threshold: equal fingerprints, compatible ids."""
    digest = hashlib.sha256(f'{self.unk_max_count}\n'.encode())
    digest.update('\n'.join(self.words).encode())
    return digest.hexdigest()[:16]

  def save(self, path: str | os.PathLike) -> None:
    """Plain text: a header line, then `word<TAB>count` per id, written atomically."""
    lines = [f'{_HEADER_PREFIX}{self.unk_max_count}']
    lines += [f'{word}\t{count}' for word, count in zip(self.words, self.counts.tolist())]
    write_text_atomically(path, '\n'.join(lines) + '\n')

  @classmethod
  def load(cls, path: str | os.PathLike) -> Vocabulary:
    # Bytes decoded and split on '\n' only: a character-level vocabulary may hold '\r',
    # '\x0c' or '\u2028', which text mode and splitlines() take for line breaks.
    text = Path(path).read_bytes().decode('utf-8')
    header, *lines = text.removesuffix('\n').split('\n')
    if not header.startswith(_HEADER_PREFIX):
      raise ValueError(f'{path} is not a vocabulary file written by Vocabulary.save')
    entries = [line.rsplit('\t', 1) for line in lines]
    cut = next((i for i, entry in enumerate(entries)
                if len(entry) != 2 or not entry[1].isdigit()), None)
    if cut is not None:  # A damaged file: a line cut short, a count changed.
      raise ValueError(f'line {cut + 2} is not what Vocabulary.save writes (a word, a tab, '
                       'its count)')
    return cls(tuple(w for w, _ in entries), np.array([int(n) for _, n in entries]),
               int(header[len(_HEADER_PREFIX):]))
