"""Text a user types (a prompt, a sentence, a file to evaluate) as a dataset's tokens.

A model reads tokens as its dataset was tokenized, and each source says how
(nplm.data.sources.Source.words_of, file_tokens): Brown's words have their punctuation apart,
text and TFDS datasets split on whitespace, character-level models read every character. What
a model does not know falls to `<unk>`, and the programs say which words did.
"""

from __future__ import annotations

from collections.abc import Iterable

from nplm.data.sources import source_of


def words_of(text: str, dataset: str, tokens: str) -> list[str]:
  """One sentence (or prompt) as the dataset's tokens, without an end mark."""
  return source_of(dataset).words_of(text, tokens)


def file_tokens(lines: Iterable[str], dataset: str, tokens: str) -> list[str]:
  """A text file as the dataset's token stream: each line ending `<eos>` (text, TFDS), or
  a paragraph ending `</p>` in a text ending `</text>` (Brown)."""
  return source_of(dataset).file_tokens(lines, tokens)
