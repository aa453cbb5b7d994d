"""Text sources: lines of text per split, from text files or a TFDS dataset, and their tokens.

  text:DIR     DIR/train.txt, valid.txt, test.txt (or PTB's ptb.train.txt …, WikiText's
               wiki.train.tokens …): the usual benchmark layout.
  text:FILE    one file, cut by lines into train, valid and test.
  tfds:NAME[/CONFIG][:FEATURE]   a TFDS text dataset's string feature (default `text`).

A line's tokens are its whitespace-separated words (or its characters, the space among them)
followed by `<eos>`: a blank line is a lone `<eos>`. These are the tokens that PyTorch's
word_language_model and the published Penn Treebank and WikiText perplexities count.
Sources stream their lines: nothing here holds a split in memory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
import re
from collections.abc import Iterator
from pathlib import Path

from nplm.data.acquire import CorpusError, CorpusNotFoundError
from nplm.data.vocab import END_OF_SENTENCE
from nplm.errors import ConfigError

SPLITS = ('train', 'valid', 'test')
TOKENIZATIONS = ('words', 'chars')
# Where text:DIR looks for each split, first match wins.
_SPLIT_FILES = ('{split}.txt', 'ptb.{split}.txt', 'wiki.{split}.tokens')
_READ_LINES = 1 << 22  # Characters of lines read at a time.


def tokens_of_line(line: str, tokens: str) -> list[str]:
  """A line's tokens: words (or characters) then <eos>; `line` has no line break."""
  return [*(line.split() if tokens == 'words' else line), END_OF_SENTENCE]


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

  def __init__(self, directory: Path, tokens: str):
    self.tokens, self.directory = tokens, directory
    self.files = {split: _split_file(directory, split) for split in SPLITS}
    self.name = directory.name

  def fingerprint(self) -> str:
    digest = hashlib.sha256(f'text-dir\n{self.tokens}\n'.encode())
    for split in SPLITS:
      digest.update(f'{split}\n'.encode())
      _hash_file(digest, self.files[split])
    return digest.hexdigest()

  def lines(self, split: str) -> Iterator[str]:
    return read_lines(self.files[split])


class TextFile:
  """text:FILE: one file cut by lines into the three splits (SplitPlan)."""

  kind = 'text'

  def __init__(self, path: Path, tokens: str, plan: SplitPlan):
    self.tokens, self.path, self.plan, self.name = tokens, path, plan, path.stem
    self._bounds = None

  def fingerprint(self) -> str:
    digest = hashlib.sha256(f'text-file\n{self.tokens}\n{self.plan.describe()}\n'.encode())
    _hash_file(digest, self.path)
    return digest.hexdigest()

  def lines(self, split: str) -> Iterator[str]:
    start, stop = self.bounds()[split]
    return itertools.islice(read_lines(self.path), start, stop)

  def bounds(self) -> dict[str, tuple[int, int]]:
    """[start, stop) line numbers of each split."""
    if self._bounds is None:
      self._bounds = self._cut()
    return self._bounds

  def _cut(self) -> dict[str, tuple[int, int]]:
    if self.plan.train_tokens:
      train_end, valid_end, total, tokens = self._token_boundaries()
    else:
      total = sum(1 for _ in read_lines(self.path))
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
    file's lines and tokens."""
    limits, ends = [self.plan.train_tokens, self.plan.valid_tokens], []
    count = tokens = split_start = 0
    for count, line in enumerate(read_lines(self.path), 1):
      tokens += len(tokens_of_line(line, self.tokens))
      if len(ends) < 2 and tokens - split_start >= limits[len(ends)]:
        ends.append(count)
        split_start = tokens
    ends += [count] * (2 - len(ends))
    return ends[0], ends[1], count, tokens


