"""The word2vec tool's inner loop (word2vec.c, TrainModelThread; Mikolov et al. 2013a,
2013b) transcribed in numpy, float64, one update after another, with the draws of nplm's
update: what tests/test_word2vec_update.py and tests/test_word2vec_native.py compare
nplm's update with; and the tiny vocabulary, tables and windows they share."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nplm.heads.binary_tree import huffman_tree
from nplm.heads.proposal import Proposal
from nplm.training import word2vec_update
from tests.word2vec_draws import compiled_draws

ABSENT = -1
MAX_EXP = 6.0  # word2vec.c's bound on a score.
WIDTH, NUM_SAMPLES = 4, 3
COUNTS = np.array([20, 15, 12, 10, 8, 6, 5, 4, 3, 3, 2, 2])
VOCAB = len(COUNTS)
TREE = huffman_tree(COUNTS)
PROPOSAL = Proposal.from_counts(COUNTS, 0.75)
# A large rate: changes far above the float32 rounding of the parameters they are added to.
ALPHA = 0.5


# --- word2vec.c, transcribed (float64, one update after another) -------------------------

def sigmoid(f: float) -> float:
  # Exact: nplm computes σ where the tool reads its 1,000-entry table (expTable).
  return 1.0 / (1.0 + np.exp(-f))


def tool_hierarchical(hidden, syn1, word: int, alpha: float) -> np.ndarray:
  """`if (hs)`: each node on the word's path, syn1 updated in place -> neu1e. The tool's
  code is 1 - nplm's bit (bit 1: the right turn, σ(+f); code 1: σ(-f))."""
  on_path = TREE.mask[word]
  points, codes = TREE.paths[word][on_path], 1 - TREE.bits[word][on_path].astype(int)
  neu1e = np.zeros_like(hidden)
  for point, code in zip(points, codes):
    f = hidden @ syn1[point]
    if f <= -MAX_EXP or f >= MAX_EXP:
      continue
    g = (1 - code - sigmoid(f)) * alpha
    neu1e += g * syn1[point]
    syn1[point] += g * hidden
  return neu1e


def tool_negative(hidden, syn1neg, word: int, negatives, alpha: float) -> np.ndarray:
  """`if (negative > 0)`: the word (label 1), then each negative (label 0) but the word,
  syn1neg updated in place -> neu1e."""
  neu1e = np.zeros_like(hidden)
  for d, target in enumerate([word, *negatives]):
    if d > 0 and target == word:
      continue
    label = 1 if d == 0 else 0
    f = hidden @ syn1neg[target]
    if f > MAX_EXP:
      g = (label - 1) * alpha
    elif f < -MAX_EXP:
      g = (label - 0) * alpha
    else:
      g = (label - sigmoid(f)) * alpha
    neu1e += g * syn1neg[target]
    syn1neg[target] += g * hidden
  return neu1e


def tool_example(kind: str, syn0, out, inputs, word: int, negatives, alpha: float):
  """One example, in place: CBOW's neu1 is the mean of its cw context words, skip-gram's
  l1 its one context word's vector; each input word then receives the whole neu1e."""
  hidden = syn0[inputs].mean(axis=0)
  if kind == 'tree':
    neu1e = tool_hierarchical(hidden, out, word, alpha)
  else:
    neu1e = tool_negative(hidden, out, word, negatives, alpha)
  for c in inputs:
    syn0[c] += neu1e


def examples_of(model: str, window):
  """(slot, input words) of a position's examples: CBOW's one (if any word is present),
  skip-gram's one per present context word (its slot: which draws it reads)."""
  slots = [j for j, word in enumerate(window) if word != ABSENT]
  if model == 'cbow':
    return [(0, [window[j] for j in slots])] if slots else []
  return [(j, [window[j]]) for j in slots]


def tool_position(model, kind, syn0, out, window, word, negatives, alpha):
  """A position as the tool trains it, in place: its examples one after another."""
  for slot, inputs in examples_of(model, window):
    tool_example(kind, syn0, out, inputs, word, negatives[slot], alpha)


def tool_summed(model, kind, syn0, out, windows, centers, negatives, alpha):
  """Each example's update from the same parameters, summed, but a skip-gram position's
  examples on the tree taken in turn on its path: what the module docstring says a batch
  is. -> (syn0, out) after it."""
  return tool_groups_summed(kind, syn0, out, example_groups(model, kind, windows, centers,
                                                            negatives), alpha)


