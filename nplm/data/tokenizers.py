"""How a line of text becomes a dataset's tokens, and tokens become text again.

Every source (nplm.data.sources) names its tokenizer, `Source.tokenizer(config, workdir)`:
the corpus is prepared with it, and the programs that read typed text (score, predict,
generate, evaluate --text_file) read it with the same one, so that "The cat." typed is
what the training data held.

The knobs (--tokens, --tokenizer, --lowercase, --subword_vocab_size) make a Tokenization:
whitespace words (PTB and WikiText ship tokenized), characters, NLTK's Treebank-style words
(punctuation apart) or SentencePiece subwords (BPE, Sennrich et al. 2016; unigram, Kudo
2018) learned from the training split. Its `name` is what a prepared dataset and a run
record of how their text was cut: 'words' and 'chars' for the defaults, as before these
knobs existed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from nplm import paths
from nplm.data.vocab import UNK
from nplm.errors import ConfigError
from nplm.knobs import DATA, Knob

TOKENIZERS = ('whitespace', 'nltk', 'bpe', 'unigram')  # --tokenizer's values.
SUBWORD_TOKENIZERS = ('bpe', 'unigram')  # SentencePiece's model types, learned from text.
TOKENIZER_FILE = 'tokenizer.model'  # A run's learned tokenizer, beside its vocab.txt.
# A corpus's own unknown token (PTB, WikiText: `<unk>`) stays one token whatever cuts the
# words around it: split apart it would read as the word pieces '<', 'unk', '>'.
_UNKNOWN = re.compile(f'({re.escape(UNK)})')
# SentencePiece's pieces for <unk>, <s> and </s>: a model holds them besides the text's.
_META_PIECES = 3
# SentencePiece skips (silently) a training sentence longer than this many bytes, its
# max_sentence_length; longer lines are cut at spaces to learn from them.
_MAX_SENTENCE_BYTES = 4192


def around_unknowns(cut, text: str) -> list[str]:
  """`cut` applied to the text between literal <unk> tokens, which are kept whole."""
  tokens = []
  for index, part in enumerate(_UNKNOWN.split(text)):
    if index % 2:
      tokens.append(part)
    elif part.strip():
      tokens += cut(part.strip())
  return tokens


class Tokenizer:
  """Whitespace-separated words: PTB and WikiText ship tokenized, and their published
  perplexities count these tokens."""

  name = 'words'  # What a prepared dataset and a run record of how their text was cut.
  model: bytes | None = None  # A learned tokenizer's serialized model.

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


class Lowercased(Tokenizer):
  """Another tokenizer's tokens of the lowercased text (--lowercase)."""

  def __init__(self, cased: Tokenizer):
    self.cased, self.name, self.model = cased, f'{cased.name}-lower', cased.model

  def tokens(self, text: str) -> list[str]:
    return self.cased.tokens(text.lower())

  def detokenize(self, tokens: Sequence[str]) -> str:
    return self.cased.detokenize(tokens)


# Abbreviations whose period ends no sentence: NLTK's trained Punkt parameters need a data
# download, and an untrained splitter would cut "Mr. Smith" after "Mr.".
_ABBREVIATIONS = ('mr', 'mrs', 'ms', 'dr', 'jr', 'sr', 'st', 'mt', 'co', 'inc', 'ltd', 'gen',
                  'gov', 'sen', 'rep', 'rev', 'prof', 'col', 'lt', 'capt', 'vs', 'etc', 'e.g',
                  'i.e', 'u.s', 'no', 'fig', 'jan', 'feb', 'mar', 'apr', 'aug', 'sept', 'oct',
                  'nov', 'dec')


class NltkWords(Tokenizer):
  """Penn Treebank-style words (NLTK's word tokenizer): punctuation and clitics apart
  ("river." -> "river" "."; "It's" -> "It" "'s"), quotes as `` and ''. The text is cut into
  sentences first (Punkt, untrained but for common abbreviations), since the word tokenizer
  splits off only a sentence's last period."""

  name = 'nltk'

  def __init__(self):
    from nltk.tokenize import NLTKWordTokenizer, PunktSentenceTokenizer
    from nltk.tokenize.punkt import PunktParameters
    from nltk.tokenize.treebank import TreebankWordDetokenizer
    parameters = PunktParameters()
    parameters.abbrev_types = set(_ABBREVIATIONS)
    self._sentences = PunktSentenceTokenizer(parameters)
    self._words = NLTKWordTokenizer()
    self._detokenizer = TreebankWordDetokenizer()

  def tokens(self, text: str) -> list[str]:
    return around_unknowns(self._words_of, text)

  def _words_of(self, text: str) -> list[str]:
    return [word for sentence in self._sentences.tokenize(text)
            for word in self._words.tokenize(sentence)]

  def detokenize(self, tokens: Sequence[str]) -> str:
    return self._detokenizer.detokenize(list(tokens))


