"""Config fields know their group: every list of fields that play a part is derived from the
groups (and equals the lists that were written by hand before), --help shows the groups in
order, a finished run is reused across observation-only changes, and every command's user
mistakes are one line with exit status 2."""

import dataclasses
import json
from pathlib import Path

import pytest

from nplm import config as config_lib
from nplm.config import GROUPS, Config
from nplm.run_files.summary import RunStatus, finished_summary
from nplm.training import optimizer
from tests import cli

ROOT = Path(__file__).parent.parent

# The lists as they were written by hand before the groups existed.
HAND_WRITTEN = {
    'DATA_FIELDS': ('dataset', 'tokens', 'data_dir', 'corpus_dir', 'unk_max_count',
                    'max_vocab_size', 'train_tokens', 'valid_tokens', 'split_fractions',
                    'tfds_splits',
                    'tokenizer', 'lowercase', 'subword_vocab_size'),  # Added with them.
    'RESUMABLE_FIELDS': ('data_dir', 'corpus_dir', 'epochs', 'patience', 'max_steps',
                         'eval_batch_size', 'log_every', 'checkpoint_every', 'workdir', 'mesh',
                         'distributed', 'coordinator_address', 'num_processes', 'process_id',
                         # Added with them (valid_tokens_per_eval, eval_every:
                         # Config.incompatibilities still refuses a change to them).
                         'valid_tokens_per_eval', 'eval_splits', 'eval_every',
                         'keep_checkpoints', 'stop_seconds',  # Added with them.
                         'checkpoint_minutes',  # Added with it.
                         'profile_steps',  # Added with it.
                         'updates_per_call'),  # Added with it.
    # What sweep.py and table1.py once kept by hand (table1's lacked the last five).
    'OBSERVING_FIELDS': ('data_dir', 'corpus_dir', 'workdir', 'eval_batch_size', 'log_every',
                         'checkpoint_every', 'mesh', 'distributed', 'coordinator_address',
                         'num_processes', 'process_id',
                         'eval_splits',  # Added with it (finished_summary checks the splits).
                         'keep_checkpoints', 'stop_seconds',  # Added with them.
                         'checkpoint_minutes',  # Added with it.
                         'profile_steps',  # Added with it.
                         'updates_per_call'),  # Added with it.
    'PER_MODEL_FIELDS': ('seed', 'learning_rate', 'min_learning_rate', 'lr_decay', 'weight_decay', 'workdir'),
    'HYPERPARAMETERS': ('learning_rate', 'min_learning_rate', 'lr_decay', 'weight_decay'),
    # What `nplm evaluate --dataset=NAME` takes from its flags over a trained run's config
    # (nplm/cli/evaluate.py, which listed them by hand before the groups existed).
    'LOCATION_AND_SPLIT_FIELDS': ('data_dir', 'corpus_dir', 'train_tokens', 'valid_tokens',
                                  'split_fractions', 'tfds_splits'),
}


@pytest.mark.parametrize('name', sorted(HAND_WRITTEN))
def test_the_derived_field_lists_equal_the_hand_written_ones(name):
  owner = optimizer if name == 'HYPERPARAMETERS' else config_lib  # The step's own list.
  assert sorted(getattr(owner, name)) == sorted(HAND_WRITTEN[name])


def test_every_field_has_a_known_group_and_help():
  for field in dataclasses.fields(Config):
    assert field.metadata['group'] in GROUPS, field.name
    assert field.metadata['help'], field.name


def write_finished_run(workdir: Path, config: Config, status: str) -> None:
  workdir.mkdir(parents=True)
  (workdir / 'summary.json').write_text(json.dumps({'status': status, 'test_ppl': 123.0,
                                                    'config': config.to_dict()}))


