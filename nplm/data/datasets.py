"""What the programs ask of the dataset a config names (`--dataset`): its corpus, its prepared
tokens, its boundary token. Each kind of source answers for itself (nplm.data.sources)."""

from __future__ import annotations

from nplm.data.corpus import Corpus
from nplm.data.sources import source_of


def load_dataset(config) -> Corpus:
  """The corpus a config names: its dataset, tokens and vocabulary settings (the config's
  dataset-dependent defaults resolved, Config.resolved)."""
  return source_of(config.dataset).load(config)


def load_prepared(config):
  """A prepared source's tokens (text:, tfds:), prepared into the data dir on first use."""
  return source_of(config.dataset).prepare(config)


def boundary_token(dataset: str) -> str:
  """What precedes a split's first token: a text just ended (Brown), a line just ended."""
  return source_of(dataset).boundary_token
