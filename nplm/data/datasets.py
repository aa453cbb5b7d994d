"""`--dataset`: which corpus a run reads, by name, and the corpus it gives.

  brown                          the paper's corpus and split (nplm.data.corpus)
  text:DIR | text:FILE           text files (nplm.data.text_sources)
  tfds:NAME[/CONFIG][:FEATURE]   a TFDS text dataset (nplm.data.tfds_source)

Adding a source: a class in text_sources.py with `kind`, `name`, `tokens`, `fingerprint()`
and `lines(split)`, and a branch in `_text_source` below; preparation, the vocabulary and
everything after them are source-blind. Optional: `check_reads()` (raise CorpusError if what
`lines` read is not what `fingerprint()` hashed: text files check their bytes) and
`check_text()` (refuse a split without a word, naming its file; otherwise the splits are
scanned for one by text_sources.check_text).
"""

from __future__ import annotations

from nplm.data import brown, prepared, text_sources, tfds_source
from nplm.data import corpus as corpus_lib
from nplm.data.acquire import CorpusError
from nplm.data.vocab import END_OF_SENTENCE, SPECIAL_TOKENS, TEXT_END, UNK

KINDS = ('brown', 'text:', 'tfds:')
BROWN_SPLIT = corpus_lib.BROWN_SPLIT  # The paper's.
BROWN_UNK_MAX_COUNT = 3  # The paper merged words seen at most 3 times into one symbol.


def check_name(dataset: str) -> str | None:
  """None if `dataset` names a kind of source, else what is wrong with it."""
  if dataset == 'brown' or dataset.startswith(('text:', 'tfds:')) and dataset.partition(':')[2]:
    return None
  return (f'unknown --dataset={dataset!r}: give brown, text:DIR (train.txt, valid.txt, '
          'test.txt), text:FILE or tfds:NAME[/CONFIG][:FEATURE]')


def is_brown(dataset: str) -> bool:
  return dataset == 'brown'


def boundary_token(dataset: str) -> str:
  """What precedes a split's first token: a text just ended (Brown), a line just ended."""
  return TEXT_END if is_brown(dataset) else END_OF_SENTENCE


def reserved_tokens(dataset: str) -> tuple[str, ...]:
  """Tokens that always keep an id, whatever their count."""
  return SPECIAL_TOKENS if is_brown(dataset) else (UNK, END_OF_SENTENCE)


def default_unk_max_count(dataset: str) -> int:
  """Brown: the paper's 3. Text and TFDS corpora: keep every training type, as published
  PTB and WikiText results do (those corpora ship with their vocabulary already cut)."""
  return BROWN_UNK_MAX_COUNT if is_brown(dataset) else 0


def split_plan(config) -> text_sources.SplitPlan:
  fractions = tuple(float(f) for f in config.split_fractions.split(','))
  return text_sources.SplitPlan(fractions, config.train_tokens, config.valid_tokens)


def _text_source(config):
  kind, _, rest = config.dataset.partition(':')
  if kind == 'text':
    return text_sources.text_source(rest, config.tokens, split_plan(config))
  name, feature = tfds_source.parse_tfds(rest)
  split_names = tuple(config.tfds_splits.split(','))
  return tfds_source.TfdsText(name, feature, split_names, config.tokens,
                               config.data_dir or None)


def load_prepared(config) -> prepared.PreparedTokens:
  """A text or TFDS dataset's tokens, prepared into the data dir on first use."""
  return prepared.prepare(_text_source(config), config.data_dir or None)


def brown_token_splits(config) -> dict[str, list[str]]:
  """Brown's tokens per split, before any vocabulary (for reading it with another model's)."""
  texts = brown.load_texts(config.data_dir or None, config.corpus_dir or None)
  return corpus_lib.token_splits_of(corpus_lib.tokens_from_texts(texts), config.train_tokens,
                                    config.valid_tokens, config.tokens)


def load_dataset(config) -> corpus_lib.Corpus:
  """The corpus a config names: its dataset, tokens and vocabulary settings (the config's
  dataset-dependent defaults resolved, Config.resolved)."""
  problem = check_name(config.dataset)
  if problem:
    raise CorpusError(problem)
  if is_brown(config.dataset):
    return corpus_lib.load_corpus(
        data_dir=config.data_dir or None, corpus_dir=config.corpus_dir or None,
        unk_max_count=config.unk_max_count, train_tokens=config.train_tokens,
        valid_tokens=config.valid_tokens, max_vocab_size=config.max_vocab_size,
        tokenization=config.tokens)
  return corpus_lib.corpus_from_prepared(
      load_prepared(config), config.unk_max_count, config.max_vocab_size,
      reserved_tokens(config.dataset), boundary_token(config.dataset))
