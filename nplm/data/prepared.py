"""A text source prepared once into the TFDS data dir: token ids in array_record files.

Preparation streams the source a chunk of lines at a time: each token becomes the index of
its type in a table of every type seen (in order of first appearance), written as int32
chunks; the table and the training count of each type go to the dataset's metadata.json.
Memory is the type table and one chunk, whatever the corpus size, plus TFDS's write buffer.
No vocabulary is applied here: --unk_max_count and --max_vocab_size are a cheap remapping
at load time, so one preparation serves every vocabulary. A learned tokenizer (SentencePiece)
is learned from the training split's lines before any line is cut, and its model is kept in
the metadata (base64), so that the run and typed text cut text as the dataset was. Each
split's count of whitespace words and lines (`words`, what a whitespace word model counts)
is kept too, for per-word perplexity; datasets prepared before these keys lack them.

The dataset is `nplm_tokens/<kind>-<name>-<tokens>-<fingerprint>` in the data dir: another
source, other content or another tokenization is another dataset, never confused with this
one. The source checks that the bytes it read are those it was fingerprinted from (a file
edited during the preparation is refused: the dataset would hold one text under the name
of another). A split without a word (an empty file, blank lines only) is refused before
anything is written. One process prepares at a time, in a directory renamed when done
(nplm.data.tfds_dirs), so an interrupted preparation (SIGTERM and Ctrl-C included) leaves
nothing that a later load would use. metadata.json carries a checksum of everything it holds
(types, training counts, token counts, each split's SHA-256), and a load checks every split's
token count and SHA-256 against it: damage is refused, never read as other words.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import io
import json
import logging
import os
import re
from collections.abc import Sequence

import numpy as np
import tensorflow_datasets as tfds
from etils import epath
from tqdm import tqdm

from nplm.data import lines, tfds_dirs
from nplm.data.acquire import CorpusError
from nplm.data.corpus import SPLITS, Corpus, corpus_of_ids
from nplm.data.vocab import UNK, Vocabulary
from nplm.data.lines import tokens_of_line, words_of_line
from nplm.stop_requests import check_interrupted, interrupting

log = logging.getLogger(__name__)

_CHUNK_TOKENS = 1 << 20  # Tokens per array_record example (4 MiB of int32).
_LOG_EVERY = 16 * _CHUNK_TOKENS  # A progress line every 16M tokens (logs have no bar).


@dataclasses.dataclass(frozen=True, eq=False)
class PreparedTokens:
  """A prepared source: every type and its training count; `read` gives a split."""
  types: tuple[str, ...]
  train_counts: np.ndarray  # int64 [types]: 0 for a type seen only outside training.
  builder: 'NplmTokens'
  # Per split, whitespace words plus lines (lines.words_of_line); None if prepared
  # before it was recorded.
  words: dict[str, int] | None = None
  tokenizer_model: bytes | None = None  # A learned tokenizer's serialized model.

  def corpus(self, unk_max_count: int, max_vocab_size: int, reserved: Sequence[str],
             boundary: str) -> Corpus:
    """A prepared source under a vocabulary from its training counts (a remapping of ids).
    Cut into learned subwords, every piece of the tokenizer keeps an id, seen in training or
    not: typed text is cut into pieces that the training split may never have used."""
    if self.tokenizer_model is not None:
      from nplm.data.tokenizers import SentencePieceSubwords  # Imports SentencePiece.
      reserved = (*reserved, *SentencePieceSubwords(self.tokenizer_model, 'pieces').pieces)
    vocab = Vocabulary.from_counts(self.types, self.train_counts, unk_max_count,
                                   max_vocab_size, reserved)
    remap = vocab.encode(self.types)
    unknown_types = (remap == vocab.unk_id) & (np.asarray(self.types, object) != UNK)
    splits, unknown = {}, {}
    for name in SPLITS:
      splits[name], counts = self.read_counting(name, remap, unknown_types)
      unknown[name] = {self.types[i]: int(counts[i]) for i in np.flatnonzero(counts).tolist()}
    return corpus_of_ids(vocab, splits, int(np.count_nonzero(self.train_counts)), boundary,
                         self.words, self.tokenizer_model, unknown)

  def read(self, split: str, remap: np.ndarray | None = None) -> np.ndarray:
    """A split's type indices, or `remap` of them (a vocabulary's ids: remap[type]), read
    chunk by chunk into one array (only the result is held) and checked against the
    recorded token count and SHA-256. Read-only."""
    with tfds_dirs.damage_reported(self.builder.data_dir):
      ids = self._read(split, remap)
    ids.setflags(write=False)
    return ids

  def read_counting(self, split: str, remap: np.ndarray, counted: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(read(split, remap), how often the split holds each type where `counted` [types]
    is true (0 elsewhere)), in the one pass over its chunks."""
    counts = np.zeros(len(self.types), np.int64)

    def count(chunk):
      picked = chunk[counted[chunk]]
      counts[:] += np.bincount(picked, minlength=len(counts))

    with tfds_dirs.damage_reported(self.builder.data_dir):
      ids = self._read(split, remap, count)
    ids.setflags(write=False)
    return ids, counts

  def _read(self, split: str, remap: np.ndarray | None, on_chunk=None) -> np.ndarray:
    metadata = self.builder.info.metadata
    source = self.builder.as_data_source(split=split)
    ids, filled, digest = np.empty(metadata['tokens'][split], np.int32), 0, hashlib.sha256()
    for index in range(len(source)):
      chunk = source[index]['ids']
      digest.update(chunk.tobytes())
      if filled + len(chunk) > len(ids) or int(chunk.max(initial=0)) >= len(self.types):
        raise ValueError(f'{split} holds other tokens than recorded')
      ids[filled:filled + len(chunk)] = chunk if remap is None else remap[chunk]
      if on_chunk is not None:
        on_chunk(chunk)
      filled += len(chunk)
    if filled != len(ids) or digest.hexdigest() != metadata['sha256'][split]:
      raise ValueError(f'{split} does not match its recorded token count and SHA-256')
    return ids


