"""How a line of text becomes a dataset's tokens, and tokens become text again.

Every source (nplm.data.sources) names its tokenizer, `Source.tokenizer(config, workdir)`:
the corpus is prepared with it, and the programs that read typed text (score, predict,
generate, evaluate --text_file) read it with the same one, so that "The cat." typed is
what the training data held.
"""

from __future__ import annotations

from collections.abc import Sequence


class Tokenizer:
  """Whitespace-separated words: PTB and WikiText ship tokenized, and their published
  perplexities count these tokens."""

  name = 'words'  # What a prepared dataset and a run record of how their text was cut.

  def tokens(self, text: str) -> list[str]:
    """One line of text as tokens, without an end mark."""
    return text.split()

  def detokenize(self, tokens: Sequence[str]) -> str:
    """One line's tokens as text."""
    return ' '.join(tokens)


class Characters(Tokenizer):
  """Every character a token, the space among them."""

  name = 'chars'

  def tokens(self, text: str) -> list[str]:
    return list(text)

  def detokenize(self, tokens: Sequence[str]) -> str:
    return ''.join(tokens)
