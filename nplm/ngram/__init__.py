"""Count-based baselines on the same tokens as the neural models: the paper's interpolated
trigram and modified Kneser-Ney. Both score every token of a split exactly once, from a
distribution normalized over the vocabulary. A fitted model is saved as one checksummed
file (saved.py); Kneser-Ney also as an ARPA file that KenLM reads (arpa.py)."""

from nplm.ngram.interpolated import InterpolatedTrigram, frequency_bins
from nplm.ngram.kneser_ney import KneserNey
from nplm.ngram.table import NgramTable, perplexity, stream_windows

__all__ = ['InterpolatedTrigram', 'KneserNey', 'NgramTable', 'frequency_bins', 'perplexity',
           'stream_windows']
