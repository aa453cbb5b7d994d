"""Text sources: lines of text per split, from text files or a TFDS dataset, and their tokens.

  text:DIR     DIR/train.txt, valid.txt, test.txt (or PTB's ptb.train.txt …, WikiText's
               wiki.train.tokens …): the usual benchmark layout.
  text:FILE    one file, cut by lines into train, valid and test.
  tfds:NAME[/CONFIG][:FEATURE]   a TFDS text dataset's string feature (default `text`).

A line's tokens are its whitespace-separated words (or its characters, the space among them)
followed by `<eos>`: a blank line is a lone `<eos>`. These are the tokens that PyTorch's
word_language_model and the published Penn Treebank and WikiText perplexities count.
Sources stream their lines: nothing here holds a split in memory.

A text source is fingerprinted from its files' bytes, and every complete read of a file
hashes the bytes it read: `check_reads()` then tells whether what a preparation read is
what was fingerprinted (a file edited while it is prepared is refused, never cached under
the fingerprint of its other content). `check_text()` refuses a split without a single
token other than `<eos>` (an empty file, or blank lines only) before anything is prepared.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import io
import itertools
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from nplm import paths
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


def blank_lines(lines: Iterable[str], tokens: str) -> int | None:
  """None as soon as a line has a token besides <eos> (a word; a character); else the number
  of lines, every one blank (0: no lines at all)."""
  count = 0
  for count, line in enumerate(lines, 1):
    if line.split() if tokens == 'words' else line:
      return None
  return count


def _no_text(blank: int, tokens: str) -> str:
  unit = 'words' if tokens == 'words' else 'characters'
  if not blank:
    return 'is empty'
  return f'has no {unit}, only {blank:,} blank line{"s" if blank > 1 else ""}'


def check_text(source) -> None:
  """Raises CorpusError unless every split of `source` has a token besides <eos>: a split
  of blank lines only would train or score nothing but line ends. A source may say where
  the split comes from (its `check_text()`); otherwise its splits are scanned here."""
  own = getattr(source, 'check_text', None)
  if own is not None:
    return own()
  for index, split in enumerate(SPLITS):
    blank = blank_lines(source.lines(split), source.tokens)
    if blank is not None:
      names = getattr(source, 'split_names', SPLITS)
      raise CorpusError(
          f'the {split} split ({names[index]}) of {source.kind}:{source.name} '
          f'{_no_text(blank, source.tokens)}: every split needs at least one '
          f'{_unit(source.tokens)}')


def _unit(tokens: str) -> str:
  return 'word' if tokens == 'words' else 'character'


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
    return read_lines(path, stop, on_end=lambda digest: self.reads.append((path, digest)))

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

  def __init__(self, directory: Path, tokens: str):
    self.tokens, self.directory = tokens, directory
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
      blank = blank_lines(self.lines(split), self.tokens)
      if blank is not None:
        raise CorpusError(
            f'{paths.shown(path)} {_no_text(blank, self.tokens)}: every split needs at least '
            f'one {_unit(self.tokens)}; put text in it (--dataset=text:'
            f'{paths.shown(self.directory)} reads its {split} split from it)')


class TextFile:
  """text:FILE: one file cut by lines into the three splits (SplitPlan)."""

  kind = 'text'

  def __init__(self, path: Path, tokens: str, plan: SplitPlan):
    self.tokens, self.path, self.plan, self.name = tokens, path, plan, path.stem
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
    blank = blank_lines(self._reads.lines(self.path), self.tokens)
    if blank is not None:
      raise CorpusError(f'{paths.shown(self.path)} {_no_text(blank, self.tokens)}: text:FILE '
                        f'needs at least one {_unit(self.tokens)} in each of the train, valid '
                        'and test splits it is cut into')
    bounds = self.bounds()
    for split, (start, stop) in bounds.items():
      if blank_lines(self.lines(split), self.tokens) is not None:
        raise CorpusError(
            f'the {split} split of {paths.shown(self.path)} (its lines {start + 1:,} to '
            f'{stop:,} of {bounds["test"][1]:,}, cut by {self.plan.describe()}) has no '
            f'{_unit(self.tokens)}s, only blank lines: every split needs at least one; give '
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
    file's lines and tokens."""
    limits, ends = [self.plan.train_tokens, self.plan.valid_tokens], []
    count = tokens = split_start = 0
    for count, line in enumerate(self._reads.lines(self.path), 1):
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
  _check_tfds_name(name)
  try:
    builder = tfds.builder(name, data_dir=data_dir, file_format='array_record')
  except tfds.core.registered.DatasetNotFoundError:  # Its message lists the whole catalogue.
    raise CorpusNotFoundError(_unknown_tfds_name(name)) from None
  except ImportError as error:
    raise CorpusError(_missing_module(name, error)) from None
  except Exception as error:  # TFDS raises several types for an unreadable dataset.
    raise CorpusNotFoundError(f'tfds:{name}: {_first_line(error)}') from None
  try:
    tfds_dirs.prepare(builder)  # One preparer at a time; killed preparations cleaned.
  except CorpusError:
    raise
  except Exception as error:
    # TensorFlow or another module the builder's code (or TFDS's extractor, which wraps the
    # error) imports.
    missing = _import_error_in(error)
    if missing is not None:
      raise CorpusError(_missing_module(name, missing)) from None
    raise CorpusError(f'tfds:{name} is not prepared in {builder.data_dir} and preparing it '
                      f'failed: {_first_line(error)}') from error
  return builder


