"""`--dataset`: the kinds of source a run reads, each a Source that owns what differs between
them.

  brown                          the paper's corpus and split (nplm.data.brown_source)
  text:DIR | text:FILE           text files (nplm.data.text_sources)
  tfds:NAME[/CONFIG][:FEATURE]   a TFDS text dataset (nplm.data.tfds_source)
  module.path:Name[:ARGUMENT]    a Source subclass of your own, given ARGUMENT ('' if none)

A source owns its markers (the token before a split's first, the tokens that always keep an
id), its default --unk_max_count and split (Config.resolved fills them in), which split knobs
it accepts, how its data becomes a Corpus, its tokenizer (typed text read as its lines
were) and how its splits are written as lines. A new kind is one file (a subclass) and one
line in SOURCES, or no line when named by its import path; nothing outside the sources asks
which kind a dataset is. The registry holds import paths, loaded when a dataset is named:
this module imports no TFDS (`import nplm.config` stays light).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from nplm import components
from nplm.data import corpus as corpus_lib
from nplm.data import tokenizers
from nplm.data.corpus import SPLITS, Corpus
from nplm.data.vocab import END_OF_SENTENCE, UNK
from nplm.errors import ConfigError
from nplm.knobs import SPLIT_CUT, Knob

def split_knobs(train_help: str, valid_help: str) -> dict[str, Knob]:
  """--train_tokens and --valid_tokens, as a source that cuts its text by tokens reads them."""
  return {'train_tokens': Knob(0, train_help, role=SPLIT_CUT),
          'valid_tokens': Knob(0, valid_help, role=SPLIT_CUT)}


SOURCES = {
    'brown': 'nplm.data.brown_source:BrownSource',
    'text': 'nplm.data.text_sources:TextSource',
    'tfds': 'nplm.data.tfds_source:TfdsSource',
}


class Source:
  """One kind of --dataset, given what follows its name (`argument`, '' if nothing).

  The defaults are text's: lines one after another, each ending `<eos>`. A source held in
  memory gives `token_splits(config)`; one prepared into the data dir is a PreparedSource.
  """

  usage = ''  # How --dataset names it, for messages.
  knobs: dict[str, Knob] = {}  # Those it reads beside the tokenizer's (nplm.knobs).
  boundary_token = END_OF_SENTENCE  # What precedes a split's first token: a line ended.
  reserved_tokens = (UNK, END_OF_SENTENCE)  # Keep an id whatever their training count.
  # None: the training counts decide (nplm.data.vocab.trained_unk_max_count): every type
  # kept where the text ships its own <unk> (PTB, WikiText: their published counts), else
  # the words seen once merged, so that <unk> is trained.
  default_unk_max_count = None
  cuts_by_tokens = False  # Whether --train_tokens and --valid_tokens cut it into splits.
  # The token that ends a sentence (a line), scored as a sentence's last: None where the
  # source has no sentence end (Brown's paragraphs and texts end, its sentences do not).
  sentence_end = END_OF_SENTENCE

  def __init__(self, argument: str):
    self.argument = argument

  def default_split(self) -> dict[str, int]:
    """--train_tokens and --valid_tokens when neither is given ({}: it comes split)."""
    return {}

  def config_errors(self, config) -> list[str]:
    """What in the config this source cannot read."""
    if (config.train_tokens or config.valid_tokens) and not self.cuts_by_tokens:
      return [f'--train_tokens and --valid_tokens cut a corpus into splits; {config.dataset} '
              'comes split: leave them out']
    return []

  def token_splits(self, config) -> dict[str, Sequence[str]]:
    """Each split's tokens, for a source held in memory."""
    raise NotImplementedError(f'{type(self).__name__} gives no token_splits(config)')

  def load(self, config) -> Corpus:
    """The splits under a vocabulary of the training split's (the config resolved)."""
    return corpus_lib.corpus_from_tokens(self.token_splits(config), config.unk_max_count,
                                         config.max_vocab_size, self.reserved_tokens,
                                         self.boundary_token)

  def types_and_splits(self, config, tokenizer_model: bytes | None = None):
    """(every type, each split as type indices) before any vocabulary cut: what another
    model's vocabulary then maps; `tokenizer_model`: that model's learned tokenizer, which
    cuts the text (a source held in memory comes cut)."""
    del tokenizer_model
    return corpus_lib.index_types(self.token_splits(config))

  def tokenizer(self, config, workdir=None) -> tokenizers.Tokenizer:
    """How the source's lines (and typed text) become tokens under `config` (its --tokens,
    --tokenizer, --lowercase, --subword_vocab_size); `workdir`: a run's, where a learned
    tokenizer's model was saved (nplm.data.tokenizers.TOKENIZER_FILE)."""
    tokenization = tokenizers.Tokenization.of(config)
    if tokenization.learned:
      return tokenizers.saved_tokenizer(workdir, tokenization)
    return tokenization.tokenizer_of()

  def file_tokens(self, lines: Iterable[str], tokenizer: tokenizers.Tokenizer) -> list[str]:
    """A typed file as a token stream: each line's tokens, then the boundary token."""
    stream = []
    for line in lines:
      stream += tokenizer.tokens(line.rstrip('\n'))
      stream.append(self.boundary_token)
    return stream

  def export_lines(self, tokens: Sequence[str], tokenization: str) -> list[str]:
    """A split's tokens as the lines of a text file that reads back as them (text:DIR): one
    line per boundary token, which is left out; characters joined as they are."""
    separator = ' ' if tokenization == 'words' else ''
    lines, current = [], []
    for token in tokens:
      if token == self.boundary_token:
        lines.append(separator.join(current))
        current = []
      else:
        current.append(token)
    if current:
      lines.append(separator.join(current))
    return lines


