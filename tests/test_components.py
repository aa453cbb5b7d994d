"""Models and heads chosen by registry name or by import path, and the knobs each reads: a
knob set away from its default that neither the chosen model nor the chosen head reads is
refused in one line naming those that read it, as is a source's knob under another
--dataset; `import nplm.config` loads no Flax or TFDS."""

import subprocess
import sys
from pathlib import Path

import pytest

from nplm import heads, models
from nplm.config import Config, ConfigError, component_knobs
from nplm.data.sources import SOURCES, source_class
from nplm.models.nnlm import NNLM
from nplm.training.config_checks import validated

ROOT = Path(__file__).parent.parent

# What each reads, written from its from_config and its family's feed (not from `knobs`), in
# the registries' order.
RECURRENT = {'feature_size', 'hidden_size', 'num_layers', 'dropout', 'tie_embeddings',
             'bptt_length'}
WORD2VEC = {'feature_size', 'window', 'subsample', 'chunk_positions'}
MODEL_READS = {
    'nnlm': {'order', 'feature_size', 'hidden_size', 'direct', 'dropout', 'tie_embeddings'},
    'rnn': RECURRENT, 'lstm': RECURRENT, 'gru': RECURRENT,
    'transformer': {'order', 'feature_size', 'hidden_size', 'num_layers', 'num_heads',
                    'positions', 'dropout', 'tie_embeddings'},
    'cbow': WORD2VEC, 'skipgram': WORD2VEC,
}
SAMPLING = {'num_samples', 'proposal_power'}
HEAD_READS = {
    'softmax': set(), 'class': {'num_classes'}, 'tree': {'tree'}, 'is': SAMPLING,
    'nce': SAMPLING | {'noise_per_example'},
    'negative_sampling': SAMPLING | {'noise_per_example'},
    'adaptive': {'adaptive_cutoffs'},
}
# A sound value away from each knob's default.
OTHER_VALUES = {
    'order': 3, 'feature_size': 16, 'hidden_size': 20, 'direct': True, 'num_layers': 2,
    'num_heads': 2, 'positions': 'learned', 'dropout': 0.1, 'tie_embeddings': True,
    'window': 3, 'subsample': 1e-3, 'num_classes': 4, 'tree': 'balanced', 'num_samples': 5,
    'noise_per_example': True, 'proposal_power': 0.75, 'adaptive_cutoffs': '10,20',
    'bptt_length': 10, 'chunk_positions': 64,
}
# word2vec's models train by word2vec's own update: its outputs and SGD (test_word2vec.py
# checks the refusals of anything else).
WORD2VEC_TRAINS = {'heads': ('tree', 'negative_sampling'), 'optimizer': 'sgd'}


class WiderNNLM(NNLM):
  """A model of the user's own, named by its import path."""


def test_the_registries_name_what_the_lists_here_say():
  assert list(models.MODELS) == list(MODEL_READS)
  assert list(heads.HEADS) == list(HEAD_READS)
  assert set(component_knobs()) == set(OTHER_VALUES)
  for name, reads in MODEL_READS.items():
    assert set(models.model_class(name).knobs) == reads, name
  for name, reads in HEAD_READS.items():
    assert set(heads.head_class(name).knobs) == reads, name


def expected_refusal(knob: str, model: str, head: str) -> str:
  readers = [name for name, reads in MODEL_READS.items() if knob in reads]
  if readers:
    return f'--{knob} is read by --model={", ".join(readers)}, not --model={model}: leave it out'
  readers = [name for name, reads in HEAD_READS.items() if knob in reads]
  return f'--{knob} is read by --head={", ".join(readers)}, not --head={head}: leave it out'