def _check_tfds_name(name: str) -> None:
  """CorpusNotFoundError (one line, with the closest names) if TFDS has no dataset NAME or
  NAME has no config CONFIG; TFDS's own error lists its whole catalogue. A name TFDS does not
  register may still be a dataset prepared in the data dir: tfds.builder then reads it."""
  import tensorflow_datasets as tfds
  base, _, config = name.partition('/')
  try:
    builder_cls = tfds.builder_cls(base)
  except tfds.core.registered.DatasetNotFoundError:
    return  # Maybe prepared in the data dir; if not, tfds.builder raises it again.
  except Exception:  # pylint: disable=broad-except
    return  # Whatever stops the class loading, tfds.builder reports it.
  configs = [c.name for c in builder_cls.BUILDER_CONFIGS or ()]
  if config and config not in configs:
    if not configs:
      raise CorpusNotFoundError(f'tfds:{name}: TFDS dataset {base} has no configs; name it '
                                f'tfds:{base}')
    shown = ', '.join(configs[:12]) + (f' ({len(configs):,} in all)' if len(configs) > 12 else '')
    close = _closest(config, configs)
    raise CorpusNotFoundError(f'tfds:{name}: TFDS dataset {base} has no config {config!r}'
                              f'{f" (did you mean {close}?)" if close else ""}; its configs: '
                              f'{shown}')


def _unknown_tfds_name(name: str) -> str:
  import tensorflow_datasets as tfds
  close = _closest(name.partition('/')[0], tfds.list_builders(with_community_datasets=False))
  return (f'tfds:{name}: no such TFDS dataset{f"; did you mean {close}?" if close else ""} '
          '(tfds.list_builders() lists them)')


def _closest(name: str, names) -> str:
  """The (up to three) names closest to `name`, case aside: 'a', 'a or b', 'a, b or c'; or
  ''."""
  by_lower = {n.lower(): n for n in names}
  close = [by_lower[n] for n in difflib.get_close_matches(name.lower(), by_lower, n=3,
                                                          cutoff=0.6)]
  if not close:
    return ''
  return close[0] if len(close) == 1 else f'{", ".join(close[:-1])} or {close[-1]}'


def _missing_module(name: str, error: ImportError) -> str:
  """The one line for a TFDS builder that needs a module this install lacks."""
  module = (error.name or '').split('.')[0]
  if module == 'tensorflow':
    return (f'tfds:{name}: preparing it needs TensorFlow (TFDS catalogue builders read their '
            f'downloads with it), which cannot be imported ({_first_line(error)}): '
            'pip install "nplm[tf]"')
  return (f'tfds:{name}: preparing it needs the Python module {module or "?"}, which cannot be '
          f'imported ({_first_line(error)}): install it (pip install {module or "..."}, or the '
          'package that provides it)')


def _import_error_in(error: BaseException | None) -> ImportError | None:
  """The ImportError that `error` is or was caused by (through wrapped errors), or None."""
  seen = set()
  while error is not None and id(error) not in seen:
    if isinstance(error, ImportError):
      return error
    seen.add(id(error))
    error = error.__cause__ or error.__context__
  return None


def _first_line(error: BaseException) -> str:
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  return lines[0] if lines else type(error).__name__


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