class PreparedSource(Source):
  """A source of lines prepared once into the data dir as type indices (nplm.data.prepared):
  `lines_source(config)` gives what streams them (`kind`, `name`, `tokenization` (how its
  lines are cut, nplm.data.tokenizers.Tokenization), `tokens` (its name), `fingerprint()`,
  `lines(split)`; see nplm.data.text_sources), whatever their size."""

  def __init__(self, argument: str):
    if not argument:
      raise ConfigError(f'--dataset needs what follows the colon: {self.usage}')
    super().__init__(argument)

  def lines_source(self, config):
    raise NotImplementedError(f'{type(self).__name__} gives no lines_source(config)')

  def prepare(self, config, tokenizer_model: bytes | None = None):
    """The prepared tokens (nplm.data.prepared.PreparedTokens), prepared on first use; cut by
    the learned tokenizer `tokenizer_model` if given (another dataset's), not one learned
    from these lines."""
    from nplm.data import prepared  # Imports TFDS: only once data is read.
    lines = self.lines_source(config)
    if tokenizer_model is not None and lines.tokenization.learned:
      lines.tokenization = dataclasses.replace(lines.tokenization, model=tokenizer_model)
      lines.tokens = lines.tokenization.name  # Named, and fingerprinted, by it.
    return prepared.prepare(lines, config.data_dir or None)

  def load(self, config) -> Corpus:
    return self.prepare(config).corpus(config.unk_max_count, config.max_vocab_size,
                                       self.reserved_tokens, self.boundary_token)

  def types_and_splits(self, config, tokenizer_model: bytes | None = None):
    prepared = self.prepare(config, tokenizer_model)
    return prepared.types, {name: prepared.read(name) for name in SPLITS}


def source_of(dataset: str) -> Source:
  """The source --dataset=`dataset` names: KIND[:ARGUMENT] of SOURCES, or a Source class's
  import path, module.path:Name[:ARGUMENT] (a registry kind has no dot: never one)."""
  kind, _, argument = dataset.partition(':')
  if kind not in SOURCES:
    attribute, _, argument = argument.partition(':')
    kind = f'{kind}:{attribute}'
    if not components.is_import_path(kind):
      known = ', '.join(source_class(name).usage for name in SOURCES)
      raise ConfigError(f'unknown --dataset={dataset!r}: give {known}, or '
                        'module.path:Name[:ARGUMENT] for a source of your own')
  return source_class(kind)(argument)


def source_class(kind: str) -> type[Source]:
  source_class = components.load('--dataset', SOURCES, kind)
  if not (isinstance(source_class, type) and issubclass(source_class, Source)):
    raise ConfigError(f'--dataset={kind} is not a source: subclass nplm.data.sources.Source')
  return source_class


def readers(knob: str) -> list[str]:
  """The registry's sources (their --dataset kinds) that read the Config field `knob`."""
  return [kind for kind in SOURCES if knob in source_class(kind).knobs]
