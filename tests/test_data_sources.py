"""--dataset by kind (nplm.data.sources): each source's markers and split are its own, and a
source of the user's own, named by its import path, is one class (ToySource, defined here,
outside nplm) that trains and is read like the built-in ones."""

import json

import pytest

from nplm.config import Config, ConfigError
from nplm.data import datasets, sources, typed_text
from nplm.data.vocab import END_OF_SENTENCE, SPECIAL_TOKENS, TEXT_END, UNK
from nplm.trainer import run
from nplm.use.trained import load_trained
from nplm.training.config_checks import validated

SENTENCE_END = '</s>'
TOY = 'tests.test_data_sources:ToySource'
WORDS = ('one', 'two', 'three', 'four', 'five')


class ToySource(sources.Source):
  """Counting sentences, 'one </s> one two </s> …' (their number: the argument, default
  60), cut by token counts, 120 train and 40 valid unless told."""

  usage = f'{TOY}[:SENTENCES]'
  boundary_token = SENTENCE_END
  reserved_tokens = (UNK, SENTENCE_END)
  default_unk_max_count = 1
  cuts_by_tokens = True

  def __init__(self, argument: str):
    super().__init__(argument)
    self.sentences = int(argument or 60)

  def default_split(self):
    return {'train_tokens': 120, 'valid_tokens': 40}

  def token_splits(self, config):
    tokens = []
    for index in range(self.sentences):
      tokens += [*WORDS[:1 + index % len(WORDS)], SENTENCE_END]
    valid_end = config.train_tokens + config.valid_tokens
    return {'train': tokens[:config.train_tokens],
            'valid': tokens[config.train_tokens:valid_end], 'test': tokens[valid_end:]}


def test_a_source_of_ones_own_declares_its_markers_and_split():
  config = validated(Config(workdir='w', dataset=f'{TOY}:60').resolved())
  assert (config.train_tokens, config.valid_tokens, config.unk_max_count) == (120, 40, 1)
  corpus = datasets.load_dataset(config)
  assert corpus.vocab.words[corpus.boundary_id] == SENTENCE_END
  assert [corpus.stats[split]['tokens'] for split in ('train', 'valid', 'test')] == [
      120, 40, 240 - 160]  # 60 sentences of 2 … 6 tokens.
  assert datasets.boundary_token(config.dataset) == SENTENCE_END
  # Typed text and exported lines follow its boundary token.
  assert typed_text.file_tokens(['one  two', ''], config.dataset, 'words') == [
      'one', 'two', SENTENCE_END, SENTENCE_END]
  assert sources.source_of(config.dataset).export_lines(['one', 'two', SENTENCE_END, 'three'],
                                                        'words') == ['one two', 'three']
  told = Config(workdir='w', dataset=TOY, train_tokens=200, valid_tokens=20).resolved()
  assert (told.train_tokens, told.valid_tokens) == (200, 20)


@pytest.mark.slow
def test_a_source_of_ones_own_trains_through_run(tmp_path):
  workdir = tmp_path / 'run'
  summary = run(Config(workdir=str(workdir), dataset=f'{TOY}:80', order=3, feature_size=8,
                       hidden_size=8, batch_size=8, eval_batch_size=16, epochs=1, max_steps=3,
                       log_every=100))
  assert summary['steps'] == 3
  assert summary['tokens']['test'] == 320 - 160  # 80 sentences, 16 of each length.
  recorded = json.loads((workdir / 'run.json').read_text())['config']
  assert (recorded['dataset'], recorded['train_tokens'], recorded['unk_max_count']) == (
      f'{TOY}:80', 120, 1)
  trained = load_trained(workdir)
  assert trained.boundary_id == trained.vocab.id_of(SENTENCE_END) != trained.vocab.unk_id


def test_the_built_in_sources_keep_their_markers_and_defaults():
  brown, text = sources.source_of('brown'), sources.source_of('text:x')
  assert (brown.boundary_token, brown.reserved_tokens, brown.default_unk_max_count) == (
      TEXT_END, SPECIAL_TOKENS, 3)
  assert brown.default_split() == {'train_tokens': 800_000, 'valid_tokens': 200_000}
  assert (text.boundary_token, text.reserved_tokens, text.default_unk_max_count) == (
      END_OF_SENTENCE, (UNK, END_OF_SENTENCE), None)
  assert text.default_split() == {} == sources.source_of('tfds:lm1b').default_split()


def test_a_dataset_that_names_no_source_is_one_line():
  for dataset, message in [
      ('ptb', "unknown --dataset='ptb': give brown, text:DIR"),
      ('text:', 'needs what follows the colon: text:DIR'),
      ('brown:x', 'takes nothing after it'),
      ('tests.no_such_module:Source', 'cannot import tests.no_such_module'),
      ('tests.test_data_sources:Nothing', "has no 'Nothing'"),
      ('tests.test_data_sources:SENTENCE_END', 'is not a source')]:
    with pytest.raises(ConfigError, match=message):
      validated(Config(workdir='w', dataset=dataset).resolved())
