"""`nplm compare`: each row's numbers are its run's summary.json (ngram.json) values, runs of
one vocabulary ranked by valid perplexity, runs of several left unranked under a warning, one
curve per run in the figure, and the program from another directory with relative paths."""

import contextlib
import json
import re
import shutil
from pathlib import Path

import pytest

from nplm import trainer
from nplm.config import Config
from nplm.errors import ConfigError
from nplm.run_files.summary import write_summary
from nplm.studies import comparison
from tests.conftest import write_text_corpus
from tests import cli

TINY = dict(dataset='text:data/toy', data_dir='tfds', order=3, feature_size=8, hidden_size=8,
            batch_size=8, eval_batch_size=64, log_every=1000)


@pytest.fixture(scope='module')
def base(tmp_path_factory):
  """runs/a, runs/b (one vocabulary), runs/c (another: words seen twice are <unk>), runs/kn3
  (an n-gram directory on a's data) and runs/cut (a run without its summary), trained from
  one directory with relative paths."""
  base = tmp_path_factory.mktemp('compare')
  write_text_corpus(base / 'data' / 'toy')
  with contextlib.chdir(base):
    trainer.run(Config(workdir='runs/a', epochs=2, **TINY).resolved())
    trainer.run(Config(workdir='runs/b', epochs=3, learning_rate=0.02, **TINY).resolved())
    trainer.run(Config(workdir='runs/c', epochs=2, unk_max_count=2, **TINY).resolved())
  fitted = cli.run('ngram', '--dataset=text:data/toy', '--data_dir=tfds', '--order=3',
                   '--out=runs/kn3', cwd=base)
  assert fitted.returncode == 0, fitted.stderr
  (base / 'runs' / 'cut').mkdir()
  for name in ('run.json', 'vocab.txt', 'metrics.jsonl'):
    shutil.copy(base / 'runs' / 'a' / name, base / 'runs' / 'cut' / name)
  return base


def summary(base: Path, run: str) -> dict:
  name = 'ngram.json' if run == 'kn3' else 'summary.json'
  return json.loads((base / 'runs' / run / name).read_text())


def rows_of(base: Path, *runs: str) -> list[dict]:
  with contextlib.chdir(base):
    return comparison.read_runs([f'runs/{run}' for run in runs])


@pytest.mark.slow
def test_rows_hold_each_runs_recorded_numbers_ranked_by_valid_perplexity(base):
  rows = rows_of(base, 'b', 'kn3', 'a')
  for row, run in zip(rows, ('b', 'kn3', 'a')):
    recorded = summary(base, run)
    assert row['workdir'] == f'runs/{run}'
    assert row['vocab_size'] == recorded['vocab_size']
    assert row['ppl'] == {split: recorded[f'{split}_ppl'] for split in ('train', 'valid', 'test')}
    assert row['wall_seconds'] == recorded['wall_seconds']
    if run != 'kn3':
      assert row['parameters'] == recorded['parameters']
      assert row['examples_per_second'] == recorded['train_examples_per_second']
      assert row['head'] == recorded['config']['head'] == 'softmax'
  assert rows[1]['model'] == 'KN3' and rows[0]['model'] == 'nnlm'
  report = comparison.report(rows)
  assert report['warning'] is None and not report['vocabularies_differ']
  by_valid = sorted(('b', 'kn3', 'a'), key=lambda run: summary(base, run)['valid_ppl'])
  assert [row['workdir'] for row in report['runs']] == [f'runs/{run}' for run in by_valid]

  with contextlib.chdir(base):  # Data paths are shown relative to the current directory.
    lines = comparison.table(report['runs'])
  assert lines[0].split()[:3] == ['workdir', 'dataset', '|V|'] and 'vocab' not in lines[0]
  for line, run in zip(lines[2:], by_valid):
    recorded = summary(base, run)
    cells = line.split()
    assert cells[0] == f'runs/{run}' and cells[1] == 'text:data/toy'
    assert f'{recorded["valid_ppl"]:,.2f}' in cells and f'{recorded["test_ppl"]:,.2f}' in cells
    assert f'{recorded["vocab_size"]:,}' in cells


@pytest.mark.slow
def test_runs_on_different_vocabularies_carry_a_warning_and_keep_their_order(base):
  rows = rows_of(base, 'c', 'a', 'kn3', 'b')
  a, c = (set(Path(base / 'runs' / run / 'vocab.txt').read_text().splitlines())
          for run in ('a', 'c'))
  assert a != c  # The premise: c dropped the words seen once.
  report = comparison.report(rows)
  assert report['vocabularies_differ']
  assert [row['workdir'] for row in report['runs']] == ['runs/c', 'runs/a', 'runs/kn3',
                                                        'runs/b']
  sizes = [summary(base, run)['vocab_size'] for run in ('c', 'a')]
  assert report['warning'] == (
      'warning: 2 vocabularies, so these perplexities are not comparable across them '
      '(per-word perplexity is); rows not ranked. Vocabularies '
      f'A (|V| = {sizes[0]:,}): runs/c; B (|V| = {sizes[1]:,}): runs/a, runs/kn3, runs/b')
  lines = comparison.table(report['runs'])
  assert lines[0].split()[-1] == 'vocab'
  assert [line.split()[-1] for line in lines[2:]] == ['A', 'B', 'B', 'B']