def test_a_finished_run_is_reused_across_observation_and_device_changes_only(tmp_path):
  trained = Config(workdir=str(tmp_path / 'run'), epochs=3)
  write_finished_run(tmp_path / 'run', trained, 'early_stopped')
  # The fields table1's own list lacked: a run trained on another mesh is the same run.
  for change in ({'mesh': 'data:1'}, {'num_processes': 2, 'coordinator_address': 'h:1'},
                 {'log_every': 7}, {'eval_batch_size': 64}, {'data_dir': '/elsewhere'}):
    assert finished_summary(trained.replace(**change))['test_ppl'] == 123.0, change
  for change in ({'learning_rate': 0.5}, {'epochs': 4}, {'hidden_size': 7}, {'seed': 1}):
    assert finished_summary(trained.replace(**change)) is None, change


def test_an_unfinished_run_is_not_reused(tmp_path):
  config = Config(workdir=str(tmp_path / 'run'))
  write_finished_run(tmp_path / 'run', config, 'interrupted')
  assert finished_summary(config) is None
  assert [status.finished for status in RunStatus] == [True, True, True, False, False]


def test_help_shows_the_groups_in_their_order():
  result = cli.run('train', '--help', timeout=120)
  assert result.returncode == 0, result.stderr
  headings = [line.split(':')[0].lower() for line in result.stdout.splitlines()
              if line and not line.startswith(' ') and ':' in line
              and line.split(':')[0].lower() in GROUPS]
  assert headings == list(GROUPS), result.stdout
  assert result.stdout.index('--dataset') < result.stdout.index('--model') < result.stdout.index(
      '--head') < result.stdout.index('--seed (default')


# One mistake per command (its cheapest: refused before any data is read), each run in a
# process of its own, all at once.
MISTAKES = {
    'train': ['nplm.cli', 'train', '--order=1'],
    'train, a model path': ['nplm.cli', 'train', '--model=no_such_package.models:Model'],
    'evaluate': ['nplm.cli', 'evaluate', '--workdir=/nonexistent/run'],
    'ngram': ['nplm.cli', 'ngram', '--out=/tmp/unused', '--model=nope'],
    'score': ['nplm.cli', 'score', '--workdir=/nonexistent/run', 'a sentence'],
    'generate': ['nplm.cli', 'generate', '--workdir=/nonexistent/run'],
    'neighbours': ['nplm.cli', 'neighbours', '--workdir=/nonexistent/run', '--words=dog'],
    'mix': ['nplm.cli', 'mix', '--workdir=/nonexistent/run'],
    'export': ['nplm.cli', 'export', '--out=/tmp/unused', '--tokens=bytes'],
    'embeddings': ['nplm.cli', 'embeddings', '--workdir=/nonexistent/run', '--out=/tmp/unused'],
    'unknown flag': ['nplm.cli', 'train', '--no_such_flag=1'],
    'sweep': ['nplm.cli', 'sweep', '--sweep=nope'],
    'table1': ['nplm.cli', 'table1', '--rows=MLP99'],
}


@pytest.mark.slow
def test_every_commands_user_errors_are_one_line_with_status_2():
  running = {name: cli.start(*command[1:], module=command[0])
             for name, command in MISTAKES.items()}
  for name, process in running.items():
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 2, (name, stderr)
    lines = stderr.strip().splitlines()
    assert lines[-1].startswith('error: ') and 'Traceback' not in stderr, (name, stderr)
    assert sum(line.startswith('error: ') for line in lines) == 1, (name, stderr)


def test_a_knob_declared_by_two_kinds_of_component_is_refused(monkeypatch):
  """A model that declared the optimizer's --learning_rate would silently replace its meaning
  and default: refused when Config is assembled."""
  from nplm import models
  from nplm.knobs import Knob
  nnlm = models.model_class('nnlm')
  monkeypatch.setattr(nnlm, 'knobs', {**nnlm.knobs, 'learning_rate': Knob(1e-3, 'Mine.')})
  with pytest.raises(ValueError, match='--learning_rate is declared by two kinds'):
    config_lib._assembled.__wrapped__()  # pylint: disable=protected-access