class SentencePieceSubwords(Tokenizer):
  """SentencePiece pieces of a trained model (its serialized bytes, `model`): a word's
  first piece carries '▁' for the space before it, so the pieces give back the text."""

  def __init__(self, model: bytes, name: str):
    import sentencepiece
    self.model, self.name = model, name
    try:
      self._processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    except RuntimeError:  # What protobuf's parser says of bytes that are no model.
      self._processor = None
    if self._processor is None or not self._processor.get_piece_size():
      raise ValueError('these bytes are no SentencePiece model')

  @property
  def pieces(self) -> tuple[str, ...]:
    """Every piece the model can cut text into (not its control and unknown pieces)."""
    processor = self._processor
    return tuple(processor.id_to_piece(i) for i in range(processor.get_piece_size())
                 if not (processor.is_control(i) or processor.is_unknown(i)))

  def tokens(self, text: str) -> list[str]:
    return around_unknowns(lambda part: self._processor.encode(part, out_type=str), text)

  def detokenize(self, tokens: Sequence[str]) -> str:
    """The pieces merged, a literal <unk> between them as itself (SentencePiece would
    print its own unknown piece as ' ⁇ ')."""
    parts, pieces = [], []
    for token in tokens:
      if token == UNK:
        parts += [self._processor.decode_pieces(pieces), UNK]
        pieces = []
      else:
        pieces.append(token)
    parts.append(self._processor.decode_pieces(pieces))
    return ' '.join(part for part in parts if part)