def examples_in_order(model, windows, centers, negatives) -> list:
  """(input words, target, draws) of every example, by position then slot."""
  return [(inputs, word, negatives[position, slot])
          for position, (window, word) in enumerate(zip(windows, centers))
          for slot, inputs in examples_of(model, window)]


def example_groups(model, kind, windows, centers, negatives) -> list:
  """The examples in groups whose updates are summed: a skip-gram position's examples on the
  tree, which share its path; else each example alone."""
  if model == 'skipgram' and kind == 'tree':
    return [examples_in_order(model, windows[[p]], centers[[p]], negatives[[p]])
            for p in range(len(windows))]
  return [[example] for example in examples_in_order(model, windows, centers, negatives)]


# --- the draws -------------------------------------------------------------------------

def negatives_for(model, kind, rng, windows, compiled=False) -> np.ndarray:
  """The negatives `step` draws with this key (`compiled`: the C++ update's draws,
  `compiled_draws`): [B, J, k] (J = 1 for CBOW, 2c for skip-gram); none for the tree."""
  slots = 1 if model == 'cbow' else windows.shape[1]
  if kind == 'tree':
    return np.zeros((len(windows), slots, 0), np.int32)
  if not compiled:
    return np.asarray(word2vec_update.draw_negatives(PROPOSAL, rng,
                                                     (len(windows), slots, NUM_SAMPLES)))
  present = windows != ABSENT
  if model == 'cbow':  # Example n: position n.
    return compiled_draws(PROPOSAL, rng, len(windows), NUM_SAMPLES)[:, None, :]
  # Skip-gram's pairs are drawn for in their order among the counted pairs.
  drawn = np.zeros((*windows.shape, NUM_SAMPLES), np.int32)
  drawn[present] = compiled_draws(PROPOSAL, rng, int(present.sum()), NUM_SAMPLES)
  return drawn


def chunk_negatives(model, kind, rng, windows, chunk: int, compiled=False) -> list:
  """Each chunk's draws, as chunked_step makes them: the whole batch's draws (step's, with
  this key), cut into chunks."""
  drawn = negatives_for(model, kind, rng, windows, compiled)
  return [drawn[start:start + chunk] for start in range(0, len(windows), chunk)]


def clean_draws(model, pieces, want_target=False) -> bool:
  """pieces: each step's (negatives, windows, centers). Whether no example draws a word
  twice, its target (skipped) aside: the tool reads a second draw from the vector the first
  left (test_a_negative_drawn_twice_...); and, if asked, whether one draws its own target."""
  drawn = [(list(negatives[position, slot]), word) for negatives, windows, centers in pieces
           for position, (window, word) in enumerate(zip(windows, centers))
           for slot, _ in examples_of(model, window)]
  others = [[n for n in row if n != word] for row, word in drawn]
  clean = all(len(set(row)) == len(row) for row in others)
  return clean and (not want_target or any(word in row for row, word in drawn))


def chunk_pieces(model, kind, rng, windows, centers, chunk: int, compiled=False) -> list:
  """(negatives, windows, centers) of each chunk of chunked_step."""
  cuts = range(0, len(windows), chunk)
  drawn = chunk_negatives(model, kind, rng, windows, chunk, compiled)
  return [(negatives, windows[start:start + chunk], centers[start:start + chunk])
          for start, negatives in zip(cuts, drawn)]


def key_where(accept) -> jax.Array:
  """The first key 0, 1, … whose draws `accept` takes."""
  for seed in range(2000):
    if accept(jax.random.key(seed)):
      return jax.random.key(seed)
  raise AssertionError('no key in 2,000 gives the draws wanted')


