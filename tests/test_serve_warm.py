"""nplm serve's warm-up (nplm.serve.app's Service.warm): what the first requests would
compile, compiled before the server says it is ready."""

import dataclasses
import re
from pathlib import Path

import pytest

from nplm.serve import app
from nplm.serve.app import PAGE_COMPLETION, Service
from nplm.serve.requests import Limits
from nplm.use import answers, trained
from nplm.use.correction import Corrector


@pytest.mark.slow  # Reads a quick run.
def test_warm_compiles_every_row_count_a_window_models_corrections_meet(quick_runs):
  """Service.warm (before the server says it is ready): the window scoring compiled at each
  row count window_log_probs pads to (its jitted function's cache counted from empty), so
  that corrections of sentences of every length compile nothing more; the page's completion
  request is the one warm compiles for."""
  quick = quick_runs('nnlm')
  model = dataclasses.replace(quick, config=quick.config.replace(eval_batch_size=200))
  trained._window_log_prob.clear_cache()
  Service(model, Limits()).warm()
  counts = 6  # 8, 16, ..., 256 rows: the powers of two to the one that holds 200.
  assert trained._window_log_prob._cache_size() == counts
  words = 'Teh grand jruy sayd Fridy an investigaton of recnt primary electons produced'.split()
  texts = [' '.join(words[:n] * (1 + n // 4)) for n in range(1, len(words) + 1)]
  corrected = answers.corrections(Corrector(model), texts)['corrections']
  assert any(c['changes'] for c in corrected)  # Else few variants were scored.
  assert trained._window_log_prob._cache_size() == counts
  page = (Path(app.__file__).with_name('page') / 'page.js').read_text()
  assert re.findall(r'"/complete", \{prefix, k: (\d+), max_words: (\d+)\}', page) == [
      (str(PAGE_COMPLETION['k']), str(PAGE_COMPLETION['max_words']))]
