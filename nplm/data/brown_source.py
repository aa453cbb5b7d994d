"""--dataset=brown: the Brown corpus as Bengio et al. (2003) read it.

The first 800,000 tokens train, the next 200,000 validate, the rest test (177,359 tokens here;
the paper had 181,041); the marks ending paragraphs and texts are tokens like any word, and
`</text>` precedes a split's first token. Typed text is split as the corpus's words are:
punctuation apart ("said ." not "said."), quotes as `` and '' (an approximation of the
corpus's own rules: abbreviations such as "Mr." and "U.S." stay whole, as there). Exported,
one paragraph per line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

from nplm.data import brown_format, tokenizers
from nplm.data.corpus import Corpus, corpus_from_tokens
from nplm.data.sources import Source, split_knobs
from nplm.data.vocab import PARAGRAPH_END, SPECIAL_TOKENS, TEXT_END
from nplm.errors import ConfigError
from nplm.knobs import LOCATION, Knob

# The paper's split: the first 800,000 tokens train, the next 200,000 valid, the rest test.
PAPER_SPLIT = {'train_tokens': 800_000, 'valid_tokens': 200_000}
PAPER_UNK_MAX_COUNT = 3  # The paper merged words seen at most 3 times into one symbol.


class BrownSource(Source):
  """brown: prepared into the data dir from the raw corpus (nplm.data.brown) on first use."""

  usage = 'brown'
  boundary_token = TEXT_END  # A text just ended.
  reserved_tokens = SPECIAL_TOKENS
  default_unk_max_count = PAPER_UNK_MAX_COUNT
  cuts_by_tokens = True
  knobs = {
      **split_knobs("The first this-many tokens train (0: the paper's 800,000).",
                    'The next this-many validate (0: 200,000), the rest test.'),
      'corpus_dir': Knob('', 'Directory of the 500 Brown files ca01 … cr09 (empty: search).',
                         role=LOCATION),
  }
  sentence_end = None  # Its paragraphs and texts end with a mark; its sentences do not.

  def __init__(self, argument: str):
    if argument:
      raise ConfigError(f'--dataset=brown takes nothing after it, got brown:{argument}')
    super().__init__(argument)

  def default_split(self) -> dict[str, int]:
    return dict(PAPER_SPLIT)

  def token_splits(self, config) -> dict[str, Sequence[str]]:
    from nplm.data import brown  # Imports TFDS: only once the corpus is read.
    texts = brown.load_texts(config.data_dir or None, config.corpus_dir or None)
    return token_splits_of(tokens_from_texts(texts), config.train_tokens, config.valid_tokens,
                           config.tokens)

  def config_errors(self, config) -> list[str]:
    errors = super().config_errors(config)
    if tokenizers.Tokenization.of(config) != tokenizers.Tokenization(config.tokens):
      errors.append('--dataset=brown is cut into words as its files are (punctuation apart, '
                    'cased): leave out --tokenizer, --lowercase and --subword_vocab_size')
    return errors

  def tokenizer(self, config, workdir=None) -> tokenizers.Tokenizer:
    del workdir
    return BrownCharacters() if config.tokens == 'chars' else BrownWords()

  def file_tokens(self, lines: Iterable[str], tokenizer: tokenizers.Tokenizer) -> list[str]:
    """Each line a paragraph ending `</p>`, the file a text ending `</text>`."""
    stream = []
    for line in lines:
      stream += tokenizer.tokens(line.rstrip('\n'))
      stream.append(PARAGRAPH_END)
    return stream + [TEXT_END]

  def export_lines(self, tokens: Sequence[str], tokenization: str) -> list[str]:
    if tokenization == 'words':
      return paragraph_lines(tokens)
    return [''.join(tokens)] if tokens else []  # Characters: one line, the marks verbatim.


class BrownWords(tokenizers.Tokenizer):
  """Typed text split as the corpus's words are (brown_words)."""

  def tokens(self, text: str) -> list[str]:
    return brown_words(text)


class BrownCharacters(tokenizers.Characters):
  """The characters of the corpus's words, one space between words."""

  def tokens(self, text: str) -> list[str]:
    return list(' '.join(brown_words(text)))


def paragraph_lines(tokens: Sequence[str]) -> list[str]:
  """One line per paragraph, breaking after </p> unless </text> follows it: the marks appear
  verbatim, so splitting the lines on whitespace gives exactly the tokens."""
  lines, current = [], []
  for position, token in enumerate(tokens):
    current.append(token)
    next_token = tokens[position + 1] if position + 1 < len(tokens) else None
    if token == TEXT_END or token == PARAGRAPH_END and next_token != TEXT_END:
      lines.append(' '.join(current))
      current = []
  if current:  # A split may end inside a paragraph.
    lines.append(' '.join(current))
  return lines


_ABBREVIATIONS = ('Mr', 'Mrs', 'Ms', 'Dr', 'Jr', 'Sr', 'St', 'Mt', 'Co', 'Inc', 'Ltd', 'Gen',
                  'Gov', 'Sen', 'Rep', 'Rev', 'Prof', 'Col', 'Lt', 'Capt', 'vs')
