"""Text a user types (a prompt, a sentence, a file to evaluate) as a dataset's tokens.

A model reads tokens as its dataset was tokenized: Brown's words have their punctuation apart
("said ." not "said.") and its quotes as `` and ''; text and TFDS datasets split on
whitespace; character-level models read every character. The Brown rules below are an
approximation of the corpus's own (abbreviations such as "Mr." and "U.S." stay whole, as
there); what a model does not know falls to `<unk>`, and the programs say which words did.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from nplm.data.datasets import is_brown
from nplm.data.vocab import END_OF_SENTENCE, PARAGRAPH_END, TEXT_END

_BROWN_ABBREVIATIONS = ('Mr', 'Mrs', 'Ms', 'Dr', 'Jr', 'Sr', 'St', 'Mt', 'Co', 'Inc', 'Ltd',
                        'Gen', 'Gov', 'Sen', 'Rep', 'Rev', 'Prof', 'Col', 'Lt', 'Capt', 'vs')
_BROWN_TOKEN = re.compile(
    r"``|''|--|\.\.\."                                     # Brown's quotes, dash, ellipsis
    r"|(?:[A-Za-z]\.){2,}"                                 # U.S., A.M.
    rf"|(?:{'|'.join(_BROWN_ABBREVIATIONS)})\.(?!\w)"      # Mr. Mrs. Dr.
    r"|\$?\d+(?:[.,:/]\d+)*%?"                             # 1,000  3.5  1/2  10:30  $5  5%
    r"|\w+(?:[-'’]\w+)*"                                   # Georgia's  well-known
    r"|\S")                                                # any other character on its own


def brown_words(text: str) -> list[str]:
  """Words as Brown's files have them: punctuation apart, "quotes" as `` and ''."""
  text = re.sub(r'(^|[\s(\[{])"', r'\1`` ', text)  # An opening quote follows a space.
  text = text.replace('"', " ''")
  return _BROWN_TOKEN.findall(text)


def words_of(text: str, dataset: str, tokens: str) -> list[str]:
  """One sentence (or prompt) as the dataset's tokens, without an end mark."""
  words = brown_words(text) if is_brown(dataset) else text.split()
  return words if tokens == 'words' else list(' '.join(words) if is_brown(dataset) else text)


def file_tokens(lines: Iterable[str], dataset: str, tokens: str) -> list[str]:
  """A text file as the dataset's token stream: each line a paragraph ending `</p>` and the
  file a text ending `</text>` (Brown), or each line ending `<eos>` (text, TFDS)."""
  end = PARAGRAPH_END if is_brown(dataset) else END_OF_SENTENCE
  stream = []
  for line in lines:
    stream += words_of(line.rstrip('\n'), dataset, tokens)
    stream.append(end)
  if is_brown(dataset):
    stream.append(TEXT_END)
  return stream
