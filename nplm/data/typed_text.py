"""Text a user types (a prompt, a sentence, a file to evaluate) as a dataset's tokens.

A model reads tokens as its dataset was tokenized: through its tokenizer
(nplm.data.sources.Source.tokenizer; a trained model's `tokenizer`), which prepared its
corpus. Brown's words have their punctuation apart; text and TFDS datasets split on
whitespace unless --tokenizer says otherwise (NLTK's words, SentencePiece subwords);
character-level models read every character. What a model does not know falls to `<unk>`,
and the programs say which words did.
"""

from __future__ import annotations

from collections.abc import Iterable

from nplm.data import tokenizers
from nplm.data.sources import source_of


def words_of(text: str, dataset: str, tokens: str | tokenizers.Tokenizer) -> list[str]:
  """One sentence (or prompt) as the dataset's tokens, without an end mark. `tokens`: the
  model's tokenizer, or --tokens ('words', 'chars') for the dataset's default one."""
  return _tokenizer(dataset, tokens).tokens(text)


def file_tokens(lines: Iterable[str], dataset: str,
                tokens: str | tokenizers.Tokenizer) -> list[str]:
  """A text file as the dataset's token stream: each line ending `<eos>` (text, TFDS), or
  a paragraph ending `</p>` in a text ending `</text>` (Brown)."""
  return source_of(dataset).file_tokens(lines, _tokenizer(dataset, tokens))


def _tokenizer(dataset: str, tokens: str | tokenizers.Tokenizer) -> tokenizers.Tokenizer:
  if isinstance(tokens, tokenizers.Tokenizer):
    return tokens
  return source_of(dataset).tokenizer(tokenizers.Tokenization(tokens))
