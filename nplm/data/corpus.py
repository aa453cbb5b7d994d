"""A corpus: id streams of train, valid and test under a train-only vocabulary.

Every source (nplm.data.sources) gives these three splits; a source held in memory gives
their tokens (corpus_from_tokens), a prepared one the type indices of its lines
(nplm.data.prepared.PreparedTokens.corpus, a remapping of ids). A source's boundary token (what precedes a
split's first token) and reserved tokens are its own. A prepared source also tells each
split's whitespace words (for per-word perplexity) and its learned tokenizer's model.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
from collections.abc import Mapping, Sequence

import numpy as np

from nplm.data.vocab import UNK, Vocabulary

SPLITS = ('train', 'valid', 'test')  # Every corpus's, in this order.


@dataclasses.dataclass(frozen=True, eq=False)
class Corpus:
  vocab: Vocabulary
  splits: dict[str, np.ndarray]  # 'train', 'valid', 'test' -> int32 ids (read-only).
  # Per split: {'tokens': int, 'unk_rate': float}, and 'words' where known: the whitespace
  # words plus lines of its text, what a whitespace word model counts (per-word perplexity).
  stats: dict[str, dict]
  train_types: int  # Distinct tokens in the training split before rare words merge.
  boundary_id: int  # The token before a split's first one: </text> (Brown), <eos> (text).
  # A learned tokenizer's serialized model (SentencePiece), None for the others: a run keeps
  # it in its workdir (nplm.data.tokenizers.TOKENIZER_FILE).
  tokenizer_model: bytes | None = None
  # Per split, the words it holds that fell to <unk> and how often (a literal <unk> in the
  # text not among them): what the open vocabulary spells (nplm.ngram.spelling); train's
  # are the words merged into <unk>.
  unknown_words: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)

  @functools.cached_property
  def fingerprint(self) -> str:
    """Digest of the vocabulary and every split's ids: equal fingerprints, the same data."""
    return data_fingerprint(self.vocab, self.splits)


def data_fingerprint(vocab: Vocabulary, splits: Mapping[str, np.ndarray]) -> str:
  """Corpus.fingerprint of a vocabulary and the ids of train, valid and test under it: what a
  workdir records (run.json's data_fingerprint), so that a reader who maps a dataset's types
  through a trained model's vocabulary can tell whether it is the data the model trained on."""
  digest = hashlib.sha256(vocab.fingerprint().encode())
  for name in SPLITS:
    digest.update(f'{name}:{len(splits[name])}\n'.encode())
    digest.update(np.ascontiguousarray(splits[name], np.int32).tobytes())
  return digest.hexdigest()[:16]


def corpus_from_tokens(token_splits: Mapping[str, Sequence[str]], unk_max_count: int,
                       max_vocab_size: int, reserved: Sequence[str], boundary: str) -> Corpus:
  """Each split's tokens under a vocabulary of the training split's."""
  counts = collections.Counter(token_splits['train'])
  vocab = Vocabulary.from_counts(list(counts), np.fromiter(counts.values(), np.int64, len(counts)),
                                 unk_max_count, max_vocab_size, reserved)
  splits = {name: vocab.encode(token_splits[name]) for name in SPLITS}
  unknown = {name: dict(collections.Counter(
      t for t, i in zip(token_splits[name], splits[name].tolist())
      if i == vocab.unk_id and t != UNK)) for name in SPLITS}
  return corpus_of_ids(vocab, splits, len(counts), boundary, unknown_words=unknown)


def index_types(token_splits: Mapping[str, Sequence[str]]
                ) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
  """(every type in order of first appearance, each split as indices into them): tokens
  before any vocabulary, for another model's vocabulary to map."""
  index = {}
  for tokens in token_splits.values():
    index.update((t, len(index)) for t in dict.fromkeys(tokens) if t not in index)
  return tuple(index), {name: np.fromiter(map(index.__getitem__, tokens), np.int32, len(tokens))
                        for name, tokens in token_splits.items()}


def corpus_of_ids(vocab: Vocabulary, splits: Mapping[str, np.ndarray], train_types: int,
                  boundary: str, words: Mapping[str, int] | None = None,
                  tokenizer_model: bytes | None = None,
                  unknown_words: dict[str, dict[str, int]] | None = None) -> Corpus:
  """The corpus of these id splits under `vocab`, with each split's statistics."""
  stats = {}
  for name, ids in splits.items():
    ids.setflags(write=False)  # Shared by every feed and evaluation: never changed.
    stats[name] = {'tokens': len(ids), 'unk_rate': float(np.mean(ids == vocab.unk_id))}
    if words is not None:
      stats[name]['words'] = int(words[name])
  return Corpus(vocab, dict(splits), stats, train_types, vocab.id_of(boundary),
                tokenizer_model, unknown_words or {})