@dataclasses.dataclass(frozen=True)
class Tokenization:
  """How the knobs say text is cut: a config's --tokens, --tokenizer, --lowercase and
  --subword_vocab_size (Tokenization.of); for a learned tokenizer, `model` when it is not
  learned from the text it cuts (another dataset read by a trained model's tokenizer)."""
  tokens: str = 'words'
  tokenizer: str = 'whitespace'
  lowercase: bool = False
  subword_vocab_size: int = 8000
  model: bytes | None = dataclasses.field(default=None, repr=False)

  @classmethod
  def of(cls, config) -> Tokenization:
    """A config's (or anything with its four fields; a run recorded before the tokenizer
    knobs existed has their defaults)."""
    defaults = cls()
    return cls(config.tokens, *(getattr(config, field, getattr(defaults, field))
                                for field in ('tokenizer', 'lowercase', 'subword_vocab_size')))

  @property
  def learned(self) -> bool:
    """Whether the tokenizer is learned from the training split (SentencePiece)."""
    return self.tokenizer in SUBWORD_TOKENIZERS

  @property
  def whitespace_words(self) -> bool:
    """Whether the tokens are the whitespace-separated words (lowercased or not): a
    perplexity per word is then the perplexity."""
    return self.tokens == 'words' and self.tokenizer == 'whitespace'

  @property
  def name(self) -> str:
    """'words', 'chars', 'nltk', 'bpe8000', 'unigram8000', each with '-lower' if
    lowercased: known before a subword model is learned, as a prepared dataset's name is;
    a given model's digest follows (its pieces are not those the text would learn)."""
    if self.learned:
      base = f'{self.tokenizer}{self.subword_vocab_size}'
      if self.model is not None:
        base += '-' + hashlib.sha256(self.model).hexdigest()[:8]
    else:
      base = 'nltk' if self.tokenizer == 'nltk' else self.tokens
    return f'{base}-lower' if self.lowercase else base

  def tokenizer_of(self, model: bytes | None = None) -> Tokenizer:
    """The tokenizer; `model`: a learned one's serialized SentencePiece model (if not
    given, its own)."""
    model = self.model if model is None else model
    if self.lowercase:
      return Lowercased(dataclasses.replace(self, lowercase=False).tokenizer_of(model))
    if self.learned:
      if model is None:
        raise ValueError(f'--tokenizer={self.tokenizer} needs its learned model')
      return SentencePieceSubwords(model, self.name)
    if self.tokens == 'chars':
      return Characters()
    return NltkWords() if self.tokenizer == 'nltk' else Tokenizer()

  def counting(self) -> Tokenizer:
    """What --train_tokens counts: the tokens, or the whitespace words for a learned
    tokenizer (learned from the training split that the count cuts)."""
    if self.learned:
      return Tokenization('words', lowercase=self.lowercase).tokenizer_of()
    return self.tokenizer_of()

  def learn(self, lines: Iterable[str]) -> bytes:
    """A SentencePiece model learned from `lines` (a training split), serialized: the same
    lines give the same bytes (a seeded sample of at most a million lines)."""
    import sentencepiece
    if self.lowercase:
      lines = (line.lower() for line in lines)
    lines = (_UNKNOWN.sub(' ', line) for line in lines)  # Kept whole: nothing to learn.
    model = io.BytesIO()
    sentencepiece.set_random_generator_seed(0)
    try:
      sentencepiece.SentencePieceTrainer.train(
          sentence_iterator=(piece for line in lines for piece in _sentences(line)),
          model_writer=model, model_type=self.tokenizer,
          # Fewer than its meta pieces fails before SentencePiece counts the characters
          # needed: with as many, its error names that count (the size that works).
          vocab_size=max(self.subword_vocab_size, _META_PIECES),
          hard_vocab_limit=False,  # A text with fewer pieces to learn gets fewer, no error.
          # The text's own characters, so that the pieces give back the line as it was.
          normalization_rule_name='identity', max_sentence_length=_MAX_SENTENCE_BYTES,
          input_sentence_size=1_000_000, shuffle_input_sentence=True, minloglevel=2)
    except RuntimeError as error:  # SentencePiece's checks, as one line.
      raise ConfigError(self._not_learned(str(error))) from None
    return model.getvalue()

  def _not_learned(self, error: str) -> str:
    what = (f'--tokenizer={self.tokenizer} cannot learn --subword_vocab_size='
            f'{self.subword_vocab_size} subwords from the training split')
    if needed := re.search(r'smaller than required_chars\. \d+ vs (\d+)', error):
      return (f'{what}: it needs at least {needed[1]} (the characters of the text and '
              "SentencePiece's <unk>, <s>, </s>); give --subword_vocab_size="
              f'{needed[1]} or more')
    if '!sentences_.empty()' in error:
      return f'{what}: it holds no text to learn from'
    # '... src/x.cc(123) [check] message': the message, else the check that failed.
    reason = (error.split('] ', 1)[-1].strip() or error).strip().splitlines()
    return f'{what} ({reason[0][:200] if reason else "no reason given"})'


_DEFAULT = Tokenization()
KNOBS = {
    'tokens': Knob(_DEFAULT.tokens, "words (whitespace-separated; Brown's words) or chars "
                   '(every character a token, the space too; reports bits per character).',
                   DATA),
    'tokenizer': Knob(_DEFAULT.tokenizer, 'text:, tfds: words cut by whitespace (PTB, '
                      "WikiText come tokenized), nltk (NLTK's: punctuation apart), or subwords "
                      'learned from the training split by SentencePiece: bpe or unigram '
                      '(summaries add per-word perplexity).', DATA),
    'lowercase': Knob(_DEFAULT.lowercase, 'text:, tfds: lowercase the text before cutting it.',
                      DATA),
    'subword_vocab_size': Knob(_DEFAULT.subword_vocab_size, '--tokenizer=bpe, unigram: the '
                               'subwords SentencePiece learns (fewer if the text has fewer).',
                               DATA),
}


def _sentences(line: str) -> Iterable[str]:
  """A line as SentencePiece's training sentences: whole if it is short enough, else cut at
  spaces (no piece spans one) into sentences of at most _MAX_SENTENCE_BYTES; a word longer
  than that is cut into sentences of its own."""
  if len(line.encode()) <= _MAX_SENTENCE_BYTES:
    yield line
    return
  sentence, size = [], 0
  for word in filter(None, line.split(' ')):
    length = len(word.encode())
    if sentence and size + 1 + length > _MAX_SENTENCE_BYTES:
      yield ' '.join(sentence)
      sentence, size = [], 0
    if length > _MAX_SENTENCE_BYTES:  # A character is 4 bytes at most.
      step = _MAX_SENTENCE_BYTES // 4
      yield from (word[start:start + step] for start in range(0, len(word), step))
      continue
    size += length + bool(sentence)
    sentence.append(word)
  if sentence:
    yield ' '.join(sentence)