class NplmTokens(tfds_dirs.ArrayRecordBuilder):
  """Token ids of one text source (nplm.data.text_sources), one config per source."""

  VERSION = tfds.core.Version('1.1.0')
  RELEASE_NOTES = {'1.0.0': 'Type indices in chunks; types and training counts in metadata.',
                   '1.1.0': 'A checksum of the metadata; the source checked to be unchanged.'}

  def __init__(self, *, source, **kwargs):
    self._source = source
    config = tfds.core.BuilderConfig(name=config_name(source),
                                     description=f'{source.kind}:{source.name}, {source.tokens}')
    super().__init__(config=config, **kwargs)

  def _create_builder_config(self, builder_config, version):
    del version
    return builder_config  # Made for its source in __init__: no config is predefined.

  # As nplm.data.brown.Brown: TFDS 4.9.10 cannot find a packaged builder's file by itself.
  @tfds.core.utils.classproperty
  @classmethod
  def code_path(cls) -> epath.Path:
    return epath.Path(__file__)

  def _info(self) -> tfds_dirs.LocalDatasetInfo:
    ids = tfds.features.Tensor(shape=(None,), dtype=np.int32,
                               encoding=tfds.features.Encoding.BYTES)
    return tfds_dirs.LocalDatasetInfo(
        builder=self, description='Token ids (indices into metadata types), chunk by chunk.',
        features=tfds.features.FeaturesDict({'ids': ids}),
        disable_shuffling=True,  # Chunk order is text order.
        metadata=tfds.core.MetadataDict())

  def _split_generators(self, dl_manager):
    del dl_manager  # The source is local (or an already prepared TFDS dataset).
    self._types: dict[str, int] = {}
    self._train_counts = np.zeros(0, np.int64)
    self._digests = {split: hashlib.sha256() for split in SPLITS}
    self._tokens = dict.fromkeys(SPLITS, 0)
    self._words = dict.fromkeys(SPLITS, 0)
    tokenization = self._source.tokenization
    self._model = tokenization.model
    if tokenization.learned and self._model is None:  # Learned before any line is cut.
      log.info('learning the %s tokenizer from the training split', tokenization.name)
      self._model = tokenization.learn(self._source.lines('train'))
    self._tokenizer = tokenization.tokenizer_of(self._model)
    return {split: self._generate_examples(split) for split in SPLITS}

  def _generate_examples(self, split: str):
    for index, ids in enumerate(self._chunks(split)):
      self._digests[split].update(ids.tobytes())
      self._tokens[split] += len(ids)
      if split == 'train':
        counts = np.bincount(ids, minlength=len(self._types))
        counts[:len(self._train_counts)] += self._train_counts
        self._train_counts = counts
      yield index, {'ids': ids}
    if not self._tokens[split]:  # Checked before, so the source changed (or cannot tell).
      _check_reads(self._source)
      raise CorpusError(f'{self._source.kind}:{self._source.name} has no text in its {split} '
                        'split; every split needs at least one line')

  def _chunks(self, split: str):
    """The split's tokens as type indices, about _CHUNK_TOKENS at a time."""
    pending = []
    with tqdm(desc=f'preparing {split}', unit=' tokens', unit_scale=True, disable=None,
              leave=False) as bar:
      for line in self._source.lines(split):
        pending += tokens_of_line(line, self._tokenizer)
        self._words[split] += words_of_line(line)
        if len(pending) >= _CHUNK_TOKENS:
          check_interrupted()  # A safe point, should a stop request's exception be lost.
          yield self._indices(pending)
          bar.update(len(pending))
          pending = []
          if self._tokens[split] % _LOG_EVERY < _CHUNK_TOKENS:
            log.info('preparing %s: %d tokens, %d types', split, self._tokens[split],
                     len(self._types))
      check_interrupted()
      if pending:
        yield self._indices(pending)
    log.info('prepared %s: %d tokens, %d types in all so far', split, self._tokens[split],
             len(self._types))

  def _indices(self, tokens: list[str]) -> np.ndarray:
    types = self._types
    for token in dict.fromkeys(tokens):  # New types in order of first appearance.
      if token not in types:
        types[token] = len(types)
    return np.fromiter(map(types.__getitem__, tokens), np.int32, len(tokens))

  def _download_and_prepare(self, dl_manager, download_config):
    super()._download_and_prepare(dl_manager, download_config)
    _check_reads(self._source)  # What was read is what the dataset is named after.
    # Written with dataset_info.json, after every split, inside the incomplete directory.
    self.info.metadata.update(
        types=list(self._types),
        train_counts=np.pad(self._train_counts,
                            (0, len(self._types) - len(self._train_counts))).tolist(),
        tokens=self._tokens,
        sha256={split: digest.hexdigest() for split, digest in self._digests.items()},
        source=f'{self._source.kind}:{self._source.name}', tokenization=self._source.tokens,
        words=self._words,
        tokenizer_model=None if self._model is None else base64.b64encode(self._model).decode())
    self.info.metadata['checksum'] = metadata_checksum(self.info.metadata)


