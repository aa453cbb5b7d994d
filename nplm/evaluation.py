"""A trained model on other text: any dataset's splits, or a text file, read through the
model's own vocabulary and tokenization, scored exactly (every token once, the head's
normalized log_prob), with what fell to `<unk>` counted."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from nplm.config import Config
from nplm.data import corpus as corpus_lib
from nplm.data import datasets
from nplm.data.tokenize import file_tokens
from nplm.data.vocab import UNK, Vocabulary
from nplm.perplexity import perplexity
from nplm.scoring import TrainedModel
from nplm.summary import bits_per_token


def dataset_types(config: Config) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
  """(every type, each split as type indices) of the dataset `config` names, before any
  vocabulary cut: what another model's vocabulary then maps."""
  config = config.resolved().validate_data()
  if datasets.is_brown(config.dataset):
    return _indexed(datasets.brown_token_splits(config))
  prepared = datasets.load_prepared(config)
  return prepared.types, {name: prepared.read(name) for name in corpus_lib.SPLIT_NAMES}


def file_types(lines: Iterable[str], config: Config):
  """A text file as one split 'file', tokenized as the dataset of `config` was."""
  return _indexed({'file': file_tokens(lines, config.dataset, config.tokens)})


def _indexed(token_splits: dict) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
  index = {}
  for tokens in token_splits.values():
    index.update((t, len(index)) for t in dict.fromkeys(tokens) if t not in index)
  return tuple(index), {name: np.fromiter(map(index.__getitem__, tokens), np.int32, len(tokens))
                        for name, tokens in token_splits.items()}


def unknown_words(types, type_ids: np.ndarray, vocab: Vocabulary, top: int) -> list:
  """The `top` most frequent (type, count) of a split that the vocabulary reads as <unk>."""
  counts = np.bincount(type_ids, minlength=len(types))
  unknown = [(types[i], int(counts[i])) for i in np.flatnonzero(counts).tolist()
             if types[i] != UNK and vocab.id_of(types[i]) == vocab.unk_id]
  return sorted(unknown, key=lambda item: (-item[1], item[0]))[:top]


def evaluate(trained: TrainedModel, types, splits: dict[str, np.ndarray], top_unknown: int = 10
             ) -> dict[str, dict]:
  """Per split: tokens, exact perplexity (bits per token for a character model), <unk> rate
  and the most frequent words that fell to <unk>."""
  remap = trained.vocab.encode(types)
  results = {}
  for name, type_ids in splits.items():
    ids = remap[type_ids]
    nll = -math.fsum(trained.split_log_probs(ids).tolist())
    result = {**perplexity(nll, len(ids)),
              'unk_rate': float(np.mean(ids == trained.vocab.unk_id)),
              'unknown_words': unknown_words(types, type_ids, trained.vocab, top_unknown)}
    if trained.config.tokens == 'chars':
      result['bpc'] = bits_per_token(result)
    results[name] = result
  return results
