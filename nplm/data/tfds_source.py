"""--dataset=tfds:NAME[/CONFIG][:FEATURE] (TfdsSource): a TFDS dataset's string feature
(default `text`) as lines per split, each example cut into lines at '\\n'; the dataset
prepared first if need be (a catalogue builder needs TensorFlow to prepare: the extra
nplm[tf]). Unknown names and configs are one line with the closest ones TFDS knows."""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import re
import tempfile
from collections.abc import Iterator

from nplm.data.acquire import CorpusError, CorpusNotFoundError
from nplm.data.corpus import SPLITS
from nplm.data.sources import PreparedSource
from nplm.data.tokenizers import Tokenization, tokenization_of
from nplm.knobs import SPLIT_CUT, Knob


class TfdsSource(PreparedSource):
  """--dataset=tfds:NAME[/CONFIG][:FEATURE]: its splits named by --tfds_splits."""

  usage = 'tfds:NAME[/CONFIG][:FEATURE]'
  knobs = {'tfds_splits': Knob('train,validation,test', 'The TFDS splits read as train, valid '
                               'and test (slices allowed: train[:95%],train[95%:],test).',
                               role=SPLIT_CUT)}

  def config_errors(self, config) -> list[str]:
    return [f"{error} (--tfds_splits picks a TFDS dataset's splits)"
            for error in super().config_errors(config)]

  def lines_source(self, config):
    name, feature = parse_tfds(self.argument)
    return TfdsText(name, feature, tuple(config.tfds_splits.split(',')),
                    Tokenization.of(config), config.data_dir or None)


class TfdsText:
  """tfds:NAME[/CONFIG][:FEATURE]: a string feature of a TFDS dataset's examples, each
  example cut into lines at '\\n'."""

  kind = 'tfds'

  def __init__(self, name: str, feature: str, split_names: tuple[str, str, str],
               tokenization: Tokenization | str, data_dir: str | None):
    self.tokenization = tokenization_of(tokenization)
    self.tokens, self.feature, self.split_names = self.tokenization.name, feature, split_names
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
    with _own_temporary_directory():
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


@contextlib.contextmanager
def _own_temporary_directory() -> Iterator[None]:
  """The system's temporary directory, for the block, one of our own, removed after: TFDS
  4.9.10 makes an empty one there for each builder of a dataset not yet prepared
  (DatasetInfo.initialize_from_bucket) and never removes it. nplm's own builders skip that
  step (tfds_dirs.LocalDatasetInfo); the catalogue's are TFDS's code."""
  with tempfile.TemporaryDirectory(prefix='nplm-tfds-') as own:
    system, tempfile.tempdir = tempfile.tempdir, own
    try:
      yield
    finally:
      tempfile.tempdir = system


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


_TFDS_SPEC = re.compile(r'^(?P<name>[\w.-]+(?:/[\w.-]+)?)(?::(?P<feature>[\w./-]+))?$')


def parse_tfds(spec: str) -> tuple[str, str]:
  """'lm1b' -> ('lm1b', 'text'); 'wiki40b/en:text' -> ('wiki40b/en', 'text')."""
  match = _TFDS_SPEC.match(spec)
  if not match:
    raise CorpusError(f'--dataset=tfds:{spec} is not tfds:NAME[/CONFIG][:FEATURE]')
  return match['name'], match['feature'] or 'text'
