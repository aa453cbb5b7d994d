"""The programs on a text corpus and a TFDS dataset: train, ngram, evaluate, score, generate,
export; tokenization of typed text; the package installed and imported from elsewhere."""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import types as types_lib
from pathlib import Path

import numpy as np
import pytest

from nplm.cli import ngram as ngram_program
from nplm.config import Config
from nplm.data import datasets, tokenizers
from nplm.data.brown_source import brown_words
from nplm.data.typed_text import file_tokens, words_of
from nplm.data.vocab import END_OF_SENTENCE, PARAGRAPH_END, TEXT_END, UNK, Vocabulary
from nplm.use.evaluation import file_types
from nplm.use.trained import load_trained
from nplm.use.sentences import score_sentences
from nplm.studies.sweep import grid, run_sweep
from tests.test_datasets import NplmTestLines, expected_tokens, write_dir
from tests.test_rnn import numpy_split_log_probs
from tests import cli

ROOT = Path(__file__).parent.parent
TINY_NET = ('--order=3', '--feature_size=8', '--hidden_size=8', '--batch_size=8',
            '--eval_batch_size=16', '--epochs=2', '--log_every=100')


def program(name: str, *flags: str, timeout: int = 300) -> subprocess.CompletedProcess:
  result = cli.run(*flags, module=f'experiments.{name}', timeout=timeout)
  assert result.returncode == 0, result.stderr
  assert 'Traceback' not in result.stderr
  return result


@pytest.fixture(scope='module')
def text_run(tmp_path_factory):
  """A word-level LSTM trained on a text:DIR corpus by the command line."""
  root = tmp_path_factory.mktemp('text_run')
  corpus_dir = write_dir(root / 'ptb')
  workdir = root / 'run'
  program('train', f'--dataset=text:{corpus_dir}', f'--data_dir={root / "tfds"}',
          f'--workdir={workdir}', '--model=lstm', '--hidden_size=8', '--feature_size=8',
          '--batch_size=2', '--bptt_length=4', '--eval_batch_size=8', '--epochs=2')
  return root, corpus_dir, workdir


@pytest.mark.slow
def test_training_on_text_reports_eos_counted_tokens(text_run):
  root, corpus_dir, workdir = text_run
  summary = json.loads((workdir / 'summary.json').read_text())
  for split in ('train', 'valid', 'test'):
    text = (corpus_dir / f'{split}.txt').read_text()
    assert summary['tokens'][split] == len(expected_tokens(text))
  assert summary['dataset'] == f'text:{corpus_dir}'
  assert json.loads((workdir / 'run.json').read_text())['config']['unk_max_count'] == -1
  # The text has its own <unk> (as PTB): every training type kept, as published counts do.
  assert Vocabulary.load(workdir / 'vocab.txt').unk_max_count == 0


def test_evaluate_names_a_workdir_that_is_not_there_in_one_line(tmp_path):
  """The program's refusal, without a trained run (the fast tier's test of `nplm evaluate`)."""
  done = cli.run('evaluate', '--workdir=runs/none', cwd=tmp_path)
  assert done.returncode == 2, done.stderr
  assert done.stderr.splitlines() == [
      'error: runs/none: no such directory (give the --workdir of a run)']


@pytest.mark.slow
def test_evaluate_on_its_own_dataset_gives_trainings_exact_numbers(text_run):
  root, _, workdir = text_run
  summary = json.loads((workdir / 'summary.json').read_text())
  result = program('evaluate', f'--workdir={workdir}', f'--data_dir={root / "tfds"}', '--json')
  results = json.loads(result.stdout)
  for split in ('valid', 'test'):
    assert results[split]['ppl'] == pytest.approx(summary[f'{split}_ppl'], rel=1e-6)
    assert results[split]['tokens'] == summary['tokens'][split]


