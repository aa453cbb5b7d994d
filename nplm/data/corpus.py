"""A corpus: id streams of train, valid and test under a train-only vocabulary.

Brown (Bengio et al. 2003): the first 800,000 tokens train, the next 200,000 validate, the
rest test (177,359 tokens here; the paper had 181,041); the marks ending paragraphs and texts
are tokens like any word. Other datasets come prepared (nplm.data.prepared) and get their
vocabulary here, by a remapping of their type indices.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from collections.abc import Mapping, Sequence

import numpy as np

from nplm.data import brown, brown_format
from nplm.data.prepared import PreparedTokens
from nplm.data.vocab import PARAGRAPH_END, SPECIAL_TOKENS, TEXT_END, Vocabulary
from nplm.errors import ConfigError

SPLIT_NAMES = ('train', 'valid', 'test')
# The paper's split of Brown: the first 800,000 tokens train, the next 200,000 valid, the
# rest test.
BROWN_SPLIT = {'train_tokens': 800_000, 'valid_tokens': 200_000}


@dataclasses.dataclass(frozen=True, eq=False)
class Corpus:
  vocab: Vocabulary
  splits: dict[str, np.ndarray]  # 'train', 'valid', 'test' -> int32 ids (read-only).
  stats: dict[str, dict]  # Per split: {'tokens': int, 'unk_rate': float}.
  train_types: int  # Distinct tokens in the training split before rare words merge.
  boundary_id: int  # The token before a split's first one: </text> (Brown), <eos> (text).

  @functools.cached_property
  def fingerprint(self) -> str:
    """Digest of the vocabulary and every split's ids: equal fingerprints, the same data."""
    return data_fingerprint(self.vocab, self.splits)


def data_fingerprint(vocab: Vocabulary, splits: Mapping[str, np.ndarray]) -> str:
  """Corpus.fingerprint of a vocabulary and the ids of train, valid and test under it: what a
  workdir records (run.json's data_fingerprint), so that a reader who maps a dataset's types
  through a trained model's vocabulary can tell whether it is the data the model trained on."""
  digest = hashlib.sha256(vocab.fingerprint().encode())
  for name in SPLIT_NAMES:
    digest.update(f'{name}:{len(splits[name])}\n'.encode())
    digest.update(np.ascontiguousarray(splits[name], np.int32).tobytes())
  return digest.hexdigest()[:16]


def tokens_from_texts(texts: Sequence[Sequence[Sequence[str]]]) -> list[str]:
  """Every word in order, PARAGRAPH_END after each paragraph and TEXT_END after each text."""
  tokens = []
  for text in texts:
    for paragraph in text:
      clashes = set(paragraph).intersection(SPECIAL_TOKENS)
      if clashes:
        raise ValueError(f'corpus words clash with the special tokens: {sorted(clashes)}')
      tokens.extend(paragraph)
      tokens.append(PARAGRAPH_END)
    tokens.append(TEXT_END)
  return tokens


def split_tokens(tokens: Sequence[str], train_tokens: int,
                 valid_tokens: int) -> dict[str, Sequence[str]]:
  """The first train_tokens train, the next valid_tokens validate, the rest (non-empty) test."""
  if min(train_tokens, valid_tokens) <= 0 or train_tokens + valid_tokens >= len(tokens):
    raise ConfigError(
        f'cannot split {len(tokens):,} tokens into {train_tokens:,} train, {valid_tokens:,} '
        'valid and a non-empty test split; give positive --train_tokens and --valid_tokens '
        f'that sum to less than {len(tokens):,}')
  valid_end = train_tokens + valid_tokens
  return {'train': tokens[:train_tokens], 'valid': tokens[train_tokens:valid_end],
          'test': tokens[valid_end:]}


def words_to_chars(tokens: Sequence[str], marks: Sequence[str] = SPECIAL_TOKENS) -> list[str]:
  """Brown's words as characters: a space between words, the marks kept as tokens."""
  chars, after_word = [], False
  for token in tokens:
    if token in marks:
      chars.append(token)
      after_word = False
    else:
      chars.extend(' ' + token if after_word else token)
      after_word = True
  return chars


def token_splits_of(tokens: Sequence[str], train_tokens: int, valid_tokens: int,
                    tokenization: str = 'words') -> dict[str, Sequence[str]]:
  """Brown's word tokens split by word counts; with `tokenization='chars'` each split's
  words become characters (the same text as the word splits)."""
  token_splits = split_tokens(tokens, train_tokens, valid_tokens)
  if tokenization == 'chars':
    token_splits = {name: words_to_chars(split) for name, split in token_splits.items()}
  return token_splits


def build_corpus(tokens: Sequence[str], unk_max_count: int = 3, train_tokens: int = 800_000,
                 valid_tokens: int = 200_000, max_vocab_size: int = 0,
                 tokenization: str = 'words') -> Corpus:
  """Brown's corpus from its word tokens (token_splits_of)."""
  token_splits = token_splits_of(tokens, train_tokens, valid_tokens, tokenization)
  vocab = Vocabulary.build(token_splits['train'], unk_max_count, max_vocab_size,
                           reserved=SPECIAL_TOKENS)
  splits = {name: vocab.encode(token_splits[name]) for name in SPLIT_NAMES}
  return _corpus(vocab, splits, len(set(token_splits['train'])), TEXT_END)


def corpus_from_prepared(prepared: PreparedTokens, unk_max_count: int, max_vocab_size: int,
                         reserved: Sequence[str], boundary: str) -> Corpus:
  """A prepared source under a vocabulary from its training counts (a remapping of ids)."""
  vocab = Vocabulary.from_counts(prepared.types, prepared.train_counts, unk_max_count,
                                 max_vocab_size, reserved)
  remap = vocab.encode(prepared.types)
  return _corpus(vocab, {name: prepared.read(name, remap) for name in SPLIT_NAMES},
                 int(np.count_nonzero(prepared.train_counts)), boundary)


def _corpus(vocab: Vocabulary, splits: Mapping[str, np.ndarray], train_types: int,
            boundary: str) -> Corpus:
  stats = {}
  for name, ids in splits.items():
    ids.setflags(write=False)  # Shared by every feed and evaluation: never changed.
    stats[name] = {'tokens': len(ids), 'unk_rate': float(np.mean(ids == vocab.unk_id))}
  return Corpus(vocab, dict(splits), stats, train_types, vocab.id_of(boundary))


def load_corpus(data_dir: str | os.PathLike | None = None,
                corpus_dir: str | os.PathLike | None = None,
                unk_max_count: int = 3, train_tokens: int | None = None,
                valid_tokens: int | None = None,
                expected_words: int | None = brown_format.BROWN_WORDS,
                expected_files: Sequence[str] | None = None, max_vocab_size: int = 0,
                tokenization: str = 'words') -> Corpus:
  """The Brown corpus as id streams, prepared into the TFDS data_dir on first use."""
  train_tokens = BROWN_SPLIT['train_tokens'] if train_tokens is None else train_tokens
  valid_tokens = BROWN_SPLIT['valid_tokens'] if valid_tokens is None else valid_tokens
  texts = brown.load_texts(data_dir, corpus_dir, expected_words, expected_files)
  return build_corpus(tokens_from_texts(texts), unk_max_count, train_tokens, valid_tokens,
                      max_vocab_size, tokenization)
