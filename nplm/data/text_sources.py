"""--dataset=text:PATH (TextSource): lines of text per split, from text files (a TFDS
dataset: tfds_source.py), and their tokens.

  text:DIR     DIR/train.txt, valid.txt, test.txt (or PTB's ptb.train.txt …, WikiText's
               wiki.train.tokens …): the usual benchmark layout.
  text:FILE    one file, cut by lines into train, valid and test.

A line's tokens are what the tokenizer makes of it followed by `<eos>` (nplm.data.lines,
which also reads a file's lines). Sources stream their lines: nothing here holds a split in
memory. A source's `tokenization` says how
its lines are cut, and `tokens`, its name, is part of its fingerprint.

A text source is fingerprinted from its files' bytes, and every complete read of a file
hashes the bytes it read: `check_reads()` then tells whether what a preparation read is
what was fingerprinted (a file edited while it is prepared is refused, never cached under
the fingerprint of its other content). `check_text()` refuses a split without a single
token other than `<eos>` (an empty file, or blank lines only) before anything is prepared.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

from nplm import paths
from nplm.data import lines
from nplm.data.acquire import CorpusError, CorpusNotFoundError
from nplm.data.corpus import SPLITS
from nplm.data.sources import PreparedSource, split_knobs
from nplm.data.tokenizers import Tokenization, tokenization_of
from nplm.errors import ConfigError
from nplm.knobs import SPLIT_CUT, Knob

# Where text:DIR looks for each split, first match wins.
_SPLIT_FILES = ('{split}.txt', 'ptb.{split}.txt', 'wiki.{split}.tokens')


class _CheckedReads:
  """A source's files: the SHA-256 of each when the source was fingerprinted (once, at its
  first fingerprint), and that of the bytes of every complete read of it since."""

  def __init__(self):
    self.fingerprinted: dict[Path, str] = {}
    self.reads: list[tuple[Path, str]] = []

  def sha256(self, path: Path) -> str:
    if path not in self.fingerprinted:
      self.fingerprinted[path] = _file_sha256(path)
    return self.fingerprinted[path]

  def lines(self, path: Path, stop: int | None = None) -> Iterator[str]:
    return lines.read_lines(path, stop, on_end=lambda digest: self.reads.append((path, digest)))

  def check(self) -> None:
    """Raises CorpusError if a read had other bytes than the file had when fingerprinted."""
    for path, digest in self.reads:
      if digest != self.fingerprinted.get(path, digest):
        raise CorpusError(
            f'{paths.shown(path)} changed while it was being prepared (the bytes read differ '
            'from those it had when the preparation began); nothing of it was kept: rerun '
            'once it no longer changes')


@dataclasses.dataclass(frozen=True)
class SplitPlan:
  """How text:FILE cuts its lines: by fractions of the lines, or by token counts (the
  first train_tokens tokens' lines train, the next valid_tokens' validate)."""
  fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
  train_tokens: int = 0
  valid_tokens: int = 0

  def describe(self) -> str:
    if self.train_tokens:
      return f'tokens {self.train_tokens},{self.valid_tokens}'
    return 'fractions ' + ','.join(f'{f:g}' for f in self.fractions)


class TextFiles:
  """text:DIR: one file per split."""

  kind = 'text'

  def __init__(self, directory: Path, tokenization: Tokenization | str):
    self.tokenization, self.directory = tokenization_of(tokenization), directory
    self.tokens = self.tokenization.name
    self.files = {split: _split_file(directory, split) for split in SPLITS}
    self.name = directory.name
    self._reads = _CheckedReads()

  def fingerprint(self) -> str:
    """Of the tokenization and each file's bytes (as they were at the first call)."""
    text = f'text-dir\n{self.tokens}\n' + ''.join(
        f'{split} {self._reads.sha256(self.files[split])}\n' for split in SPLITS)
    return hashlib.sha256(text.encode()).hexdigest()

  def lines(self, split: str) -> Iterator[str]:
    return self._reads.lines(self.files[split])

  def check_reads(self) -> None:
    self._reads.check()

  def check_text(self) -> None:
    for split, path in self.files.items():
      blank = lines.blank_lines(self.lines(split), self.tokenization)
      if blank is not None:
        raise CorpusError(
            f'{paths.shown(path)} {lines.no_text(blank, self.tokenization)}: every split needs at '
            f'least one {lines.unit(self.tokenization)}; put text in it (--dataset=text:'
            f'{paths.shown(self.directory)} reads its {split} split from it)')