@pytest.mark.parametrize('knob', sorted(OTHER_VALUES))
def test_a_knob_away_from_its_default_is_refused_unless_the_model_or_head_reads_it(knob):
  default = Config.__dataclass_fields__[knob].default
  for model in MODEL_READS:
    word2vec = MODEL_READS[model] is WORD2VEC
    for head in WORD2VEC_TRAINS['heads'] if word2vec else HEAD_READS:
      trained = {'optimizer': WORD2VEC_TRAINS['optimizer']} if word2vec else {}
      validated(Config(workdir='unused', model=model, head=head, **trained, **{knob: default}))
      config = Config(workdir='unused', model=model, head=head, **trained,
                      **{knob: OTHER_VALUES[knob]})
      if knob in MODEL_READS[model] | HEAD_READS[head]:
        validated(config)
      else:
        with pytest.raises(ConfigError) as refused:
          validated(config)
        assert str(refused.value) == expected_refusal(knob, model, head)


# Each source's own knobs, written from what its reading of the corpus reads (brown_source,
# text_sources, tfds_source), with a sound value away from the default and an argument.
SOURCE_READS = {'brown': {'corpus_dir', 'train_tokens', 'valid_tokens'},
                'text': {'train_tokens', 'valid_tokens', 'split_fractions'},
                'tfds': {'tfds_splits'}}
SOURCE_VALUES = {'corpus_dir': 'my_brown', 'split_fractions': '0.6,0.2,0.2',
                 'tfds_splits': 'train[:90%],train[90%:],test'}
DATASETS = {'brown': 'brown', 'text': 'text:my_corpus', 'tfds': 'tfds:ptb_text_only'}


@pytest.mark.parametrize('knob', sorted(SOURCE_VALUES))
def test_a_sources_knob_under_another_dataset_is_refused_naming_its_readers(knob):
  assert {kind: set(source_class(kind).knobs) for kind in SOURCES} == SOURCE_READS
  for kind, dataset in DATASETS.items():
    config = Config(workdir='unused', dataset=dataset, **{knob: SOURCE_VALUES[knob]})
    if knob in SOURCE_READS[kind]:
      validated(config.resolved())
      continue
    readers = ', '.join(name for name, reads in SOURCE_READS.items() if knob in reads)
    with pytest.raises(ConfigError) as refused:
      validated(config.resolved())
    assert str(refused.value) == (f'--{knob} is read by --dataset={readers}, not '
                                  f'--dataset={dataset}: leave it out')


def test_the_help_texts_list_the_registries_names():
  for field, registry in (('model', models.MODELS), ('head', heads.HEADS)):
    help_text = Config.__dataclass_fields__[field].metadata['help']
    assert all(name in help_text for name in registry) and 'module.path:Name' in help_text


def test_importing_the_config_loads_neither_flax_nor_tfds():
  code = ('import sys, nplm.config; print(sorted(m for m in sys.modules '
          "if m.split('.')[0] in ('flax', 'tensorflow_datasets')))")
  result = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
  assert result.stdout.strip() == '[]'


def test_a_model_of_the_users_own_is_named_by_its_import_path():
  path = 'tests.test_components:WiderNNLM'
  config = validated(Config(workdir='unused', model=path, order=3))
  assert isinstance(models.build_model(config, vocab_size=10), WiderNNLM)
  with pytest.raises(ConfigError, match=f'--num_heads is read by --model=transformer, not '
                                        f'--model={path}: leave it out'):
    validated(config.replace(num_heads=2))


@pytest.mark.parametrize('changes, message', [
    ({'model': 'mamba'}, "unknown --model='mamba'; known: cbow, gru, lstm, nnlm, rnn, skipgram, "
     'transformer, or module.path:Name for your own'),
    ({'head': 'nce2'}, "unknown --head='nce2'; known: adaptive, class, is, nce, "
     'negative_sampling, softmax, tree, or module.path:Name for your own'),
    ({'model': 'no_such_package.models:Model'}, '--model=no_such_package.models:Model: cannot '
     "import no_such_package.models (No module named 'no_such_package')"),
    ({'head': 'nplm.heads.softmax:Nope'}, "--head=nplm.heads.softmax:Nope: nplm.heads.softmax "
     "has no 'Nope'"),
])
def test_unknown_names_and_bad_import_paths_are_one_line_errors(changes, message):
  with pytest.raises(ConfigError) as refused:
    validated(Config(workdir='unused', **changes))
  assert str(refused.value).startswith(message) and '\n' not in str(refused.value)
