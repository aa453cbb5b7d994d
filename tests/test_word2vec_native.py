"""word2vec's compiled update (nplm/training/word2vec_update.cc through
nplm.training.word2vec_native) against the numpy transcription of the word2vec tool's loop
(tests/word2vec_tool.py) with the same draws, its draws (in numpy there) against Q,
its threads against each share's changes summed, and how it is built: once, whole, and
where it cannot be, a line saying why."""

import ctypes
import os
import subprocess
import sys
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nplm import parallel
from nplm.config import Config
from nplm.lm import build_language_model
from nplm.training import word2vec_native, word2vec_update
from nplm.training.word2vec_feed import Word2VecFeed
from tests.word2vec_tool import (ALPHA, MODELS_AND_KINDS, PROPOSAL, VOCAB, assert_same_change,
                                 chunks_of_examples, clean_draws, chunk_pieces, key_where,
                                 negatives_for, output_of, random_windows, start_tables,
                                 tool_chunked, tool_groups_summed)
from tests.word2vec_draws import compiled_draws

CHUNK = 2


def compiled_update(model, kind, tables, windows, centers, rng, threads: int):
  """(C, output vectors) after chunked_step's compiled loop, as float64 numpy."""
  result = word2vec_update.chunked_step(
      model, output_of(kind), *(jnp.asarray(table, jnp.float32) for table in tables),
      jnp.asarray(windows, jnp.int32), jnp.asarray(centers, jnp.int32),
      jnp.ones(len(centers), jnp.float32), jnp.float32(ALPHA), rng, CHUNK, threads)
  return tuple(np.asarray(table, np.float64) for table in result[:2])


def clean_key(model, kind, windows, centers):
  """A key whose compiled draws read no word twice in an example (the tool would read the
  second from the vector the first changed: a known difference, word2vec_update)."""
  return key_where(lambda rng: clean_draws(
      model, chunk_pieces(model, kind, rng, windows, centers, CHUNK, compiled=True)))


@MODELS_AND_KINDS
def test_the_compiled_update_is_the_tools_chunk_after_chunk(model, kind):
  windows, centers = random_windows(6, batch=8, window=1)
  rng = clean_key(model, kind, windows, centers)
  start = start_tables(kind, seed=7)
  want = tool_chunked(model, kind, start, windows, centers, rng, CHUNK, ALPHA, compiled=True)
  assert_same_change(compiled_update(model, kind, start, windows, centers, rng, 1), want, start)


