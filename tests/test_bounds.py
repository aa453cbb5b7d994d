"""Requests that cannot fit (issue 42): the memory a process may have (MemAvailable, ulimit -v,
a cgroup), a batch larger than an epoch, an n-gram order's memory and ARPA size said before
the work, and word2vec on a text of one repeated line."""

import json
import logging
import math
import subprocess
import sys

import numpy as np
import pytest

from nplm import ngram
from nplm.config import Config
from nplm.lm import build_language_model
from nplm.ngram import arpa, bounds
from nplm.training import memory, run_checks
from nplm.training.word2vec_feed import MAX_SUMMED_RATE, bounded_chunk
from tests import cli
from tests.test_train import ROOT

COUNTS = np.maximum(1, 3000 // np.arange(1, 301))  # |V| = 300


# --- 3: the memory this process may have --------------------------------------------------

_CAPPED = r'''
import json, resource, sys
from nplm.config import Config, ConfigError
from nplm.lm import build_language_model
from nplm.training import memory
import numpy as np
counts = np.maximum(1, 3000 // np.arange(1, 301))
config = Config(workdir='unused', order=3, feature_size=8, hidden_size=int(sys.argv[1]),
                batch_size=64, eval_batch_size=64)
lm = build_language_model(config, counts)
# The cap: this process's mappings (JAX loaded) + 1.5 GB, set here, where they are known.
mapped = next(int(l.split()[1]) * 1024 for l in open('/proc/self/status')
              if l.startswith('VmSize:'))
cap = mapped + 3 * 2 ** 29
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
limits = memory.host_limits()
try:
  memory.require_fit(config, lm, counts, {'train': 1000, 'valid': 100, 'test': 100})
  message = None
except ConfigError as error:
  message = str(error)
print(json.dumps({'limits': limits, 'message': message, 'cap': cap}))
'''


def test_a_request_that_fits_memavailable_but_not_ulimit_v_is_refused_naming_the_cap():
  """A child under RLIMIT_AS = its own mappings (JAX loaded) + 1.5 GB asks for ~2.7 GB
  (hidden_size 400,000: 16 bytes a parameter with Adam, 316 parameters a unit)."""
  child = subprocess.run([sys.executable, '-c', _CAPPED, '400000'], cwd=ROOT, text=True,
                         capture_output=True, timeout=120)
  assert child.returncode == 0, child.stderr[-2000:]
  found = json.loads(child.stdout.strip().splitlines()[-1])
  limits, message, cap = found['limits'], found['message'], found['cap']
  room = limits['the address-space limit (ulimit -v) leaves']
  assert room < cap and limits['this machine has'] > 4e9, limits  # Fits MemAvailable.
  assert message is not None and '\n' not in message
  assert 'and the address-space limit (ulimit -v) leaves' in message, message
  needed = float(message.split('needs about ')[1].split(' GB')[0]) * 1e9
  assert room < needed < limits['this machine has'], (limits, message)


def test_the_least_limit_bounds_and_is_named(monkeypatch, tmp_path):
  (tmp_path / 'memory.max').write_text('3000000000\n')
  (tmp_path / 'memory.current').write_text('1000000000\n')
  assert memory._cgroup_room(tmp_path) == 2 * 10 ** 9
  (tmp_path / 'memory.max').write_text('max\n')
  assert memory._cgroup_room(tmp_path) is None
  monkeypatch.setattr(memory, 'host_limits', lambda: {
      'this machine has': 24 * 10 ** 9,
      "the cgroup's memory limit (memory.max) leaves": 2 * 10 ** 9})
  assert memory.host_available() == (2 * 10 ** 9,
                                     "the cgroup's memory limit (memory.max) leaves")


# --- 2: a batch larger than an epoch -----------------------------------------------------

@pytest.mark.parametrize('changes, batch, examples, largest', [
    (dict(), 29815, '29,814 windows', 29814),  # One window per token.
    (dict(model='transformer', order=5, num_heads=2, feature_size=8, hidden_size=8),
     7455, '7,454 windows', 7454),  # One every n-1 = 4 tokens: ⌈29,814 / 4⌉.
    (dict(model='lstm', bptt_length=35), 852, '29,814 words', 851),  # 852·35 > 29,814.
    (dict(model='skipgram', head='negative_sampling', optimizer='sgd'), 29815,
     '29,814 positions', 29814),
])
def test_a_batch_larger_than_an_epoch_is_said_naming_both_and_the_largest(
    changes, batch, examples, largest, caplog):
  config = Config(workdir='unused', dataset='text:corpus', batch_size=batch, **changes)
  lm = build_language_model(config, COUNTS)
  sizes = {'train': 29814, 'valid': 100, 'test': 100}
  with caplog.at_level(logging.WARNING, logger='nplm.trainer'):
    run_checks.check_corpus(config, lm, sizes)
  [message] = [record.getMessage() for record in caplog.records]
  assert f'--batch_size={batch:,}' in message and f'the {examples} of an epoch' in message
  assert message.endswith(f'the largest useful --batch_size is {largest:,}'), message
  caplog.clear()
  with caplog.at_level(logging.WARNING, logger='nplm.trainer'):
    run_checks.check_corpus(config.replace(batch_size=largest), lm, sizes)
  assert not caplog.records  # The largest useful batch is said nothing of.


# --- 1: an n-gram order said before the work ---------------------------------------------

def test_arpa_size_and_model_memory_match_a_real_fit(tmp_path):
  rng = np.random.default_rng(0)
  ids = rng.integers(0, 50, 3000)
  counted = []
  model = ngram.KneserNey.fit(ids, 4, 50, 0, on_order=lambda k, g: counted.append((k, g)))
  assert counted == [(k, model.table.num_grams(k)) for k in range(1, 5)]
  words = [f'w{i}' for i in range(50)]
  grams = [g for _, g in counted]
  chars = np.array([len(w) for w in words], float)
  estimate = bounds.arpa_bytes(grams, 50, chars[ids].mean(), chars.mean())
  path = tmp_path / 'model.arpa'

  class Vocab:
    pass

  vocab = Vocab()
  vocab.words = words
  arpa.write_arpa(model, vocab, path)
  assert 0.8 <= estimate / path.stat().st_size <= 1.25, (estimate, path.stat().st_size)
  arrays = sum(a.nbytes for group in (model.table.keys, model.table.counts, model.adjusted,
                                      model.totals, model.gammas) for a in group)
  assert arrays <= bounds.model_bytes(grams)
  assert bounds.at_least(grams[:2], 4, 3000, 3000) <= bounds.at_least(grams, 4, 3000, 3000)
  assert bounds.at_least(grams, 4, 3000, 3000) <= bounds.at_most(50, 3000, 4, 3000)


def test_scoring_by_blocks_and_spans_gives_the_same_numbers(monkeypatch):
  from nplm.ngram import kneser_ney
  rng = np.random.default_rng(1)
  ids = rng.integers(0, 20, 400)
  model = ngram.KneserNey.fit(ids, 5, 20, 0)
  windows = ngram.stream_windows(rng.integers(0, 20, 300), 5, 0)
  spans = model.table.span_ids(windows)  # Every span at once: the independent reading.
  for start in range(5):
    context, gram = model.table.span_ends(windows, start)
    assert np.array_equal(gram, spans[start, 5])
    assert np.array_equal(context, spans[start, 4] if start < 4 else np.zeros(300, int))
  whole = model.log_prob_windows(windows)
  monkeypatch.setattr(kneser_ney, 'BLOCK_ROWS', 7)
  assert np.array_equal(model.log_prob_windows(windows), whole)


def test_nplm_ngram_refuses_an_order_that_cannot_fit_in_one_line(tmp_path):
  """Under a 1 MB cgroup-like budget (host_available replaced in the child), counting
  stops at the order whose lower bound passes it, before the model is fitted."""
  corpus = tmp_path / 'corpus'
  corpus.mkdir()
  rng = np.random.default_rng(0)
  for split, n in (('train', 20000), ('valid', 500), ('test', 500)):
    words = rng.integers(0, 2000, n)
    (corpus / f'{split}.txt').write_text(
        ''.join(' '.join(f'w{w}' for w in words[i:i + 20]) + '\n' for i in range(0, n, 20)))
  code = ('import sys; from nplm.training import memory; from nplm.cli import ngram; '
          "ngram.host_available = lambda: (2 * 10 ** 6, 'this machine has'); "
          'sys.argv = ["nplm ngram", *sys.argv[1:]]; ngram.run_program(sys.argv)')
  out = tmp_path / 'kn20'
  result = cli.run(f'--dataset=text:{corpus}', f'--data_dir={tmp_path / "tfds"}',
                   '--order=20', f'--out={out}', code=code, timeout=120)
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 2 and 'Traceback' not in result.stderr, result.stderr[-2000:]
  assert lines[-1].startswith('error: --order=20 needs at least '), lines[-1]
  assert 'this machine has 2.0 MB available: lower --order' in lines[-1]
  assert any('counted the 1-grams' in line for line in lines)
  assert not (out / 'ngram.json').exists()


# --- 4: word2vec on one repeated line ----------------------------------------------------

def test_a_chunk_is_cut_where_one_row_would_sum_too_many_updates():
  sampled, tree = MAX_SUMMED_RATE['sampled'], MAX_SUMMED_RATE['tree']
  # One 8-word line: each word 1/9 of the stream and of Q, read 1/9 + 5/9 times an example
  # (target, 5 negatives), 6 skip-gram examples a position: 4 reads a position.
  assert bounded_chunk(128, 4096, 4, 0.025, sampled) == 32  # 4 / (0.025 · 4) = 40 -> 32.
  # Brown's busiest kept word: 1.4% of the kept tokens and 2.1% of Q; CBOW NS at α 0.05
  # summed 11.9 at 2,048 positions and diverged.
  assert bounded_chunk(32768, 32768, 0.116, 0.05, sampled) == 512
  assert bounded_chunk(128, 16384, 6 * 0.116, 0.025, sampled) == 128  # skipgram_ns.
  assert bounded_chunk(32, 32768, 0.116, 0.05, sampled) == 32  # cbow_ns as it stands.
  # The tree's root, once a position: CBOW at 1,024 positions lost WordSim-353.
  assert bounded_chunk(32768, 32768, 1, 0.05, tree) == 128
  assert bounded_chunk(256, 16384, 1, 0.025, tree) == 256  # skipgram_hs as it stands.
  assert bounded_chunk(128, 96, 4, 0.025, sampled) == 32  # The largest divisor of the batch.
  assert bounded_chunk(128, 96, 1e3, 0.05, sampled) == 1  # At least one position.


@pytest.mark.slow
@pytest.mark.parametrize('recipe, chunk, cut', [('skipgram_ns', 128, 32), ('cbow_ns', 0, 64)])
def test_word2vec_ns_trains_on_a_text_of_one_repeated_line(tmp_path, recipe, chunk, cut):
  """A recipe on 5,000 copies of one 8-word line (|V| = 10): finite perplexities. Before
  the cut: skip-gram 'Training diverged ... not finite at step 1'; CBOW with the whole
  batch a chunk (--chunk_positions=0, an accelerator's), cut where only the targets'
  reads counted (256 positions, each word also 5/9 of the negatives), diverged too."""
  text = tmp_path / 'one.txt'
  text.write_text('alpha bravo charlie delta echo foxtrot golf hotel\n' * 5000)
  result = cli.run('train', f'--flagfile={recipe}', f'--chunk_positions={chunk}',
                   f'--dataset=text:{text}', '--epochs=1', '--eval_splits=train,valid,test',
                   f'--workdir={tmp_path / "run"}', f'--data_dir={tmp_path / "tfds"}')
  assert result.returncode == 0, result.stderr[-1500:]
  summary = json.loads((tmp_path / 'run' / 'summary.json').read_text())
  assert all(math.isfinite(summary[f'{s}_ppl']) for s in ('train', 'valid', 'test'))
  assert f'updating {cut} positions at a time' in result.stderr
