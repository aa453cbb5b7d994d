"""The Table 1 runner on the tiny corpus: rows trained or fitted, mixed, compared with the
paper, written, and reused; per-token scoring of a trained workdir against numpy Eq. 1."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nplm.studies import table1
from nplm.cli import mix
from nplm import ngram
from nplm.run_files.saved_params import saved_params
from nplm.data.vocab import TEXT_END
from nplm.use.trained import NoTrainedModelError, load_trained
from tests import cli
from tests.conftest import TINY_SPLIT
from tests.test_model import numpy_eq1

TINY = dict(epochs=1, batch_size=64, eval_batch_size=64, unk_max_count=1,
            **TINY_SPLIT)
ROWS = ['MLP2', 'MLP3', 'DelInt3', 'KN3']
KENLM_RESULTS = Path(__file__).parent.parent / 'experiments/results/kenlm/kenlm_check.json'


@pytest.fixture(scope='module')
def table_run(tiny_corpus, tmp_path_factory):
  workdir = tmp_path_factory.mktemp('table1')
  return workdir, table1.build_table(workdir, tiny_corpus, ROWS, TINY)


def numpy_token_log_probs(workdir, ids):
  """log p of every token from the checkpoint's parameters, Eq. 1 written out in numpy."""
  trained = load_trained(workdir)
  config, vocab = trained.config, trained.vocab
  params = saved_params(workdir)
  assert params is not None
  boundary = int(vocab.encode([TEXT_END])[0])
  stream = [boundary] * (config.order - 1) + [int(i) for i in ids]
  contexts = np.array([[stream[t + config.order - 2 - j] for j in range(config.order - 1)]
                       for t in range(len(ids))])
  log_p = numpy_eq1(params, contexts, config.hidden_size, config.direct)
  return log_p[np.arange(len(ids)), ids]


@pytest.mark.slow
def test_rows_are_the_requested_ones_beside_the_paper(table_run):
  workdir, report = table_run
  assert list(report['rows']) == ['MLP2', 'MLP3', 'DelInt3', 'KN3']
  paper = report['rows']['MLP2']['paper']
  assert (paper['valid'], paper['test']) == (275, 257)
  assert paper['test_over_kn5'] == pytest.approx(257 / 321)
  assert report['rows']['DelInt3']['paper']['test'] == 336
  kn5 = report['kn5_test_ppl']
  for name, row in report['rows'].items():
    assert row['test_over_kn5'] == pytest.approx(row['test_ppl'] / kn5)
    assert math.isfinite(row['valid_ppl']) and math.isfinite(row['test_ppl'])
  markdown = (workdir / 'table1.md').read_text()
  for name in ROWS:
    assert f'| {name} |' in markdown
  assert (workdir / 'table1.json').exists()


@pytest.mark.slow
def test_ngram_rows_match_the_models(table_run, tiny_corpus):
  _, report = table_run
  splits, vocab = tiny_corpus.splits, tiny_corpus.vocab
  boundary = int(vocab.encode([TEXT_END])[0])
  model = ngram.KneserNey.fit(splits['train'], 3, vocab.size, boundary)
  for split in ('train', 'valid', 'test'):
    assert report['rows']['KN3'][f'{split}_ppl'] == pytest.approx(
        ngram.perplexity(model.log_prob_split(splits[split])))


@pytest.mark.slow
def test_network_row_is_its_run_and_scoring_matches_numpy(table_run, tiny_corpus):
  workdir, report = table_run
  trained = load_trained(workdir / 'MLP3')
  assert (trained.config.hidden_size, trained.config.feature_size) == (0, 60)
  test = tiny_corpus.splits['test']
  got = trained.split_log_probs(test, batch_size=7)  # A padded, masked last batch.
  np.testing.assert_allclose(got, numpy_token_log_probs(workdir / 'MLP3', test), rtol=1e-5)
  assert report['rows']['MLP3']['test_ppl'] == pytest.approx(math.exp(-np.mean(got)), rel=1e-5)


@pytest.mark.slow
def test_mixed_row_mixes_the_network_with_the_trigram(table_run, tiny_corpus):
  workdir, report = table_run
  splits, vocab = tiny_corpus.splits, tiny_corpus.vocab
  boundary = int(vocab.encode([TEXT_END])[0])
  trigram = ngram.InterpolatedTrigram.fit(splits['train'], splits['valid'], vocab.size, boundary)
  row = report['rows']['MLP2']
  for split in ('valid', 'test'):
    network = numpy_token_log_probs(workdir / 'MLP1', splits[split])
    fixed = np.log(0.5 * np.exp(network) + 0.5 * np.exp(trigram.log_prob_split(splits[split])))
    assert row[f'{split}_ppl'] == pytest.approx(math.exp(-np.mean(fixed)), rel=1e-5)
  network_valid = math.exp(-np.mean(numpy_token_log_probs(workdir / 'MLP1', splits['valid'])))
  trigram_valid = ngram.perplexity(trigram.log_prob_split(splits['valid']))
  for way in ('learned', 'binned'):  # Fitted on valid: never worse than either there.
    assert row['mixtures'][way]['valid'] <= min(network_valid, trigram_valid) * (1 + 1e-6)