@pytest.mark.slow
def test_evaluate_a_text_file_against_a_numpy_recurrence(text_run, tmp_path):
  _, _, workdir = text_run
  path = tmp_path / 'new.txt'
  path.write_text('the cat sat on a zebra\nthe zebra ran\n')
  result = program('evaluate', f'--workdir={workdir}', f'--text_file={path}', '--json')
  got = json.loads(result.stdout)['file']
  trained = load_trained(workdir)
  tokens = expected_tokens(path.read_text())  # The words and an <eos> per line.
  ids = trained.vocab.encode(tokens)
  want = numpy_split_log_probs(trained.lm, trained.params, ids,
                               trained.vocab.id_of(END_OF_SENTENCE))
  assert got['tokens'] == len(tokens) == 11
  assert got['ppl'] == pytest.approx(math.exp(-np.mean(want)), rel=1e-4)
  assert got['unknown_words'] == [['zebra', 2]]
  assert got['unk_rate'] == pytest.approx(2 / 11)


@pytest.mark.slow
def test_evaluate_on_another_dataset_maps_through_the_models_vocabulary(text_run, tmp_path):
  root, _, workdir = text_run
  other = write_dir(tmp_path / 'other', {'train': 'x\n', 'valid': 'the cat\n',
                                         'test': 'the gnu gnu\n'})
  result = program('evaluate', f'--workdir={workdir}', f'--dataset=text:{other}',
                   f'--data_dir={root / "tfds"}', '--splits=test')
  assert 'read as <unk>: gnu (2)' in result.stdout
  assert 'tokens         4' in result.stdout and '<unk> rate 50.00%' in result.stdout


@pytest.mark.slow
def test_score_tokenizes_as_the_dataset_and_generate_continues_a_prompt(text_run):
  _, _, workdir = text_run
  trained = load_trained(workdir)
  (score,) = score_sentences(trained, ['the cat sat.'])
  assert [t.word for t in score.tokens] == ['the', 'cat', 'sat.', '<eos>']  # Whitespace; <eos> scored.
  assert score.tokens[2].token == UNK
  result = program('generate', f'--workdir={workdir}', '--prompt=the zebra', '--length=5')
  assert result.stdout.startswith('the zebra')
  assert "'the zebra': read as <unk> (not in the vocabulary): zebra" in result.stderr


@pytest.mark.slow
def test_mix_and_neighbours_read_a_text_run(text_run):
  root, _, workdir = text_run
  mixed = program('mix', f'--workdir={workdir}', f'--data_dir={root / "tfds"}')
  summary = json.loads((workdir / 'summary.json').read_text())
  network_row = next(line for line in mixed.stdout.splitlines() if 'network alone' in line)
  for split in ('valid', 'test'):
    assert f'{summary[f"{split}_ppl"]:.2f}' in network_row
  near = program('neighbours', f'--workdir={workdir}', '--words=the,cat', '--k=3')
  assert near.stdout.splitlines()[1].split()[1] == 'the'  # A word is nearest itself.


@pytest.mark.slow
def test_models_trained_together_on_a_text_dataset(tmp_path):
  corpus_dir = write_dir(tmp_path / 'ptb')
  base = Config(workdir='unused', dataset=f'text:{corpus_dir}', data_dir=str(tmp_path / 'tfds'),
                order=3, feature_size=8, hidden_size=8, batch_size=8, eval_batch_size=16,
                epochs=1, data_seed=0)
  rows = run_sweep(base, grid(learning_rate=[1e-3, 1e-2]), tmp_path / 'sweep', together=True)
  for row in rows:
    summary = json.loads((Path(row['workdir']) / 'summary.json').read_text())
    assert summary['dataset'] == f'text:{corpus_dir}' and summary['trained_together'] == 2
    assert summary['tokens']['test'] == len(expected_tokens((corpus_dir / 'test.txt').read_text()))


