"""Corpora: the sources --dataset names (nplm.data.sources: Brown, text files, TFDS datasets,
a user's own), text and TFDS sources prepared once, the vocabulary and the split streams."""

from nplm.data.acquire import CorpusError, CorpusNotFoundError, CorruptCorpusError
from nplm.data.brown_source import load_corpus
from nplm.data.corpus import Corpus
from nplm.data.vocab import PARAGRAPH_END, TEXT_END, UNK, Vocabulary

__all__ = [
    'Corpus', 'CorpusError', 'CorpusNotFoundError', 'CorruptCorpusError', 'PARAGRAPH_END',
    'TEXT_END', 'UNK', 'Vocabulary', 'load_corpus',
]