_ABBREVIATED = '|'.join([*_ABBREVIATIONS, *map(str.upper, _ABBREVIATIONS)])  # Text in capitals.
_WORD = re.compile(
    r"``|''|--|\.\.\."                                     # Brown's quotes, dash, ellipsis
    r"|(?:[A-Za-z]\.){2,}"                                 # U.S., A.M.
    rf"|(?:{_ABBREVIATED})\.(?!\w)"                        # Mr. Mrs. Dr. MR.
    r"|\$?\d+(?:[.,:/]\d+)*%?"                             # 1,000  3.5  1/2  10:30  $5  5%
    r"|\w+(?:[-'’]\w+)*"                                   # Georgia's  well-known
    r"|\S")                                                # any other character on its own


def brown_words(text: str) -> list[str]:
  """Words as Brown's files have them: punctuation apart, "quotes" as `` and ''."""
  text = re.sub(r'(^|[\s(\[{])"', r'\1`` ', text)  # An opening quote follows a space.
  text = text.replace('"', " ''")
  return _WORD.findall(text)


def tokens_from_texts(texts: Sequence[Sequence[Sequence[str]]]) -> list[str]:
  """Every word in order, PARAGRAPH_END after each paragraph and TEXT_END after each text."""
  tokens = []
  for text in texts:
    for paragraph in text:
      clashes = set(paragraph).intersection(SPECIAL_TOKENS)
      if clashes:
        raise ValueError(f'corpus words clash with the special tokens: {sorted(clashes)}')
      tokens.extend(paragraph)
      tokens.append(PARAGRAPH_END)
    tokens.append(TEXT_END)
  return tokens


def split_tokens(tokens: Sequence[str], train_tokens: int,
                 valid_tokens: int) -> dict[str, Sequence[str]]:
  """The first train_tokens train, the next valid_tokens validate, the rest (non-empty) test."""
  if min(train_tokens, valid_tokens) <= 0 or train_tokens + valid_tokens >= len(tokens):
    raise ConfigError(
        f'cannot split {len(tokens):,} tokens into {train_tokens:,} train, {valid_tokens:,} '
        'valid and a non-empty test split; give positive --train_tokens and --valid_tokens '
        f'that sum to less than {len(tokens):,}')
  valid_end = train_tokens + valid_tokens
  return {'train': tokens[:train_tokens], 'valid': tokens[train_tokens:valid_end],
          'test': tokens[valid_end:]}


def words_to_chars(tokens: Sequence[str], marks: Sequence[str] = SPECIAL_TOKENS) -> list[str]:
  """Brown's words as characters: a space between words, the marks kept as tokens."""
  chars, after_word = [], False
  for token in tokens:
    if token in marks:
      chars.append(token)
      after_word = False
    else:
      chars.extend(' ' + token if after_word else token)
      after_word = True
  return chars


def token_splits_of(tokens: Sequence[str], train_tokens: int, valid_tokens: int,
                    tokenization: str = 'words') -> dict[str, Sequence[str]]:
  """Brown's word tokens split by word counts; with `tokenization='chars'` each split's
  words become characters (the same text as the word splits)."""
  token_splits = split_tokens(tokens, train_tokens, valid_tokens)
  if tokenization == 'chars':
    token_splits = {name: words_to_chars(split) for name, split in token_splits.items()}
  return token_splits


def build_corpus(tokens: Sequence[str], unk_max_count: int, train_tokens: int,
                 valid_tokens: int, max_vocab_size: int = 0,
                 tokenization: str = 'words') -> Corpus:
  """Brown's corpus from its word tokens (token_splits_of)."""
  return corpus_from_tokens(token_splits_of(tokens, train_tokens, valid_tokens, tokenization),
                            unk_max_count, max_vocab_size, SPECIAL_TOKENS, TEXT_END)


def load_corpus(data_dir: str | os.PathLike | None = None,
                corpus_dir: str | os.PathLike | None = None,
                unk_max_count: int = PAPER_UNK_MAX_COUNT, train_tokens: int | None = None,
                valid_tokens: int | None = None,
                expected_words: int | None = brown_format.BROWN_WORDS,
                expected_files: Sequence[str] | None = None, max_vocab_size: int = 0,
                tokenization: str = 'words') -> Corpus:
  """The Brown corpus as id streams (the paper's split unless told), prepared into the TFDS
  data_dir on first use."""
  from nplm.data import brown  # Imports TFDS: only once the corpus is read.
  train_tokens = PAPER_SPLIT['train_tokens'] if train_tokens is None else train_tokens
  valid_tokens = PAPER_SPLIT['valid_tokens'] if valid_tokens is None else valid_tokens
  texts = brown.load_texts(data_dir, corpus_dir, expected_words, expected_files)
  return build_corpus(tokens_from_texts(texts), unk_max_count, train_tokens, valid_tokens,
                      max_vocab_size, tokenization)
