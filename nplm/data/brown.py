"""The Brown corpus as a TFDS dataset: one example per text, in corpus order.

Prepared once into the TFDS data dir as array_record files (readable without TensorFlow via
`as_data_source()`), one process at a time (nplm.data.tfds_dirs); later loads read the
prepared files, and look at the raw corpus only when one is named (`corpus_dir`): its files
must then be those the dataset was prepared from, by the SHA-256 recorded in its metadata.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from etils import epath
import tensorflow_datasets as tfds

from nplm.data import acquire, brown_format, tfds_dirs

_CITATION = """@book{francis1979brown,
  title = {Brown Corpus Manual},
  author = {Francis, W. Nelson and Ku{\\v{c}}era, Henry},
  publisher = {Brown University}, year = {1979}}"""


class Brown(tfds_dirs.ArrayRecordBuilder):
  """Brown corpus texts: `id` ('ca01'), `category` ('a') and `text`.

  `text` holds the words with their tags stripped, case and punctuation kept: words are
  separated by single spaces and paragraphs by '\\n'.
  """

  VERSION = tfds.core.Version('1.0.0')
  RELEASE_NOTES = {'1.0.0': 'One example per text, tags stripped, in corpus order.'}

  def __init__(self, *, corpus_dir: str | os.PathLike | None = None,
               expected_words: int | None = brown_format.BROWN_WORDS,
               expected_files: Sequence[str] | None = None, **kwargs):
    self._corpus_dir = corpus_dir
    self._expected_words = expected_words
    self._expected_files = brown_format.corpus_file_names(expected_files)
    super().__init__(**kwargs)

  # TFDS 4.9.10 finds the file of a builder defined in a package through importlib_resources,
  # which it installs only for Python < 3.9 (tensorflow/datasets#11212). The path serves only
  # to look for a checksums file beside the builder, so give it directly.
  @tfds.core.utils.classproperty
  @classmethod
  def code_path(cls) -> epath.Path:
    return epath.Path(__file__)

  def _info(self) -> tfds_dirs.LocalDatasetInfo:
    # Built directly rather than from configs: that path looks for metadata files that
    # do not exist beside this module.
    return tfds_dirs.LocalDatasetInfo(
        builder=self,
        description='The Brown corpus (Francis & Kucera, 1961/1979): 500 texts, 1.16M words.',
        features=tfds.features.FeaturesDict({
            'id': tfds.features.Text(),
            'category': tfds.features.Text(),
            'text': tfds.features.Text(),
        }),
        disable_shuffling=True,  # Example order is corpus order: the split is by position.
        homepage='https://www.nltk.org/nltk_data/',
        citation=_CITATION,
        metadata=tfds.core.MetadataDict(),  # corpus_sha256: the raw files it was made from.
    )

  def _split_generators(self, dl_manager):
    corpus_dir = acquire.find_corpus(
        Path(os.fspath(dl_manager.download_dir)), self._corpus_dir,
        self._expected_words, self._expected_files)
    # TFDS writes the metadata with dataset_info.json, once the split is written.
    self.info.metadata['corpus_sha256'] = brown_format.fingerprint(corpus_dir,
                                                                   self._expected_files)
    return {'full': self._generate_examples(corpus_dir)}

  def _generate_examples(self, corpus_dir: Path):
    for index, name in enumerate(self._expected_files):
      paragraphs = acquire.read_paragraphs(corpus_dir / name)
      yield index, {
          'id': name,
          'category': brown_format.category_of(name),
          'text': '\n'.join(' '.join(words) for words in paragraphs),
      }


def load_texts(data_dir: str | os.PathLike | None = None,
               corpus_dir: str | os.PathLike | None = None,
               expected_words: int | None = brown_format.BROWN_WORDS,
               expected_files: Sequence[str] | None = None) -> list[list[list[str]]]:
  """Texts -> paragraphs -> words, in corpus order; prepares the dataset on first use."""
  builder = Brown(data_dir=None if data_dir is None else os.fspath(data_dir),
                  corpus_dir=corpus_dir, expected_words=expected_words,
                  expected_files=expected_files)
  tfds_dirs.prepare(builder, data_dir, 'preparing the Brown corpus')
  if corpus_dir is not None:
    _check_source(builder, Path(corpus_dir), brown_format.corpus_file_names(expected_files))
  with tfds_dirs.damage_reported(builder.data_dir):
    ids, texts = _read(builder)
  _check_prepared(builder.data_dir, ids, texts, expected_words, expected_files)
  return texts


def _read(builder: Brown) -> tuple[list[str], list[list[list[str]]]]:
  examples = builder.as_data_source()['full']
  ids, texts = [], []
  for index in range(len(examples)):
    example = examples[index]
    if not all(isinstance(value, bytes) for value in example.values()):
      raise ValueError(f'text {index} is unreadable')  # What a truncated file reads as.
    ids.append(example['id'].decode())
    text = example['text'].decode()
    texts.append([paragraph.split(' ') for paragraph in text.split('\n')] if text else [])
  return ids, texts


def _check_source(builder: Brown, corpus_dir: Path, names: tuple[str, ...]) -> None:
  """A load that names corpus_dir gets a dataset prepared from exactly its files."""
  dataset = builder.data_dir
  fix = (f'delete {dataset} to prepare it again from --corpus_dir, or drop --corpus_dir to use '
         'the prepared one')
  recorded = tfds_dirs.metadata(builder).get('corpus_sha256')
  if recorded is None:
    raise acquire.CorpusError(
        f'{dataset} records no fingerprint of the corpus it was prepared from (an older nplm '
        f'prepared it), so it cannot be checked against --corpus_dir={corpus_dir}; {fix}')
  try:
    acquire.check_corpus(corpus_dir, None, names)  # The files are there (words: not read).
  except acquire.CorpusError as error:
    raise type(error)(f'{error}; {fix}') from None
  if brown_format.fingerprint(corpus_dir, names) != recorded:
    raise acquire.CorpusError(
        f'{dataset} was prepared from another corpus than --corpus_dir={corpus_dir}; {fix}')


def _check_prepared(data_dir, ids, texts, expected_words, expected_files) -> None:
  """Guards against a data dir prepared from another corpus under the same name and version."""
  words = sum(len(paragraph) for text in texts for paragraph in text)
  if (tuple(ids) != brown_format.corpus_file_names(expected_files)
      or expected_words is not None and words != expected_words):
    raise acquire.CorruptCorpusError(
        f'{data_dir} holds a prepared corpus of {len(ids)} texts and {words:,} words, not the '
        'expected one; delete that directory or pass another data_dir')
