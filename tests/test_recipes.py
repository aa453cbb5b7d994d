"""The published recipes (nplm/recipes/zaremba_*.flags, pytorch_lstm*.flags) against their
sources: the settings the papers and the code print, the learning rate of every epoch by the
source's own rule, and a short real run of zaremba_small on the tiny corpus."""

import json
import math

import pytest

from nplm.flagfiles import config_from_flagfile
from nplm.training.schedules import learning_rate_at, plateau_decays
from tests import cli
from tests.conftest import write_text_corpus
from nplm.training.config_checks import validated


# Zaremba, Sutskever & Vinyals (2014), section 4.1: layers, units (embeddings alike), unrolled
# steps, batch, dropout, rate, epochs at it, the divisor after each later epoch, epochs, clip.
ZAREMBA = {
    'zaremba_small': dict(layers=2, units=200, steps=20, batch=20, dropout=0.0, rate=1.0,
                          kept=4, divisor=2.0, epochs=13, clip=5.0),
    'zaremba_medium': dict(layers=2, units=650, steps=35, batch=20, dropout=0.5, rate=1.0,
                           kept=6, divisor=1.2, epochs=39, clip=5.0),
    'zaremba_large': dict(layers=2, units=1500, steps=35, batch=20, dropout=0.65, rate=1.0,
                          kept=14, divisor=1.15, epochs=55, clip=10.0),
}
# PyTorch's examples, word_language_model/main.py's defaults (--tied for the second).
PYTORCH = dict(layers=2, units=200, steps=35, batch=20, dropout=0.2, rate=20.0, clip=0.25,
               epochs=40)


def zaremba_rates(paper: dict, kept: int | None = None) -> list[float]:
  """The rate of each epoch as the paper states it: `rate` for the first `kept` epochs, then
  divided by `divisor` after each epoch; times T, their loss being summed over the T steps
  where nplm's is the mean."""
  rates, rate = [], paper['rate']
  for epoch in range(1, paper['epochs'] + 1):
    if epoch > (kept or paper['kept']):
      rate /= paper['divisor']
    rates.append(rate * paper['steps'])
  return rates


@pytest.mark.parametrize('name', sorted(ZAREMBA))
def test_zaremba_recipes_hold_the_papers_settings(name):
  paper, config = ZAREMBA[name], config_from_flagfile(name)
  validated(config)
  assert (config.model, config.optimizer, config.tie_embeddings) == ('lstm', 'sgd', False)
  assert (config.num_layers, config.hidden_size, config.feature_size) == (
      paper['layers'], paper['units'], paper['units'])
  assert (config.bptt_length, config.batch_size, config.dropout, config.epochs) == (
      paper['steps'], paper['batch'], paper['dropout'], paper['epochs'])
  # Their clip bounds the norm of the gradient summed over T steps: c/T on the mean's.
  assert config.clip_norm == pytest.approx(paper['clip'] / paper['steps'], rel=1e-9)
  assert config.patience == 0  # The last parameters are reported.
  assert config.workdir == f'runs/{name}'


@pytest.mark.parametrize('name', sorted(ZAREMBA))
def test_zaremba_recipes_decay_as_the_paper_each_epoch(name):
  paper, config = ZAREMBA[name], config_from_flagfile(name)
  steps_per_epoch = 7  # The rate is computed in float32: up to 41 powers of the factor.
  for epoch, rate in enumerate(zaremba_rates(paper)):
    for t in (epoch * steps_per_epoch, (epoch + 1) * steps_per_epoch - 1):
      assert float(learning_rate_at(config, t, {'steps_per_epoch': steps_per_epoch})) == (
          pytest.approx(rate, rel=1e-5)), (name, epoch, t)


@pytest.mark.parametrize('name, tied', [('pytorch_lstm', False), ('pytorch_lstm_tied', True)])
def test_pytorch_recipes_hold_main_pys_defaults(name, tied):
  config = config_from_flagfile(name)
  validated(config)
  assert (config.model, config.optimizer, config.tie_embeddings) == ('lstm', 'sgd', tied)
  assert (config.num_layers, config.hidden_size, config.feature_size) == (
      PYTORCH['layers'], PYTORCH['units'], PYTORCH['units'])
  assert (config.bptt_length, config.batch_size, config.dropout, config.epochs) == (
      PYTORCH['steps'], PYTORCH['batch'], PYTORCH['dropout'], PYTORCH['epochs'])
  assert (config.learning_rate, config.clip_norm) == (PYTORCH['rate'], PYTORCH['clip'])
  assert config.patience > config.epochs  # Never stops early; the best is reported.
  assert config.workdir == f'runs/{name}'


def test_pytorch_recipe_divides_the_rate_by_4_as_main_py():
  """main.py: after each epoch, `if not best_val_loss or val_loss < best_val_loss: best =
  val_loss else: lr /= 4`; a validation equal to the best divides too."""
  config = config_from_flagfile('pytorch_lstm')
  losses = [5.0, 4.8, 4.9, 4.7, 4.7, 4.6, 4.65, 4.5]
  lr, best, expected = PYTORCH['rate'], None, []
  for loss in losses:
    if best is None or loss < best:
      best = loss
    else:
      lr /= 4
    expected.append(lr)
  scale, history, got = 1.0, [], []
  for loss in losses:
    ppl = math.exp(loss)
    if plateau_decays(config, ppl, min(history) if history else None):
      scale *= config.lr_factor  # As the run's progress record keeps it (model_run.py).
    history.append(ppl)
    got.append(float(learning_rate_at(config, 0, {'lr_scale': scale})))
  assert got == pytest.approx(expected, rel=1e-6)


@pytest.mark.slow
def test_zaremba_small_trains_on_a_tiny_corpus_and_keeps_the_last_parameters(tmp_path):
  """Four epochs of one update each, the decay moved to epoch 3: the rates logged by the run
  are the paper's rule, and the parameters reported are the last update's."""
  corpus = write_text_corpus(tmp_path / 'text')
  workdir = tmp_path / 'run'
  result = cli.run('train', '--flagfile=zaremba_small', f'--dataset=text:{corpus}',
                   f'--data_dir={tmp_path / "tfds"}', f'--workdir={workdir}', '--epochs=4',
                   '--lr_keep_epochs=2', '--log_every=1', '--eval_splits=valid')
  assert result.returncode == 0, result.stderr
  summary = json.loads((workdir / 'summary.json').read_text())
  assert summary['steps'] == 4  # The tiny train split is one update per epoch.
  records = [json.loads(line) for line in (workdir / 'metrics.jsonl').read_text().splitlines()]
  rates = [record['learning_rate'] for record in records if record['kind'] == 'train']
  small = dict(ZAREMBA['zaremba_small'], epochs=4)
  assert rates == pytest.approx(zaremba_rates(small, kept=2), rel=1e-6)
  assert summary['reported']['step'] == summary['steps']
  assert summary['valid_ppl'] == pytest.approx(summary['valid_ppl_history'][-1], rel=1e-6)
  assert math.isfinite(summary['valid_ppl'])