@pytest.mark.slow
def test_ngram_command_counts_the_tokens_and_matches_the_library(tmp_path):
  corpus_dir = write_dir(tmp_path / 'ptb')
  out = tmp_path / 'kn'
  program('ngram', f'--dataset=text:{corpus_dir}', '--order=2', f'--out={out}',
          f'--data_dir={tmp_path / "tfds"}')
  result = json.loads((out / 'ngram.json').read_text())
  train = expected_tokens((corpus_dir / 'train.txt').read_text())
  test = expected_tokens((corpus_dir / 'test.txt').read_text())
  assert result['vocab_size'] == len(set(train) | {UNK})
  assert result['tokens']['test'] == len(test)
  assert result['unk_rate']['test'] == pytest.approx(
      sum(t not in train for t in test) / len(test))
  config = Config(workdir='w', dataset=f'text:{corpus_dir}',
                  data_dir=str(tmp_path / 'tfds')).resolved()
  corpus = datasets.load_dataset(config)
  model = ngram_program.fit(corpus, 'kn', 2)
  assert result['test_ppl'] == pytest.approx(
      math.exp(-np.mean(model.log_prob_split(corpus.splits['test']))), rel=1e-12)
  delint = program('ngram', f'--dataset=text:{corpus_dir}', '--order=3', '--model=delint',
                   f'--out={out}', f'--data_dir={tmp_path / "tfds"}')
  assert 'DelInt3' in delint.stdout


@pytest.mark.slow
def test_a_tfds_dataset_trains_from_the_command_line_and_exports(tmp_path, monkeypatch):
  data_dir = tmp_path / 'tfds'
  # TFDS leaves an empty directory in the system's temporary directory for each builder of a
  # dataset not yet prepared (a user's, as this one): the test's own instead.
  monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
  NplmTestLines(data_dir=str(data_dir), file_format='array_record').download_and_prepare()
  # The child process has no NplmTestLines class: TFDS reads the prepared files by name.
  workdir = tmp_path / 'run'
  result = program('train', '--dataset=tfds:nplm_test_lines:sentence', f'--data_dir={data_dir}',
                   f'--workdir={workdir}', '--tokens=chars', *TINY_NET)
  assert 'bits/char' in result.stdout
  summary = json.loads((workdir / 'summary.json').read_text())
  assert summary['bpc']['test'] == pytest.approx(math.log2(summary['test_ppl']))
  subprocess.run([sys.executable, '-m', 'nplm.cli.export', f'--out={tmp_path / "out"}',
                  '--dataset=tfds:nplm_test_lines:sentence', f'--data_dir={data_dir}'],
                 cwd=ROOT, check=True, capture_output=True)
  exported = (tmp_path / 'out' / 'valid.txt').read_text()
  assert exported == 'the cat ran\n\n'  # Every valid word was seen in training.


def test_brown_export_read_back_as_text_gives_the_same_words(tiny_corpus, tmp_path):
  from nplm.cli.export import export_splits
  export_splits(tiny_corpus, tmp_path / 'out', 'brown')
  corpus = datasets.load_dataset(Config(workdir='w', dataset=f'text:{tmp_path / "out"}',
                                        data_dir=str(tmp_path / 'tfds')).resolved())
  for split, ids in tiny_corpus.splits.items():
    read_back = [t for t in corpus.vocab.decode(corpus.splits[split]) if t != END_OF_SENTENCE]
    assert read_back == tiny_corpus.vocab.decode(ids)


# --- tokenizing typed text ----------------------------------------------------------------

def test_brown_text_is_tokenized_as_the_corpus():
  assert brown_words('The jury said.') == ['The', 'jury', 'said', '.']
  assert brown_words('Mr. Smith\'s "new" car, in the U.S.') == [
      'Mr.', "Smith's", '``', 'new', "''", 'car', ',', 'in', 'the', 'U.S.']
  # In capitals too (caps lock): an abbreviation ends no sentence; a word before a stop does.
  assert brown_words('MR. SMITH MET DR. JONES ON MAIN ST. mr. x') == [
      'MR.', 'SMITH', 'MET', 'DR.', 'JONES', 'ON', 'MAIN', 'ST.', 'mr', '.', 'x']
  assert words_of('a  b.', 'text:x', 'words') == ['a', 'b.']
  assert words_of('a b', 'text:x', 'chars') == ['a', ' ', 'b']
  assert words_of('said.', 'brown', 'chars') == list('said .')
  assert file_tokens(['a b.', ''], 'brown', 'words') == [
      'a', 'b', '.', PARAGRAPH_END, PARAGRAPH_END, TEXT_END]
  assert file_tokens(['a b.', ''], 'text:x', 'words') == ['a', 'b.', END_OF_SENTENCE,
                                                          END_OF_SENTENCE]


