"""The vocabulary: words of the training split with ids sorted by descending frequency.

Sampled heads (log-uniform proposals, frequency-binned class and adaptive softmaxes) rely
on id order following training frequency, `<unk>` included at the rank of its merged count.
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

from nplm.files import write_text_atomically

UNK = '<unk>'
PARAGRAPH_END = '</p>'
TEXT_END = '</text>'
SPECIAL_TOKENS = (UNK, PARAGRAPH_END, TEXT_END)

_HEADER_PREFIX = '#nplm-vocabulary unk_max_count='


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
  def build(cls, train_tokens: Iterable[str], unk_max_count: int = 3) -> Vocabulary:
    """Words seen more than unk_max_count times keep an id; the others merge into <unk>."""
    counts = collections.Counter(train_tokens)
    # <unk> already in the tokens (a decoded or exported stream) stays <unk>: rebuilding from
    # such a stream gives the same vocabulary.
    merged = counts.pop(UNK, 0)
    kept = {word: n for word, n in counts.items() if n > unk_max_count}
    kept[UNK] = merged + sum(n for n in counts.values() if n <= unk_max_count)
    ranked = sorted(kept.items(), key=lambda item: (-item[1], item[0]))
    return cls(tuple(w for w, _ in ranked), np.array([n for _, n in ranked]), unk_max_count)

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
    header, *lines = Path(path).read_text(encoding='utf-8').splitlines()
    if not header.startswith(_HEADER_PREFIX):
      raise ValueError(f'{path} is not a vocabulary file written by Vocabulary.save')
    entries = [line.rsplit('\t', 1) for line in lines]
    return cls(tuple(w for w, _ in entries), np.array([int(n) for _, n in entries]),
               int(header[len(_HEADER_PREFIX):]))