_CHECKSUMMED = ('types', 'train_counts', 'tokens', 'sha256', 'source', 'tokenization')
_ADDED = ('words', 'tokenizer_model')  # Checksummed too where present (not in older ones).


def metadata_checksum(metadata) -> str:
  """SHA-256 of everything metadata.json holds but the checksum (as its JSON would read)."""
  content = {key: metadata[key] for key in _CHECKSUMMED}
  content.update((key, metadata[key]) for key in _ADDED if key in metadata)
  return hashlib.sha256(json.dumps(content, sort_keys=True, ensure_ascii=False,
                                   separators=(',', ':')).encode()).hexdigest()


def _check_reads(source) -> None:
  """The source's own check that what it read is what it was fingerprinted from (text files:
  their bytes; a TFDS dataset is a prepared dataset, not edited in place)."""
  check = getattr(source, 'check_reads', None)
  if check is not None:
    check()


def config_name(source) -> str:
  """`<kind>-<name>-<tokens>-<fingerprint>`, in the characters TFDS allows."""
  slug = re.sub(r'[^a-z0-9_]+', '_', source.name.lower()).strip('_')[:40] or 'corpus'
  return f'{source.kind}-{slug}-{source.tokens}-{source.fingerprint()[:16]}'


def prepare(source, data_dir: str | os.PathLike | None = None) -> PreparedTokens:
  """The source's prepared tokens, prepared into data_dir first if they are not there.

  SIGTERM or Ctrl-C meanwhile raises nplm.stop_requests.Interrupted (status 75 from a
  command), nothing of the preparation kept; a data dir that cannot be written, or fills
  up, is a CorpusError naming --data_dir (tfds_dirs.prepare)."""
  what = f'preparing {source.kind}:{source.name} ({source.tokens})'
  with interrupting(f'{what} in {tfds_dirs.data_dir_named(data_dir)}'):
    builder = NplmTokens(source=source,  # Fingerprints the source: text files are hashed.
                         data_dir=None if data_dir is None else os.fspath(data_dir))
    if not builder.data_path.exists():
      lines.check_text(source)  # Before anything is written.
      log.info('preparing %s:%s (%s) into %s', source.kind, source.name, source.tokens,
               builder.data_dir)
    with contextlib.redirect_stdout(io.StringIO()):  # TFDS prints what the log lines say.
      tfds_dirs.prepare(builder, data_dir, what)
  metadata = tfds_dirs.metadata(builder)
  try:
    if metadata['checksum'] != metadata_checksum(metadata):
      raise tfds_dirs.damaged(builder.data_dir, 'its metadata.json does not match its checksum')
    model = metadata.get('tokenizer_model')
    tokens = PreparedTokens(tuple(metadata['types']),
                            np.array(metadata['train_counts'], np.int64), builder,
                            metadata.get('words'),
                            None if model is None else base64.b64decode(model, validate=True))
  except (KeyError, TypeError) as error:
    raise tfds_dirs.damaged(builder.data_dir, f'its metadata lacks {error}') from None
  except ValueError:  # Not base64: binascii.Error.
    raise tfds_dirs.damaged(builder.data_dir, 'its tokenizer model is unreadable') from None
  if (len(tokens.train_counts) != len(tokens.types)
      or source.tokenization.learned and tokens.tokenizer_model is None):
    raise tfds_dirs.damaged(builder.data_dir, 'its metadata is inconsistent')
  return tokens