def test_file_types_index_every_token_once():
  config = Config(workdir='w', dataset='text:x')  # What file_types reads of a model:
  model = types_lib.SimpleNamespace(config=config, tokenizer=tokenizers.Tokenizer())
  types, splits = file_types(['b a b', 'c'], model)
  assert [types[i] for i in splits['file']] == ['b', 'a', 'b', END_OF_SENTENCE, 'c',
                                                END_OF_SENTENCE]


# --- the package ----------------------------------------------------------------------------

@pytest.mark.slow
def test_the_package_installs_and_imports_from_outside_the_checkout(tmp_path):
  # From a copy: setuptools builds in the source tree, and the checkout must stay clean.
  source = tmp_path / 'source'
  shutil.copytree(ROOT / 'nplm', source / 'nplm', ignore=shutil.ignore_patterns('__pycache__'))
  for name in ('pyproject.toml', 'README.md'):
    shutil.copy(ROOT / name, source / name)
  target = tmp_path / 'site'
  subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--no-deps',
                  f'--target={target}', str(source)], check=True, capture_output=True,
                 timeout=600)
  assert (target / 'bin' / 'nplm').exists()
  elsewhere = tmp_path / 'elsewhere'
  elsewhere.mkdir()
  env = {**os.environ, 'PYTHONPATH': str(target)}
  result = subprocess.run(
      [sys.executable, '-c', 'import nplm, nplm.cli.train; print(nplm.__file__)'],
      cwd=elsewhere, env=env, capture_output=True, text=True, check=True)
  assert result.stdout.strip() == str(target / 'nplm' / '__init__.py')
  usage = subprocess.run([sys.executable, str(target / 'bin' / 'nplm'), '--help'], cwd=elsewhere,
                         env=env, capture_output=True, text=True, check=True)
  assert 'evaluate' in usage.stdout and 'ngram' in usage.stdout


@pytest.mark.slow
def test_prepare_benchmark_times_a_generated_corpus_it_counts_right(tmp_path):
  result = program('benchmarks.prepare', f'--out={tmp_path}', '--tokens=20000', '--types=500',
                   '--repeats=1', f'--report={tmp_path / "report"}')
  report = json.loads((tmp_path / 'report.json').read_text())
  texts = {split: (tmp_path / 'corpus' / f'{split}.txt').read_text()
           for split in ('train', 'valid', 'test')}
  assert sum(len(text.split()) for text in texts.values()) == 20_000
  assert report['load']['tokens'] == {split: len(expected_tokens(text))
                                      for split, text in texts.items()}
  assert report['prepare']['types'] == len({w for t in texts.values() for w in t.split()} |
                                           {END_OF_SENTENCE})
  assert report['prepare']['peak'] >= report['prepare']['rss_before'] > 0
  assert 'prepare' in result.stdout and 'peak MiB' in result.stdout


@pytest.mark.slow
def test_dataset_mistakes_are_one_line_errors(tmp_path):
  corpus_dir = write_dir(tmp_path / 'ptb')
  for flags, phrase in [((f'--dataset=text:{tmp_path / "nowhere"}',), 'no such file or directory'),
                        ((f'--dataset=text:{corpus_dir}', '--max_vocab_size=1'), 'leaves no room'),
                        ((f'--dataset=text:{corpus_dir}', '--split_fractions=0.5,0.5,0.5'),
                         'summing to 1')]:
    result = cli.run('--order=2', f'--out={tmp_path / "out"}', f'--data_dir={tmp_path / "tfds"}',
                     *flags, module='experiments.ngram')
    assert result.returncode == 2 and 'Traceback' not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith('error: ') and phrase in (
        result.stderr), result.stderr


@pytest.mark.slow
def test_help_shows_each_programs_own_flags_and_usage():
  for name, flag in (('train', '--dataset'), ('evaluate', '--text_file'), ('ngram', '--order'),
                     ('score', '--json')):
    result = cli.run('--help', module=f'experiments.{name}')
    assert flag in result.stdout, (name, result.stdout[:500])  # absl's --help exits 1.
    assert f'nplm {name}' in result.stdout