class TfdsText:
  """tfds:NAME[/CONFIG][:FEATURE]: a string feature of a TFDS dataset's examples, each
  example cut into lines at '\\n'."""

  kind = 'tfds'

  def __init__(self, name: str, feature: str, split_names: tuple[str, str, str], tokens: str,
               data_dir: str | None):
    self.tokens, self.feature, self.split_names = tokens, feature, split_names
    self.dataset = name
    self.name = name.replace('/', '_')
    self._builder = _tfds_builder(name, data_dir)
    self._sources = {}

  def fingerprint(self) -> str:
    info = self._builder.info
    sizes = {s.name: (s.num_examples, s.num_bytes) for s in info.splits.values()}
    text = (f'tfds\n{self.tokens}\n{info.full_name}\n{self.feature}\n{self.split_names}\n'
            f'{sorted(sizes.items())}\n')
    return hashlib.sha256(text.encode()).hexdigest()

  def lines(self, split: str) -> Iterator[str]:
    source = self._source(split)
    for start in range(0, len(source), 1024):
      for example in source.__getitems__(range(start, min(start + 1024, len(source)))):
        yield from _example_lines(example[self.feature])

  def _source(self, split: str):
    if split not in self._sources:
      name = self.split_names[SPLITS.index(split)]
      try:
        source = self._builder.as_data_source(split=name)
      except (ValueError, KeyError) as error:
        available = ', '.join(sorted(self._builder.info.splits))
        raise CorpusError(
            f'tfds:{self.dataset} has no split {name!r} ({error}); its splits: {available}. '
            'Name the train, valid and test splits with --tfds_splits, e.g. '
            'train[:95%],train[95%:],test') from None
      if len(source) and self.feature not in source[0]:
        raise CorpusError(f'tfds:{self.dataset} has no feature {self.feature!r}; its features: '
                          f'{", ".join(source[0])}. Name one: tfds:{self.dataset}:FEATURE')
      self._sources[split] = source
    return self._sources[split]


def _example_lines(value) -> list[str]:
  text = value.decode('utf-8') if isinstance(value, bytes) else str(value)
  return text.removesuffix('\n').split('\n')


def _tfds_builder(name: str, data_dir: str | None):
  """The prepared TFDS dataset `name` (NAME or NAME/CONFIG), prepared first if need be."""
  import tensorflow_datasets as tfds  # Only tfds: sources need it at this point.
  from nplm.data import tfds_dirs
  try:
    builder = tfds.builder(name, data_dir=data_dir, file_format='array_record')
  except Exception as error:  # TFDS raises several types for an unknown or unreadable name.
    raise CorpusNotFoundError(f'tfds:{name}: {error}') from None
  try:
    tfds_dirs.prepare(builder)  # One preparer at a time; killed preparations cleaned.
  except CorpusError:
    raise
  except Exception as error:
    raise CorpusError(f'tfds:{name} is not prepared in {builder.data_dir} and preparing it '
                      f'failed: {error}') from error
  return builder


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


def _hash_file(digest, path: Path) -> None:
  with open(path, 'rb') as f:
    while block := f.read(1 << 24):
      digest.update(block)


def read_lines(path: Path) -> Iterator[str]:
  """The file's lines without their line breaks ('\\n', '\\r\\n' or '\\r'), strict UTF-8 (an
  error names the file and the line)."""
  try:
    with open(path, encoding='utf-8', newline=None) as f:
      while lines := f.readlines(_READ_LINES):
        for line in lines:
          yield line.removesuffix('\n')
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


_TFDS_SPEC = re.compile(r'^(?P<name>[\w.-]+(?:/[\w.-]+)?)(?::(?P<feature>[\w./-]+))?$')


def parse_tfds(spec: str) -> tuple[str, str]:
  """'lm1b' -> ('lm1b', 'text'); 'wiki40b/en:text' -> ('wiki40b/en', 'text')."""
  match = _TFDS_SPEC.match(spec)
  if not match:
    raise CorpusError(f'--dataset=tfds:{spec} is not tfds:NAME[/CONFIG][:FEATURE]')
  return match['name'], match['feature'] or 'text'


def text_source(path: str, tokens: str, plan: SplitPlan):
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
