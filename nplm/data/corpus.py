"""Token streams of the Brown corpus with the paper's split and a train-only vocabulary.

Bengio et al. (2003): the first 800,000 tokens train, the next 200,000 validate, the rest
test (177,359 tokens here; the paper had 181,041); the marks ending paragraphs and texts are
tokens like any word.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import numpy as np

from nplm.data import brown, brown_format
from nplm.data.vocab import PARAGRAPH_END, SPECIAL_TOKENS, TEXT_END, Vocabulary

SPLIT_NAMES = ('train', 'valid', 'test')


@dataclasses.dataclass(frozen=True, eq=False)
class Corpus:
  vocab: Vocabulary
  splits: dict[str, np.ndarray]  # 'train', 'valid', 'test' -> int32 ids (read-only).
  stats: dict[str, dict]  # Per split: {'tokens': int, 'unk_rate': float}.
  train_types: int  # Distinct tokens in the training split before rare words merge.


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
    raise ValueError(
        f'cannot split {len(tokens):,} tokens into {train_tokens:,} train, {valid_tokens:,} '
        'valid and a non-empty test split; all three must be positive')
  valid_end = train_tokens + valid_tokens
  return {'train': tokens[:train_tokens], 'valid': tokens[train_tokens:valid_end],
          'test': tokens[valid_end:]}


def build_corpus(tokens: Sequence[str], unk_max_count: int = 3, train_tokens: int = 800_000,
                 valid_tokens: int = 200_000) -> Corpus:
  token_splits = split_tokens(tokens, train_tokens, valid_tokens)
  vocab = Vocabulary.build(token_splits['train'], unk_max_count)
  splits, stats = {}, {}
  for name in SPLIT_NAMES:
    ids = vocab.encode(token_splits[name])
    ids.setflags(write=False)
    splits[name] = ids
    stats[name] = {'tokens': len(ids), 'unk_rate': float(np.mean(ids == vocab.unk_id))}
  return Corpus(vocab, splits, stats, train_types=len(set(token_splits['train'])))


def load_corpus(data_dir: str | os.PathLike | None = None,
                corpus_dir: str | os.PathLike | None = None,
                unk_max_count: int = 3, train_tokens: int = 800_000,
                valid_tokens: int = 200_000,
                expected_words: int | None = brown_format.BROWN_WORDS,
                expected_files: Sequence[str] | None = None) -> Corpus:
  """The Brown corpus as id streams, prepared into the TFDS data_dir on first use."""
  texts = brown.load_texts(data_dir, corpus_dir, expected_words, expected_files)
  return build_corpus(tokens_from_texts(texts), unk_max_count, train_tokens, valid_tokens)
