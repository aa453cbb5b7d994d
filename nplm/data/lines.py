"""A line of text: its tokens and words, a file's lines (strict UTF-8, every byte read
hashed), and a split's check that it holds more than blank lines.

Every source, the readers of typed text (nplm.api, `nplm evaluate FILE`) and the prepared
dataset cut lines alike: a line's tokens are what the tokenizer makes of it (nplm.data.
tokenizers) followed by `<eos>`, a blank line a lone `<eos>`. Whitespace words are the
tokens that PyTorch's word_language_model and the published Penn Treebank and WikiText
perplexities count, and what per-word perplexity divides by whatever the tokens.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable, Iterator
from pathlib import Path

from nplm.data.acquire import CorpusError
from nplm.data.corpus import SPLITS
from nplm.data.tokenizers import Tokenization, Tokenizer, tokenization_of
from nplm.data.vocab import END_OF_SENTENCE

_READ_LINES = 1 << 22  # Characters of lines read at a time.


def tokens_of_line(line: str, tokenizer: Tokenizer) -> list[str]:
  """A line's tokens then <eos>; `line` has no line break."""
  return [*tokenizer.tokens(line), END_OF_SENTENCE]


def words_of_line(line: str) -> int:
  """What a whitespace word model counts of a line: its words and its <eos> (the count
  that per-word perplexity divides by, whatever the tokens)."""
  return len(line.split()) + 1


def blank_lines(lines: Iterable[str], tokens: str | Tokenization) -> int | None:
  """None as soon as a line has a token besides <eos> (a word; a character); else the number
  of lines, every one blank (0: no lines at all)."""
  chars = tokenization_of(tokens).tokens == 'chars'
  count = 0
  for count, line in enumerate(lines, 1):
    if line if chars else line.split():
      return None
  return count


def no_text(blank: int, tokens: str | Tokenization) -> str:
  """What a split of `blank` blank lines lacks ('is empty' if none), for an error."""
  if not blank:
    return 'is empty'
  return f'has no {unit(tokens)}s, only {blank:,} blank line{"s" if blank > 1 else ""}'


def check_text(source) -> None:
  """Raises CorpusError unless every split of `source` has a token besides <eos>: a split
  of blank lines only would train or score nothing but line ends. A source may say where
  the split comes from (its `check_text()`); otherwise its splits are scanned here."""
  own = getattr(source, 'check_text', None)
  if own is not None:
    return own()
  for index, split in enumerate(SPLITS):
    blank = blank_lines(source.lines(split), source.tokenization)
    if blank is not None:
      names = getattr(source, 'split_names', SPLITS)
      raise CorpusError(
          f'the {split} split ({names[index]}) of {source.kind}:{source.name} '
          f'{no_text(blank, source.tokenization)}: every split needs at least one '
          f'{unit(source.tokenization)}')


def unit(tokens: str | Tokenization) -> str:
  """What one token of these is called in an error: a character or a word."""
  return 'character' if tokenization_of(tokens).tokens == 'chars' else 'word'


class _HashingReader(io.RawIOBase):
  """A file's bytes, each one read also fed to `digest`."""

  def __init__(self, path: Path):
    super().__init__()
    self._file = open(path, 'rb', buffering=0)
    self.digest = hashlib.sha256()

  def readable(self) -> bool:
    return True

  def readinto(self, buffer) -> int:
    count = self._file.readinto(buffer)
    if count:
      self.digest.update(memoryview(buffer)[:count])
    return count

  def read_rest(self) -> None:
    while block := self._file.read(1 << 24):
      self.digest.update(block)

  def close(self) -> None:
    self._file.close()
    super().close()


def read_lines(path: Path, stop: int | None = None, on_end=None) -> Iterator[str]:
  """The file's lines without their line breaks ('\\n', '\\r\\n' or '\\r'), strict UTF-8 (an
  error names the file and the line); the first `stop` of them if `stop` is given. Once the
  read reaches the end of the file (past `stop`, the rest is read but not decoded),
  `on_end(sha256)` gets the hex SHA-256 of every byte that was read."""
  try:
    reader = _HashingReader(path)
    with io.TextIOWrapper(io.BufferedReader(reader, 1 << 20), encoding='utf-8',
                          newline=None) as f:
      count = 0
      while (stop is None or count < stop) and (lines := f.readlines(_READ_LINES)):
        for line in lines[:None if stop is None else stop - count]:
          yield line.removesuffix('\n')
        count += len(lines)
      reader.read_rest()  # What f buffered was read (and hashed) already.
      if on_end is not None:
        on_end(reader.digest.hexdigest())
  except UnicodeDecodeError as error:
    raise CorpusError(f'{path} is not UTF-8 text (line {_undecodable_line(path):,}: '
                      f'{error.reason} at {error.object[error.start:error.end]!r}); convert it '
                      'to UTF-8, e.g. iconv -f latin1 -t utf-8') from None


def _undecodable_line(path: Path) -> int:
  """The number of the first line (ended by '\\n') that is not UTF-8: the decoder read a
  chunk of lines at a time, so its error cannot say which."""
  with open(path, 'rb') as f:
    for number, line in enumerate(f, 1):
      try:
        line.decode('utf-8')
      except UnicodeDecodeError:
        return number
  return 0  # The file changed since: no line is undecodable now.
