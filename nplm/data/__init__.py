"""Corpora: Brown (acquisition, its TFDS dataset), text and TFDS sources prepared once, the
vocabulary and the split streams (nplm.data.datasets picks one by --dataset)."""

from nplm.data.acquire import CorpusError, CorpusNotFoundError, CorruptCorpusError
from nplm.data.corpus import Corpus, load_corpus
from nplm.data.vocab import PARAGRAPH_END, TEXT_END, UNK, Vocabulary

__all__ = [
    'Corpus', 'CorpusError', 'CorpusNotFoundError', 'CorruptCorpusError', 'PARAGRAPH_END',
    'TEXT_END', 'UNK', 'Vocabulary', 'load_corpus',
]