@MODELS_AND_KINDS
@pytest.mark.parametrize('threads', [2, 3])
def test_threads_add_the_changes_of_their_shares_of_the_chunks(model, kind, threads):
  """Thread t takes the t-th contiguous share of the chunks and updates its own copy of the
  tables: the result is the start plus each share's change, as the transcription makes each
  from the start."""
  windows, centers = random_windows(6, batch=12, window=1)
  rng = clean_key(model, kind, windows, centers)
  start = start_tables(kind, seed=7)
  negatives = negatives_for(model, kind, rng, windows, compiled=True)
  chunks = [examples for examples in
            chunks_of_examples(model, kind, windows, centers, negatives, CHUNK) if examples]
  want = [table.copy() for table in start]
  for share in range(threads):
    tables = start
    for examples in chunks[len(chunks) * share // threads:len(chunks) * (share + 1) // threads]:
      tables = tool_groups_summed(kind, *tables, examples, ALPHA)
    for total, changed, old in zip(want, tables, start):
      total += changed - old
  got = compiled_update(model, kind, start, windows, centers, rng, threads)
  assert_same_change(got, want, start)
  one_thread = compiled_update(model, kind, start, windows, centers, rng, 1)
  assert not np.allclose(one_thread[0], want[0], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize('kind', ['tree', 'sampled'])
def test_a_word_filling_a_window_receives_the_error_once_per_slot(kind):
  """The update adds to rows four at a time: a word in four slots or more of a window is one
  row four times over in one pass, and each slot still adds the whole error, as the tool's
  loop over the window does (a pass that read the four before writing them would add one)."""
  windows, centers = random_windows(6, batch=8, window=3)
  windows[0] = 3  # One word in all six slots,
  windows[2, :5] = 5  # one in five of them.
  rng = clean_key('cbow', kind, windows, centers)
  start = start_tables(kind, seed=7)
  want = tool_chunked('cbow', kind, start, windows, centers, rng, CHUNK, ALPHA, compiled=True)
  assert_same_change(compiled_update('cbow', kind, start, windows, centers, rng, 1), want,
                     start)


def test_its_draws_follow_q():
  """The alias table holds Q to float64's rounding, and 400,000 draws (the update's, in
  numpy: the tests above show they are the compiled ones) land on each word within 4.5
  standard deviations of k·n·Q(w)."""
  threshold, alias = PROPOSAL.alias_table
  keep = np.where(threshold == np.iinfo(np.uint32).max, 1.0, threshold / 2.0 ** 32)
  held = keep.copy()
  np.add.at(held, alias, 1.0 - keep)
  np.testing.assert_allclose(held / len(held), PROPOSAL.probs, rtol=1e-8)
  draws = compiled_draws(PROPOSAL, jax.random.key(3), 100_000, 4)
  counts = np.bincount(draws.ravel(), minlength=VOCAB)
  expected = draws.size * PROPOSAL.probs
  assert np.all(np.abs(counts - expected) <= 4.5 * np.sqrt(expected * (1 - PROPOSAL.probs)))


def test_an_id_outside_its_table_is_refused():
  windows, centers = random_windows(6, batch=4, window=1)
  windows[0, 0] = VOCAB  # No row of C.
  with pytest.raises(Exception, match='an id outside its table'):
    compiled_update('cbow', 'tree', start_tables('tree', seed=1), windows, centers,
                    jax.random.key(0), 1)


def test_without_a_compiler_it_says_why(monkeypatch, tmp_path):
  monkeypatch.setenv('NPLM_CACHE_DIR', str(tmp_path))
  monkeypatch.setenv('CXX', 'no-such-c++')
  with pytest.raises(word2vec_native.NativeUnavailable, match=r'no C\+\+ compiler'):
    word2vec_native.build()
  monkeypatch.setenv('CXX', 'false')  # A compiler that fails.
  with pytest.raises(word2vec_native.NativeUnavailable, match='could not compile'):
    word2vec_native.build()
  assert list(tmp_path.iterdir()) == []  # Nothing half written.


@pytest.mark.slow
def test_it_is_built_once_per_machine_and_whole(monkeypatch, tmp_path):
  monkeypatch.setenv('NPLM_CACHE_DIR', str(tmp_path))
  built = word2vec_native.build()
  assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
      [built.name, word2vec_native.digest_path(built).name])
  modified = os.stat(built).st_mtime_ns
  assert word2vec_native.build() == built and os.stat(built).st_mtime_ns == modified


@pytest.mark.slow
def test_a_damaged_library_is_built_again_not_loaded(monkeypatch, tmp_path):
  """A library cut short (as by a full disk) crashed the process that loaded it (SIGBUS):
  its digest tells it apart, and it is built again; so is one whose digest is missing."""
  monkeypatch.setenv('NPLM_CACHE_DIR', str(tmp_path))
  built = word2vec_native.build()
  whole = built.read_bytes()
  built.write_bytes(whole[:1000])
  assert word2vec_native.build() == built and built.read_bytes() == whole
  word2vec_native.digest_path(built).unlink()
  assert word2vec_native.build() == built and word2vec_native.intact(built)
  assert hasattr(ctypes.CDLL(str(built)), word2vec_native.SYMBOL)


PEAK_SCRIPT = '''
import sys, jax, jax.numpy as jnp, numpy as np
from nplm.heads.proposal import Proposal
from nplm.training import word2vec_update
V, m, c, positions, threads = 50_000, 256, 10, 8192, int(sys.argv[1])
words = np.arange(positions * 2 * c) % V  # Each half of the batch reads every word.
windows = jnp.asarray(words.reshape(positions, 2 * c), jnp.int32)
counts = np.arange(V, 0, -1)
output = ('sampled', Proposal.from_counts(counts, 0.75), 5)
tables = [jnp.full((V, m), 0.01, jnp.float32) for _ in range(2)]
step = jax.jit(lambda *tables: word2vec_update.chunked_step(
    'cbow', output, *tables, windows, jnp.asarray(words[:positions] % V, jnp.int32),
    jnp.ones(positions), 0.025, jax.random.key(0), 32, threads))
jax.block_until_ready(step(*tables))  # Compiled and built.
def status(key):
  line = next(l for l in open('/proc/self/status') if l.startswith(key))
  return 1024 * int(line.split()[1])
open('/proc/self/clear_refs', 'w').write('5')  # VmHWM from here
before = status('VmRSS:')
jax.block_until_ready(step(*tables))
print(status('VmHWM:') - before)
'''


@pytest.mark.slow
def test_the_memory_estimate_holds_each_threads_copy_of_the_tables():
  """A compiled CBOW step whose two shares each read every word: at its peak it holds more
  than one thread's step by at least the two threads' copies of C, and no more than
  Word2VecFeed.host_scratch_words counts (memory.estimate's part for them)."""
  def grown(threads):
    result = subprocess.run([sys.executable, '-c', PEAK_SCRIPT, str(threads)],
                            capture_output=True, text=True, check=True)
    return int(result.stdout.split()[-1])
  vocab, m = 50_000, 256
  extra = grown(2) - grown(1)
  assert extra >= 0.9 * 2 * 4 * vocab * m  # Each thread copied all of C.
  config = Config(workdir='unused', model='cbow', head='negative_sampling', optimizer='sgd',
                  feature_size=m, window=10, batch_size=8192, chunk_positions=32).resolved()
  lm = build_language_model(config, np.arange(vocab, 0, -1))
  mesh = parallel.make_mesh('', devices=jax.devices('cpu')[:1])
  with mock.patch.object(parallel, 'usable_cores', return_value=2):
    counted = 4 * Word2VecFeed.host_scratch_words(config, lm, mesh)
  assert counted == 2 * 2 * 4 * vocab * m and counted >= extra
