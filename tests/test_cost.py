"""A run says what it will cost (nplm.training.cost): where its head scores every word and
the run takes long, the rate of importance sampling on the same model and batches, measured
on a state of its own: the run's numbers are those of a run that said nothing."""

import logging
import re

import pytest

from nplm import parallel
from nplm.lm import build_language_model
from nplm.trainer import run
from nplm.training import cost
from tests.test_train import tiny_config

SAID = re.compile(r'this run takes up to (\S+) more at ([\d,]+) examples/s: --head=softmax '
                  r'scores all 51 words for every example\. --head=is --num_samples=100 '
                  r'--optimizer=lazy_adam trained at ([\d,]+) examples/s here \(10 updates of '
                  r'this model on these batches\): about (\S+), its perplexities as exact')


def warnings(caplog) -> list[str]:
  return [r.getMessage() for r in caplog.records
          if r.name == 'nplm.training.cost' and r.levelno == logging.WARNING]


@pytest.mark.slow
def test_a_long_full_softmax_run_names_a_measured_sampled_head_and_trains_as_before(
    tiny_corpus, tmp_path, monkeypatch, caplog):
  config = tiny_config(tmp_path / 'quiet', epochs=2, log_every=3)
  quiet = run(config, tiny_corpus)
  monkeypatch.setattr(cost, 'LARGE_VOCABULARY', 50)  # Tiny Brown's 51 words count as large,
  monkeypatch.setattr(cost, 'COSTLY_SECONDS', 0)  # any run as long,
  monkeypatch.setattr(cost, 'FASTER', 0)  # and the sampled head as faster.
  with caplog.at_level(logging.INFO):
    said = run(config.replace(workdir=str(tmp_path / 'said')), tiny_corpus)
  [message] = warnings(caplog)
  found = SAID.match(message)
  assert found, message
  assert float(found.group(3).replace(',', '')) > 0
  for key in ('valid_ppl', 'test_ppl', 'train_ppl', 'valid_ppl_history', 'steps'):
    assert said[key] == quiet[key]
  caplog.clear()
  with caplog.at_level(logging.INFO):  # A sampled head already: nothing to say.
    run(config.replace(workdir=str(tmp_path / 'sampled'), head='is', num_samples=8),
        tiny_corpus)
  assert warnings(caplog) == []


def test_a_short_run_or_a_small_vocabulary_is_said_nothing_of(tiny_corpus, monkeypatch,
                                                              caplog):
  """No sampled head is built where the projection is short or |V| small."""
  monkeypatch.setattr(cost, 'examples_per_second', lambda *args: pytest.fail('measured'))
  config = tiny_config('unused')
  mesh = parallel.make_mesh('')
  lm = build_language_model(config, tiny_corpus.vocab.counts, mesh)
  with caplog.at_level(logging.INFO):
    cost.warn_if_costly(config, lm, tiny_corpus, mesh, None, rate=10.0, steps_left=10 ** 6,
                        examples_per_step=16)  # 18 days, but |V| = 51.
    monkeypatch.setattr(cost, 'LARGE_VOCABULARY', 50)
    cost.warn_if_costly(config, lm, tiny_corpus, mesh, None, rate=1e6, steps_left=100,
                        examples_per_step=16)  # Large, but 2 ms.
  assert warnings(caplog) == []
