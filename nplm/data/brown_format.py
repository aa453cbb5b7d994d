"""The Brown corpus file format (as distributed with NLTK) and its expected contents.

A file is a sequence of paragraphs separated by blank lines; each non-blank line of a
paragraph is one sentence of whitespace-separated `word/tag` tokens.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

# Files per category letter, in corpus order (ca01 ... cr09); the letters i, o, q are unused.
_FILES_PER_CATEGORY = {
    'a': 44, 'b': 27, 'c': 17, 'd': 17, 'e': 36, 'f': 48, 'g': 75, 'h': 30,
    'j': 80, 'k': 29, 'l': 24, 'm': 6, 'n': 29, 'p': 29, 'r': 9,
}
BROWN_FILES: tuple[str, ...] = tuple(
    f'c{letter}{number:02d}'
    for letter, count in _FILES_PER_CATEGORY.items()
    for number in range(1, count + 1)
)
# Same count as NLTK's len(brown.words()).
BROWN_WORDS = 1_161_192


def strip_tag(token: str) -> str:
  """`word/tag` -> `word`; split on the last '/' because words may contain '/' (e.g. 1/2/cd)."""
  word, slash, _ = token.rpartition('/')
  return word if slash else token


def parse_paragraphs(text: str) -> list[list[str]]:
  """Tagged file contents -> paragraphs -> words (tags stripped, case and punctuation kept)."""
  paragraphs, current = [], []
  for line in text.splitlines():
    if line.strip():
      current.extend(strip_tag(token) for token in line.split())
    elif current:
      paragraphs.append(current)
      current = []
  if current:
    paragraphs.append(current)
  return paragraphs


def read_paragraphs(path: str | os.PathLike) -> list[list[str]]:
  """A file's paragraphs; the UnicodeDecodeError of a file that is not UTF-8 holds the file's
  bytes, so its position is a position in the file."""
  return parse_paragraphs(Path(path).read_bytes().decode('utf-8'))


def fingerprint(corpus_dir: str | os.PathLike, names: Sequence[str]) -> str:
  """SHA-256 of the named files' names and bytes, in order (10 MB to read for Brown)."""
  digest = hashlib.sha256()
  for name in names:
    data = (Path(corpus_dir) / name).read_bytes()
    digest.update(f'{name}\n{len(data)}\n'.encode())
    digest.update(data)
  return digest.hexdigest()


def category_of(file_name: str) -> str:
  """'ca01' -> 'a' (the Brown genre letter: a = press reportage ... r = humor)."""
  return file_name[1]


def corpus_file_names(expected_files: Sequence[str] | None) -> tuple[str, ...]:
  """The file names a corpus must hold, in corpus order; None means the 500 Brown files."""
  return BROWN_FILES if expected_files is None else tuple(expected_files)