@pytest.mark.slow
def test_a_vocabulary_is_recognized_by_its_data_fingerprint_where_none_is_recorded(base,
                                                                                   tmp_path):
  recorded = summary(base, 'kn3')
  del recorded['vocab_fingerprint']  # As ngram.json was before it recorded one.
  (tmp_path / 'old_kn3').mkdir()
  (tmp_path / 'old_kn3' / 'ngram.json').write_text(json.dumps(recorded))
  rows = comparison.read_runs([str(base / 'runs' / 'c'), str(tmp_path / 'old_kn3'),
                               str(base / 'runs' / 'a')])
  assert [row['vocabulary'] for row in rows] == ['A', 'B', 'B']


@pytest.mark.slow
def test_a_run_without_its_summary_is_a_row_marked_unfinished(base):
  rows = rows_of(base, 'a', 'cut')
  cut = rows[1]
  assert not cut['finished'] and cut['ppl']['valid'] is None
  assert cut['vocab_size'] == summary(base, 'a')['vocab_size'] and cut['model'] == 'nnlm'
  report = comparison.report(rows)
  assert [row['workdir'] for row in report['runs']] == ['runs/a', 'runs/cut']
  assert comparison.table(report['runs'])[-1].split()[6] == 'unfinished'
  vocab = base / 'runs' / 'cut' / 'vocab.txt'
  written = vocab.read_bytes()
  try:  # Cut short: its size unknown, the row still shown (nplm evaluate says why).
    vocab.write_bytes(written[:len(written) // 2])
    assert rows_of(base, 'cut')[0]['vocab_size'] is None
  finally:
    vocab.write_bytes(written)


@pytest.mark.slow
def test_the_figure_has_each_runs_validation_curve(base):
  rows = rows_of(base, 'a', 'b', 'kn3', 'c')
  (axes,) = comparison.figure(rows).axes
  lines = axes.get_lines()
  assert len(lines) == 4
  for line, run in zip(lines, ('a', 'b', 'kn3', 'c')):
    recorded = summary(base, run)
    assert line.get_label().startswith(f'runs/{run} (')
    if run == 'kn3':  # A count model: a level line at its valid perplexity.
      assert list(line.get_ydata()) == [recorded['valid_ppl']] * 2
    else:
      history = recorded['valid_ppl_history']
      assert list(line.get_xdata()) == list(range(1, len(history) + 1))
      assert list(line.get_ydata()) == pytest.approx(history)
  assert axes.get_xlabel() == 'epoch' and 'perplexity' in axes.get_ylabel()
  assert 'vocabularies differ' in axes.get_title()


@pytest.mark.slow
def test_per_word_perplexity_and_bits_per_character_get_columns_where_recorded(base, tmp_path):
  shutil.copytree(base / 'runs' / 'a', tmp_path / 'words')
  recorded = summary(base, 'a')
  recorded['word_ppl'] = {'train': 1.25, 'valid': 312.345, 'test': 298.7}
  recorded['bpc'] = {'train': 1.0, 'valid': 2.34567, 'test': 2.5}
  recorded.pop('checksum')
  write_summary(tmp_path / 'words', recorded)  # As a run that recorded them writes it.
  rows = comparison.read_runs([str(tmp_path / 'words'), str(base / 'runs' / 'b')])
  header, _, *lines = comparison.table(comparison.report(rows)['runs'])
  (words,) = [line for line in lines if line.startswith(str(tmp_path / 'words'))]
  (plain,) = [line for line in lines if line != words]
  assert 'valid word ppl' in header and 'test word ppl' in header and 'valid bpc' in header
  assert ['312.35', '298.70', '2.3457', '2.5000'] == [
      cell for cell in words.split() if cell in ('312.35', '298.70', '2.3457', '2.5000')]
  assert plain.split().count('-') == 4  # b records neither.
  assert comparison.table(comparison.read_runs([str(base / 'runs' / 'b')]))[0].split()[-2:] \
      == ['wall', 'examples/s']


@pytest.mark.slow
def test_nothing_to_read_is_one_error(base, tmp_path):
  with pytest.raises(ConfigError, match='no such directory'):
    rows_of(base, 'a', 'gone')
  with pytest.raises(ConfigError, match='holds no run'):
    comparison.read_runs([str(tmp_path)])
  with pytest.raises(ConfigError, match='name the runs'):
    comparison.read_runs([])


def nplm(*args: str, cwd: Path) -> tuple[int, str, str]:
  child = cli.run('compare', *args, cwd=cwd)
  return child.returncode, child.stdout, child.stderr


@pytest.mark.slow
def test_the_program_from_another_directory_with_relative_paths(base):
  elsewhere = base / 'elsewhere'
  elsewhere.mkdir()
  code, stdout, stderr = nplm('../runs/a', '../runs/c', cwd=elsewhere)
  assert code == 0, stderr
  lines = stdout.splitlines()
  assert lines[0].startswith('warning: 2 vocabularies') and '../runs/a' in lines[0]
  assert lines[3].startswith('../runs/a ') and lines[4].startswith('../runs/c ')
  assert f'{summary(base, "c")["test_ppl"]:,.2f}' in lines[4].split()
  assert lines[-1] == 'plot: compare.png'
  assert (elsewhere / 'compare.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'

  code, stdout, stderr = nplm('../runs/b', '../runs/a', '--json', '--out=curves.png',
                              cwd=elsewhere)
  assert code == 0, stderr
  report = json.loads(stdout)
  assert report['warning'] is None and report['plot'] == str(elsewhere / 'curves.png')
  assert [row['ppl']['test'] for row in report['runs']] == [
      summary(base, run)['test_ppl'] for run in sorted(
          'ab', key=lambda run: summary(base, run)['valid_ppl'])]
  assert (elsewhere / 'curves.png').exists()

  for args, phrase in ((['../runs/a', '../runs/gone'], '../runs/gone: no such directory'),
                       (['../runs/a', '--out=no/such/dir/x.png'], 'no directory no/such/dir')):
    code, stdout, stderr = nplm(*args, cwd=elsewhere)
    assert code == 2 and stdout == '' and stderr.startswith('error: '), stderr
    assert phrase in stderr and len(stderr.strip().splitlines()) == 1, stderr


def test_the_program_names_a_run_that_is_not_there_in_one_line(tmp_path):
  """The program's refusal, without a trained run (the fast tier's test of `nplm compare`)."""
  (tmp_path / 'runs').mkdir()
  for args, phrase in ((['runs/gone'], 'runs/gone: no such directory'),
                       (['runs'], 'holds no run'), ([], 'name the runs')):
    code, stdout, stderr = nplm(*args, cwd=tmp_path)
    assert code == 2 and stdout == '' and stderr.startswith('error: '), stderr
    assert phrase in stderr and len(stderr.strip().splitlines()) == 1, stderr


@pytest.fixture(scope='module')
def stopped(base):
  """runs/stopped: a's settings stopped by --max_steps=3, before its first validation;
  runs/chars: a character model of a's text."""
  with contextlib.chdir(base):
    trainer.run(Config(workdir='runs/stopped', epochs=2, max_steps=3, **TINY).resolved())
    trainer.run(Config(workdir='runs/chars', epochs=1, tokens='chars', **TINY).resolved())
  return base


@pytest.mark.slow
def test_a_run_stopped_before_its_first_validation_is_a_marked_row_and_a_star(stopped):
  rows = rows_of(stopped, 'a', 'stopped', 'kn3')
  recorded = summary(stopped, 'stopped')
  assert recorded['status'] == 'max_steps' and recorded['valid_ppl_history'] == []
  row = rows[1]
  assert row['ppl'] == {split: recorded[f'{split}_ppl'] for split in ('train', 'valid', 'test')}
  assert row['status'] == 'max_steps' and not row['valid_curve']
  lines = comparison.table(comparison.report(rows)['runs'])
  assert lines[0].split()[-1] == 'ended'
  ended = {line.split()[0]: line.split('  ')[-1].strip() for line in lines[2:]}
  assert ended == {'runs/a': 'epochs', 'runs/stopped': '--max_steps at 3 (no validation)',
                   'runs/kn3': '-'}
  (axes,) = comparison.figure(rows).axes
  curves = {line.get_label(): line for line in axes.get_lines()}
  (label,) = [name for name in curves if name.startswith('runs/stopped')]
  assert '--max_steps at 3 (no validation)' in label  # A point, not an n-gram's level line.
  assert list(curves[label].get_xdata()) == [0] and \
      list(curves[label].get_ydata()) == [recorded['valid_ppl']]
  stars = sorted(tuple(point) for collection in axes.collections
                 for point in collection.get_offsets())
  a = summary(stopped, 'a')
  assert stars == sorted([(a['best_epoch'], a['valid_ppl']), (0, recorded['valid_ppl'])])


@pytest.mark.slow
def test_a_character_runs_final_perplexity_and_bits_are_in_the_table_and_figure(stopped):
  rows = rows_of(stopped, 'chars', 'a')
  recorded = summary(stopped, 'chars')
  header, _, chars, _ = comparison.table(comparison.report(rows)['runs'])
  columns = dict(zip(re.split(r'\s{2,}', header), re.split(r'\s{2,}', chars)))
  assert columns['valid ppl'] == f'{recorded["valid_ppl"]:,.2f}'
  assert columns['test ppl'] == f'{recorded["test_ppl"]:,.2f}'
  assert columns['valid bpc'] == f'{recorded["bpc"]["valid"]:.4f}'
  assert columns['test bpc'] == f'{recorded["bpc"]["test"]:.4f}'
  (axes,) = comparison.figure(rows).axes
  stars = [tuple(point) for collection in axes.collections for point in collection.get_offsets()]
  assert (recorded['best_epoch'], recorded['valid_ppl']) in stars