@pytest.mark.slow
def test_rows_already_computed_are_reused(table_run, tiny_corpus, monkeypatch):
  workdir, report = table_run

  def refuse(*args, **kwargs):
    raise AssertionError('a finished row was computed again')
  monkeypatch.setattr(table1.trainer, 'run', refuse)
  monkeypatch.setattr(table1, 'load_trained', refuse)
  monkeypatch.setattr(ngram.KneserNey, 'fit', refuse)
  monkeypatch.setattr(ngram.InterpolatedTrigram, 'fit', refuse)
  again = table1.build_table(workdir, tiny_corpus, ROWS, TINY)
  assert again == report


def test_unknown_rows_and_untrained_workdirs_are_refused(tmp_path, tiny_corpus):
  with pytest.raises(ValueError, match='unknown rows'):
    table1.build_table(tmp_path, tiny_corpus, ['MLP11'])
  with pytest.raises(NoTrainedModelError, match='no training run'):
    load_trained(tmp_path)


def test_cli_reports_a_bad_row_in_one_line(tmp_path):
  """`nplm table1`, run outside the checkout: it needs no `experiments` package."""
  result = subprocess.run([sys.executable, '-m', 'nplm.cli', 'table1', '--rows=KN6',
                           f'--workdir={tmp_path}'], cwd=tmp_path, capture_output=True,
                          text=True)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      f"error: unknown rows ['KN6']; known: {', '.join(table1.ROW_ORDER)}"]


@pytest.mark.slow
def test_real_corpus_kneser_ney_rows_match_kenlm(real_data_dir, tmp_path):
  """The CLI on the real corpus; KN3-5 against KenLM lmplz's perplexities on the same tokens,
  recorded by experiments/kenlm_check.py in experiments/results/kenlm/."""
  result = cli.run('table1', '--rows=KN3,KN4,KN5', f'--data_dir={real_data_dir}',
                   f'--workdir={tmp_path}', timeout=900)
  assert result.returncode == 0, result.stderr
  report = json.loads((tmp_path / 'table1.json').read_text())
  kenlm = json.loads(KENLM_RESULTS.read_text())['results']
  assert report['vocab_size'] == 14_039
  for order in (3, 4, 5):
    for split in ('valid', 'test'):
      assert report['rows'][f'KN{order}'][f'{split}_ppl'] == pytest.approx(
          kenlm[f'KN{order}/{split}']['kenlm'], rel=1e-4)
  assert '| KN5 | 5 |' in result.stdout


@pytest.mark.slow
def test_mix_program_mixes_any_trained_network(table_run, tiny_corpus):
  workdir, report = table_run
  network = load_trained(workdir / 'MLP3')
  lines = mix.mix_report(network, tiny_corpus).splitlines()
  numbers = {line[:34].strip(): [float(x) for x in line[34:].split()] for line in lines[2:]}
  row = report['rows']['MLP3']
  assert numbers['network alone'] == pytest.approx([row['valid_ppl'], row['test_ppl']], abs=0.01)
  assert numbers['DelInt3 alone'] == pytest.approx(
      [report['rows']['DelInt3']['valid_ppl'], report['rows']['DelInt3']['test_ppl']], abs=0.01)
  learned = next(value for name, value in numbers.items() if name.startswith('mix, learned'))
  assert learned[0] <= min(numbers['network alone'][0], numbers['DelInt3 alone'][0]) + 0.01


@pytest.mark.slow
def test_regularized_rows_train_their_flagfile_beside_the_papers_unregularized(tmp_path,
                                                                              tiny_corpus):
  """MLP2R needs MLP1R (trained from mlp1_regularized.flags: dropout on), DelInt3 and KN5;
  the paper's columns beside them are its MLP1 and MLP2."""
  assert table1.needed_rows(['MLP2R']) == ['MLP1R', 'MLP2R', 'DelInt3', 'KN5']
  report = table1.build_table(tmp_path, tiny_corpus, ['MLP1R', 'MLP2R'], TINY)
  assert load_trained(tmp_path / 'MLP1R').config.dropout > 0
  rows = report['rows']
  assert (rows['MLP1R']['paper']['valid'], rows['MLP1R']['paper']['test']) == (284, 268)
  assert (rows['MLP2R']['paper']['valid'], rows['MLP2R']['paper']['test']) == (275, 257)
  assert rows['MLP2R']['mix'] and math.isfinite(rows['MLP2R']['test_ppl'])