def tokenizer_of(config, model: bytes | None = None) -> Tokenizer:
  """The tokenizer a config's knobs name (a learned one from its model's bytes)."""
  return Tokenization.of(config).tokenizer_of(model)


def tokenization_of(tokens: str | Tokenization) -> Tokenization:
  """A Tokenization, given one or --tokens alone ('words', 'chars': the defaults)."""
  return tokens if isinstance(tokens, Tokenization) else Tokenization(tokens)


def saved_tokenizer(workdir, tokenization: Tokenization) -> Tokenizer:
  """A learned tokenizer from the model a run saved in its workdir (TOKENIZER_FILE); a
  ConfigError, one line, if it is missing or is no SentencePiece model."""
  if workdir is None:
    raise ConfigError(f'--tokenizer={tokenization.tokenizer} is learned from the training '
                      f'split: name the run whose {TOKENIZER_FILE} holds it (its workdir)')
  path = Path(workdir) / TOKENIZER_FILE
  what = (f'{paths.shown(workdir)} was trained with --tokenizer={tokenization.tokenizer}, '
          f'whose model its run keeps in {TOKENIZER_FILE}')
  try:
    model = path.read_bytes()
  except OSError as error:
    raise ConfigError(f'{what}, which cannot be read ({error.strerror}): copy it back from '
                      'a copy of the workdir, or train the run again') from None
  try:
    return tokenization.tokenizer_of(model)
  except ValueError:
    raise ConfigError(f'{what}, which is damaged (no SentencePiece model): copy it back from '
                      'a copy of the workdir, or train the run again') from None


def check_saved_model(workdir, sha256: str) -> None:
  """A ConfigError, one line, if the TOKENIZER_FILE in `workdir` is not the model whose
  SHA-256 its run recorded (another run's copied over it): it would cut text otherwise than
  the model was trained on (one missing or damaged is saved_tokenizer's to name)."""
  path = Path(workdir) / TOKENIZER_FILE
  try:
    model = path.read_bytes()
  except OSError:
    return
  if hashlib.sha256(model).hexdigest() != sha256:
    raise ConfigError(f'{paths.shown(path)} is not the tokenizer its run learned (its SHA-256 '
                      'differs from the one run.json records): copy the run\'s own back from a '
                      'copy of the workdir, or rerun its train command, which writes it again')


def config_errors(config) -> list[str]:
  """What in the config's tokenizer knobs cannot be read together."""
  default_subword_vocab_size = KNOBS['subword_vocab_size'].default
  checks = [
      (config.tokenizer in TOKENIZERS,
       f'unknown --tokenizer={config.tokenizer!r}; known: {", ".join(TOKENIZERS)}'),
      (config.tokens == 'words' or config.tokenizer == 'whitespace',
       f'--tokenizer={config.tokenizer} cuts words, --tokens=chars reads every character: '
       'leave out --tokenizer (or give --tokens=words)'),
      (config.tokenizer in SUBWORD_TOKENIZERS
       or config.subword_vocab_size == default_subword_vocab_size,
       f'--subword_vocab_size is read by --tokenizer={", ".join(SUBWORD_TOKENIZERS)}, not '
       f'--tokenizer={config.tokenizer}: leave it out'),
      (config.subword_vocab_size >= 1,
       f'--subword_vocab_size must be positive, got {config.subword_vocab_size}'),
  ]
  return [error for ok, error in checks if not ok]


def token_kind(config) -> str:
  """What the run's tokens are, as its start-up line names them."""
  if config.tokens == 'chars':
    return 'characters'
  if config.tokenizer in SUBWORD_TOKENIZERS:
    return f'{config.tokenizer} subwords, {config.subword_vocab_size:,}'
  lowercased = ', lowercased' if config.lowercase else ''
  return f'{"NLTK " if config.tokenizer == "nltk" else ""}words{lowercased}'