def chunks_of_examples(model, kind, windows, centers, negatives, chunk: int,
                       every_chunk=False) -> list:
  """chunked_step's chunks, each a list of (input words, target, draws): `chunk` positions'
  examples; skip-gram's sampled pairs chunk·(c + 1) at a time, in order of position then
  slot (`every_chunk`: with their positions, as the rest)."""
  if model == 'skipgram' and kind == 'sampled' and not every_chunk:
    pairs = [[pair] for pair in examples_in_order(model, windows, centers, negatives)]
    size = chunk * (windows.shape[1] // 2 + 1)
    return [pairs[start:start + size] for start in range(0, len(pairs), size)]
  return [example_groups(model, kind, windows[start:start + chunk],
                         centers[start:start + chunk], negatives[start:start + chunk])
          for start in range(0, len(windows), chunk)]


def tool_chunked(model, kind, tables, windows, centers, rng, chunk: int, alpha,
                 compiled=False, every_chunk=False):
  """chunked_step's meaning: its chunks one after another, each its examples' summed
  update from the tables the previous chunks left. -> (syn0, out)."""
  negatives = negatives_for(model, kind, rng, windows, compiled)
  for groups in chunks_of_examples(model, kind, windows, centers, negatives, chunk,
                                   every_chunk):
    tables = tool_groups_summed(kind, *tables, groups, alpha)
  return tables


def tool_groups_summed(kind, syn0, out, groups, alpha):
  """Each group's update from the same parameters, summed. Within a group the examples
  (input words, target, draws) take the output vectors in turn, as the tool does, each
  reading C as the group found it."""
  new_syn0, new_out = syn0.copy(), out.copy()
  for group in groups:
    group_out = out.copy()
    for inputs, word, drawn in group:
      one_syn0 = syn0.copy()
      tool_example(kind, one_syn0, group_out, inputs, word, drawn, alpha)
      new_syn0 += one_syn0 - syn0
    new_out += group_out - out
  return new_syn0, new_out


# --- nplm's side ------------------------------------------------------------------------

def output_of(kind: str) -> tuple:
  """The `output` tuple as Word2VecFeed.output_vectors builds it."""
  if kind == 'tree':
    return 'tree', jnp.asarray(TREE.paths), jnp.asarray(TREE.bits), jnp.asarray(TREE.mask)
  return 'sampled', PROPOSAL, NUM_SAMPLES


def nplm_update(model, kind, syn0, out, windows, centers, alpha, rng, chunk=None,
                every_chunk=False):
  """(C, output vectors) after `step` (or `chunked_step`), as float64 numpy."""
  args = (model, output_of(kind), jnp.asarray(syn0, jnp.float32), jnp.asarray(out, jnp.float32),
          jnp.asarray(windows, jnp.int32), jnp.asarray(centers, jnp.int32),
          jnp.ones(len(centers), jnp.float32), jnp.float32(alpha), rng)
  if chunk is None:
    result = word2vec_update.step(*args)
  else:
    result = word2vec_update.chunked_step(*args, chunk, every_chunk=every_chunk)
  return np.asarray(result[0], np.float64), np.asarray(result[1], np.float64)


def start_tables(kind: str, seed: int, scale: float = 1.0):
  """(C, output vectors): float32 values held as float64, so both sides start alike."""
  rng = np.random.default_rng(seed)
  rows = VOCAB - 1 if kind == 'tree' else VOCAB
  syn0 = (scale * rng.normal(0, 0.5, (VOCAB, WIDTH))).astype(np.float32)
  out = (scale * rng.normal(0, 0.5, (rows, WIDTH))).astype(np.float32)
  return syn0.astype(np.float64), out.astype(np.float64)


def assert_same_change(got, want, start, tolerance=1e-5):
  """Each table's change agrees with the transcription's to `tolerance` of its largest."""
  for mine, theirs, before in zip(got, want, start):
    change = theirs - before
    assert np.abs(change).max() > 0  # Something moved: the comparison can fail.
    np.testing.assert_allclose(mine - before, change, rtol=tolerance,
                               atol=tolerance * np.abs(change).max())


def random_windows(seed: int, batch: int, window: int):
  """Windows [B, 2c] with some slots ABSENT (one position wholly), and centers [B]."""
  rng = np.random.default_rng(seed)
  windows = rng.integers(0, VOCAB, (batch, 2 * window))
  windows[rng.random(windows.shape) < 0.3] = ABSENT
  windows[1] = ABSENT  # A position with no context word: no example.
  return windows, rng.integers(0, VOCAB, batch)


MODELS_AND_KINDS = pytest.mark.parametrize('model,kind', [
    ('skipgram', 'tree'), ('skipgram', 'sampled'), ('cbow', 'tree'), ('cbow', 'sampled')])


def scores_and_labels(model, kind, syn0, out, windows, centers, negatives) -> np.ndarray:
  """(f, label) of each output vector each example reads, from the starting tables [n, 2];
  label 1 where σ(f) is the decision's probability."""
  pairs = []
  for position, (window, word) in enumerate(zip(windows, centers)):
    for slot, inputs in examples_of(model, window):
      hidden = syn0[inputs].mean(axis=0)
      if kind == 'tree':
        rows, labels = TREE.paths[word][TREE.mask[word]], TREE.bits[word][TREE.mask[word]]
      else:
        drawn = [n for n in negatives[position, slot] if n != word]
        rows, labels = [word, *drawn], [1] + [0] * len(drawn)
      pairs += [(hidden @ out[row], label) for row, label in zip(rows, labels)]
  return np.array(pairs, np.float64)