class TextFile:
  """text:FILE: one file cut by lines into the three splits (SplitPlan)."""

  kind = 'text'

  def __init__(self, path: Path, tokenization: Tokenization | str, plan: SplitPlan):
    self.tokenization, self.path, self.plan = tokenization_of(tokenization), path, plan
    self.tokens, self.name = self.tokenization.name, path.stem
    self._bounds = None
    self._reads = _CheckedReads()

  def fingerprint(self) -> str:
    """Of the tokenization, the cut and the file's bytes (as they were at the first call)."""
    text = (f'text-file\n{self.tokens}\n{self.plan.describe()}\n'
            f'{self._reads.sha256(self.path)}\n')
    return hashlib.sha256(text.encode()).hexdigest()

  def lines(self, split: str) -> Iterator[str]:
    start, stop = self.bounds()[split]
    # Read on past `stop` (unparsed): only a read to the end of the file can be checked.
    return itertools.islice(self._reads.lines(self.path, stop), start, None)

  def check_reads(self) -> None:
    self._reads.check()

  def check_text(self) -> None:
    blank = lines.blank_lines(self._reads.lines(self.path), self.tokenization)
    if blank is not None:
      raise CorpusError(f'{paths.shown(self.path)} {lines.no_text(blank, self.tokenization)}: '
                        f'text:FILE needs at least one {lines.unit(self.tokenization)} in each of '
                        'the train, valid and test splits it is cut into')
    bounds = self.bounds()
    for split, (start, stop) in bounds.items():
      if lines.blank_lines(self.lines(split), self.tokenization) is not None:
        raise CorpusError(
            f'the {split} split of {paths.shown(self.path)} (its lines {start + 1:,} to '
            f'{stop:,} of {bounds["test"][1]:,}, cut by {self.plan.describe()}) has no '
            f'{lines.unit(self.tokenization)}s, only blank lines: every split needs at least one; give '
            'other --split_fractions (or --train_tokens, --valid_tokens)')

  def bounds(self) -> dict[str, tuple[int, int]]:
    """[start, stop) line numbers of each split."""
    if self._bounds is None:
      self._bounds = self._cut()
    return self._bounds

  def _cut(self) -> dict[str, tuple[int, int]]:
    if self.plan.train_tokens:
      train_end, valid_end, total, tokens = self._token_boundaries()
    else:
      total = sum(1 for _ in self._reads.lines(self.path))
      train_end = round(total * self.plan.fractions[0])
      valid_end = train_end + round(total * self.plan.fractions[1])
    bounds = {'train': (0, train_end), 'valid': (train_end, valid_end),
              'test': (valid_end, total)}
    empty = ', '.join(split for split, (start, stop) in bounds.items() if stop <= start)
    if empty and self.plan.train_tokens:
      raise ConfigError(
          f'--train_tokens={self.plan.train_tokens:,} and --valid_tokens='
          f'{self.plan.valid_tokens:,} leave the {empty} split of {self.path} empty: it has '
          f'{tokens:,} tokens in {total:,} lines (a split ends at a line end); give smaller '
          'counts')
    if empty:
      raise CorpusError(f'{self.path} has {total:,} lines: cut by {self.plan.describe()}, '
                        f'the {empty} split would be empty; give other --split_fractions (or '
                        '--train_tokens, --valid_tokens)')
    return bounds

  def _token_boundaries(self) -> tuple[int, int, int, int]:
    """The lines until train_tokens tokens (train) and until valid_tokens more (valid); the
    file's lines and tokens (Tokenization.counting: a learned tokenizer's words)."""
    limits, ends = [self.plan.train_tokens, self.plan.valid_tokens], []
    count = tokens = split_start = 0
    counting = self.tokenization.counting()
    for count, line in enumerate(self._reads.lines(self.path), 1):
      tokens += len(lines.tokens_of_line(line, counting))
      if len(ends) < 2 and tokens - split_start >= limits[len(ends)]:
        ends.append(count)
        split_start = tokens
    ends += [count] * (2 - len(ends))
    return ends[0], ends[1], count, tokens


def _split_file(directory: Path, split: str) -> Path:
  if not directory.is_dir():
    raise CorpusNotFoundError(f'{directory} is not a directory')
  for pattern in _SPLIT_FILES:
    path = directory / pattern.format(split=split)
    if path.is_file():
      return path
  expected = ', '.join(pattern.format(split=split) for pattern in _SPLIT_FILES)
  raise CorpusNotFoundError(f'{directory} has no {split} split: it needs one of {expected} '
                            '(text:DIR holds train, valid and test files)')


def _file_sha256(path: Path) -> str:
  digest = hashlib.sha256()
  with open(path, 'rb') as f:
    while block := f.read(1 << 24):
      digest.update(block)
  return digest.hexdigest()


class TextSource(PreparedSource):
  """--dataset=text:DIR or text:FILE (the argument: its path)."""

  usage = 'text:DIR (train.txt, valid.txt, test.txt), text:FILE'
  cuts_by_tokens = True  # text:FILE's lines; text:DIR refuses them (text_source).
  knobs = {
      **split_knobs("The lines of a FILE's first this-many tokens train (a DIR comes split).",
                    'The lines of its next this-many validate (0: by --split_fractions), the '
                    'rest test.'),
      'split_fractions': Knob('0.8,0.1,0.1', "The train, valid, test shares of a FILE's lines "
                              '(unless --train_tokens).', role=SPLIT_CUT),
  }

  def lines_source(self, config):
    plan = SplitPlan(tuple(float(f) for f in config.split_fractions.split(',')),
                     config.train_tokens, config.valid_tokens)
    return text_source(self.argument, Tokenization.of(config), plan)


def text_source(path: str, tokens: Tokenization | str, plan: SplitPlan):
  """text:PATH: TextFiles for a directory, TextFile for a file."""
  resolved = Path(os.path.expanduser(path))
  if resolved.is_dir() and plan.train_tokens:
    raise ConfigError(f'--train_tokens and --valid_tokens cut one file (text:FILE); {path} is a '
                      'directory, whose train, valid and test files are the splits: drop them')
  if resolved.is_dir():
    return TextFiles(resolved, tokens)
  if resolved.is_file():
    return TextFile(resolved, tokens, plan)
  raise CorpusNotFoundError(f'--dataset=text:{path}: no such file or directory')
