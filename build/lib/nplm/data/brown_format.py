"""The Brown corpus file format (as distributed with NLTK) and its expected contents.

A file is a sequence of paragraphs separated by blank lines; each non-blank line of a
paragraph is one sentence of whitespace-separated `word/tag` tokens.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

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
  with open(path, encoding='utf-8') as f:
    return parse_paragraphs(f.read())


def category_of(file_name: str) -> str:
  """'ca01' -> 'a' (the Brown genre letter: a = press reportage ... r = humor)."""
  return file_name[1]


def corpus_file_names(expected_files: Sequence[str] | None) -> tuple[str, ...]:
  """The file names a corpus must hold, in corpus order; None means the 500 Brown files."""
  return BROWN_FILES if expected_files is None else tuple(expected_files)
