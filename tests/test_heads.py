"""The output heads: exact normalization, agreement with numpy, sound trees and classes,
sampled gradients that estimate the softmax's, and exact perplexity whatever head trained.

Every expected value is computed independently (numpy from the parameters, brute-force sums
over the vocabulary, a textbook Huffman cost), never taken from the head under test.
"""

import heapq
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nplm.run_files.saved_params import saved_params
from nplm.config import Config
from nplm.data import batching
from nplm.data.vocab import TEXT_END
from nplm.heads import build_head
from nplm.heads.binary_tree import balanced_tree, huffman_tree
from nplm.heads.class_softmax import WordClasses
from nplm.lm import build_language_model
from nplm.training.optimizer import make_optimizer
from nplm.trainer import run
from nplm.training.window_feed import WindowFeed
from tests.test_train import brute_force_perplexity, tiny_config

V, D, B = 37, 8, 5  # Not a power of 2; D = 8 gives the adaptive tails 2 and 1 dimensions.


def zipf_counts(vocab_size: int) -> np.ndarray:
  """Strictly decreasing integer counts ∝ 1/rank^1.1, as a frequency-sorted vocabulary has."""
  ranks = np.arange(1, vocab_size + 1)
  counts = np.round(10_000 / ranks ** 1.1) + vocab_size - ranks
  assert np.all(np.diff(counts) < 0)
  return counts


def make_head(head, vocab_size=V, input_width=D, counts=None, **knobs):
  counts = zipf_counts(vocab_size) if counts is None else counts
  return build_head(Config(workdir='unused', head=head, **knobs), counts, input_width)


def random_params(head, input_width=D, seed=0, noise=0.3):
  """The head's initial parameters plus noise, so that every bias is exercised."""
  init = jax.jit(lambda key: head.init(key, jnp.zeros((1, input_width)), method=head.log_probs))
  params = init(jax.random.key(seed))['params']
  rng = np.random.default_rng(seed)
  return jax.tree.map(lambda p: np.asarray(p + noise * rng.normal(size=p.shape), np.float32),
                      params)


def random_hidden(batch=B, input_width=D, seed=1):
  return np.random.default_rng(seed).normal(size=(batch, input_width)).astype(np.float32)


def log_softmax(x):
  x = x - x.max(axis=-1, keepdims=True)
  return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def output_vectors(layer) -> np.ndarray:
  """The unit vectors o_u [units, D] of an OutputLayer's params (stored as rows)."""
  return np.asarray(layer['embedding'], np.float64)


def unit_scores(layer, h):
  """b_u + o_u·h for every unit: [batch, units]."""
  return h @ output_vectors(layer).T + np.asarray(layer['bias'], np.float64)


def log_prob_of_every_word(head, params, hidden):
  """log_prob(h, w) for every hidden vector h and every word w, one (h, w) pair per row, and
  log_probs(h) beside it: both [batch, |V|]."""
  vocab_size = head.vocab_size

  def both(params, hidden):
    every_pair = head.apply({'params': params}, jnp.repeat(hidden, vocab_size, axis=0),
                            jnp.tile(jnp.arange(vocab_size), len(hidden)), method=head.log_prob)
    return every_pair, head.apply({'params': params}, hidden, method=head.log_probs)
  every_pair, all_at_once = jax.jit(both)(params, hidden)
  return (np.asarray(every_pair, np.float64).reshape(len(hidden), vocab_size),
          np.asarray(all_at_once, np.float64))


# --- 1-2. every head's log_prob is normalized and equals its formula in numpy -----------

def nodes_by_prefix(tree) -> dict:
  """The internal node at the end of each code prefix, read from each word's stored path."""
  nodes = {}
  for word in range(len(tree.paths)):
    path_from_root = tree.paths[word][tree.mask[word]][::-1]
    code = tree.code(word)
    for depth, node in enumerate(path_from_root):
      assert nodes.setdefault(code[:depth], int(node)) == node, 'one prefix, two nodes'
  return nodes


def numpy_tree_log_probs(params, tree, h):
  """log Π σ(±(o_n·h + b_n)) from the root down each word's code; + where the bit is 1."""
  nodes, scores = nodes_by_prefix(tree), unit_scores(params['nodes'], h)
  out = np.zeros((len(h), len(tree.paths)))
  for word in range(len(tree.paths)):
    code = tree.code(word)
    for depth, bit in enumerate(code):
      sign = 1.0 if bit == '1' else -1.0
      out[:, word] -= np.log1p(np.exp(-sign * scores[:, nodes[code[:depth]]]))
  return out


def numpy_class_log_probs(params, class_of, h):
  """log P(c(w) | h) + log P(w | c(w), h), each a softmax, the second over c(w)'s members."""
  log_p_class = log_softmax(unit_scores(params['class_output'], h))
  word_scores = unit_scores(params['word_output'], h)
  out = np.zeros(word_scores.shape)
  for c in np.unique(class_of):
    members = class_of == c
    out[:, members] = log_p_class[:, [c]] + log_softmax(word_scores[:, members])
  return out


def numpy_adaptive_log_probs(params, cutoffs, vocab_size, h):
  """Shortlist words from the head softmax; tail word = P(cluster) · softmax of its tail."""
  log_p_head = log_softmax(unit_scores(params['head'], h))
  parts = [log_p_head[:, :cutoffs[0]]]
  for i, (start, end) in enumerate(zip(cutoffs, list(cutoffs[1:]) + [vocab_size])):
    projected = h @ np.asarray(params[f'tail{i}_projection']['kernel'], np.float64)
    scores = unit_scores(params[f'tail{i}'], projected)
    assert scores.shape[1] == end - start
    parts.append(log_p_head[:, cutoffs[0] + i, None] + log_softmax(scores))
  return np.concatenate(parts, axis=1)


def numpy_log_probs(name, head, params, hidden):
  h = hidden.astype(np.float64)
  if name == 'tree':
    return numpy_tree_log_probs(params, head.tree, h)
  if name == 'class':
    return numpy_class_log_probs(params, np.asarray(head.classes.class_of), h)
  if name == 'adaptive':
    return numpy_adaptive_log_probs(params, head.cutoffs, head.vocab_size, h)
  return log_softmax(unit_scores(params['output'], h))  # softmax, is, nce, negative_sampling


EXACT_HEADS = [
    ('tree', {'tree': 'huffman'}), ('tree', {'tree': 'balanced'}), ('class', {}),
    ('class', {'num_classes': 3}),
    ('class', {'num_classes': 6, 'counts': np.ones(V)}),  # The largest class is not the last.
    ('adaptive', {'adaptive_cutoffs': '5,15'}),
    ('adaptive', {'adaptive_cutoffs': '20'}), ('adaptive', {}), ('softmax', {}), ('is', {}),
    ('nce', {}), ('negative_sampling', {})]


@pytest.mark.parametrize('name,knobs', EXACT_HEADS)
def test_log_prob_is_normalized_and_equals_the_numpy_formula(name, knobs):
  """For random hidden vectors and random non-zero params, with log_prob evaluated for every
  word: Σ_w exp(log_prob(h, w)) = 1; log_prob equals the head's formula written out in numpy
  from its params; and log_probs(h), all words at once, agrees with it."""
  head = make_head(name, **knobs)
  params, hidden = random_params(head), random_hidden()
  every_word, all_at_once = log_prob_of_every_word(head, params, hidden)
  np.testing.assert_allclose(np.exp(every_word).sum(axis=1), 1.0, atol=1e-5)
  np.testing.assert_allclose(every_word, numpy_log_probs(name, head, params, hidden),
                             rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(all_at_once, every_word, atol=1e-5)


# --- 3. trees and classes ----------------------------------------------------------------

def optimal_code_cost(weights) -> float:
  """Classic Huffman: the optimal Σ weight·length is the sum of all merged weights."""
  heap, cost = [float(w) for w in weights], 0.0
  heapq.heapify(heap)
  while len(heap) > 1:
    merged = heapq.heappop(heap) + heapq.heappop(heap)
    cost += merged
    heapq.heappush(heap, merged)
  return cost


def assert_full_prefix_free_tree(tree, vocab_size):
  """Unique, prefix-free codes whose Kraft sum is 1, and stored paths that agree with them."""
  codes = [tree.code(w) for w in range(vocab_size)]
  assert len(set(codes)) == vocab_size and all(codes)
  ordered = sorted(codes)
  assert not any(b.startswith(a) for a, b in zip(ordered, ordered[1:])), 'not prefix-free'
  assert sum(2.0 ** -len(c) for c in codes) == 1.0  # Kraft equality: a full binary tree.
  assert [len(c) for c in codes] == list(tree.depths)
  nodes = nodes_by_prefix(tree)  # Every internal node is one code prefix, and vice versa.
  assert sorted(nodes.values()) == list(range(vocab_size - 1))


@pytest.mark.parametrize('vocab_size', [2, 3, 5, 37, 100])
def test_huffman_tree_is_an_optimal_prefix_code_with_frequent_words_shallow(vocab_size):
  """Prefix-free codes, depth never decreasing as the count decreases, and Σ count·depth
  equal to the optimal cost of an independent Huffman computation."""
  counts = zipf_counts(vocab_size)
  tree = huffman_tree(counts)
  assert_full_prefix_free_tree(tree, vocab_size)
  assert np.all(np.diff(tree.depths) >= 0), 'a rarer word sits above a more frequent one'
  assert np.sum(counts * tree.depths) == optimal_code_cost(counts)


def test_huffman_tree_weighs_unseen_words_as_one_count():
  """Zero counts (an unseen <unk>) still give leaves: optimal for counts clipped at 1."""
  counts = np.array([50, 20, 7, 3, 1, 0, 0])
  tree = huffman_tree(counts)
  assert_full_prefix_free_tree(tree, len(counts))
  weights = np.maximum(counts, 1)
  assert np.sum(weights * tree.depths) == optimal_code_cost(weights)


@pytest.mark.parametrize('vocab_size', [2, 3, 5, 8, 37, 64, 100])
def test_balanced_tree_depths_are_floor_or_ceil_of_log2(vocab_size):
  """A prefix-free tree whose every leaf is at depth ⌊log2 |V|⌋ or ⌈log2 |V|⌉."""
  tree = balanced_tree(vocab_size)
  assert_full_prefix_free_tree(tree, vocab_size)
  log2 = np.log2(vocab_size)
  assert set(tree.depths) <= {int(np.floor(log2)), int(np.ceil(log2))}


@pytest.mark.parametrize('num_classes', [1, 2, 6, 12, 37])
@pytest.mark.parametrize('counts', [zipf_counts(37), np.ones(37), np.r_[1e6, np.ones(36)]])
def test_frequency_classes_are_contiguous_and_cover_every_id_once(counts, num_classes):
  """Classes are non-empty runs of consecutive ids, numbered in order, at most as many as
  asked, with start/size describing exactly the ids mapped to them by class_of; and each
  holds at most 1/C of Σ √count plus one word's share (Mikolov et al.'s √-binning)."""
  classes = WordClasses.by_frequency(counts, num_classes)
  class_of = np.asarray(classes.class_of)
  assert 1 <= classes.num_classes <= num_classes and len(class_of) == len(counts)
  assert class_of[0] == 0 and set(np.diff(class_of)) <= {0, 1}  # Contiguous, none empty.
  for c in range(classes.num_classes):
    members = np.flatnonzero(class_of == c)
    assert classes.start[c] == members[0] and classes.size[c] == len(members)
  assert np.sum(classes.size) == len(counts)
  mass = np.sqrt(np.maximum(counts, 1))
  assert np.bincount(class_of, mass).max() <= mass.sum() / num_classes + mass.max()


# --- 4. sampled gradients estimate the softmax gradient -----------------------------------

def numpy_softmax_grads(params, hidden, targets):
  """∂ mean_i -log softmax(h_i K + b)[t_i]: (P - onehot)/B through the linear scores."""
  h = hidden.astype(np.float64)
  g = np.exp(log_softmax(unit_scores(params['output'], h)))  # ∂/∂s, then scaled
  g[np.arange(len(h)), targets] -= 1.0
  g /= len(h)
  return {'vectors': g.T @ h, 'bias': g.sum(axis=0),
          'hidden': g @ output_vectors(params['output'])}


def mean_sampled_grads(head, params, hidden, targets, draws, seed=0):
  """The gradient of the head's mean loss wrt its output layer and the hidden vectors,
  averaged over `draws` independent sets of samples."""
  def mean_loss(params, hidden, rng):
    return head.apply({'params': params}, hidden, targets, rng, method=head.loss).mean()
  rngs = jax.random.split(jax.random.key(seed), draws)
  grads = jax.jit(jax.vmap(jax.grad(mean_loss, argnums=(0, 1)), in_axes=(None, None, 0)))(
      params, hidden, rngs)
  grads = jax.tree.map(lambda g: np.asarray(g, np.float64).mean(axis=0), grads)
  output = grads[0]['output']
  return {'vectors': output_vectors(output), 'bias': output['bias'], 'hidden': grads[1]}


def relative_errors(got, want):
  errors = {k: np.linalg.norm(got[k] - want[k]) / np.linalg.norm(want[k]) for k in want}
  rows = np.linalg.norm(got['hidden'] - want['hidden'], axis=1)
  errors['worst hidden row'] = np.max(rows / np.linalg.norm(want['hidden'], axis=1))
  return errors


SMALL_V, SMALL_D = 10, 4


# Repeated targets: the bias gradient Σ_i (P_i - onehot_i) is then far from 0.
SKEWED_TARGETS = np.array([0, 0, 0, 1, 1, 2, 4, 6, 8, 9])


def test_importance_sampling_gradient_converges_to_the_softmax_gradient():
  """With the softmax's parameters, k = 4000 samples from the unigram Q (far from P), over
  20 draws, give the exact gradient of mean -log P (params and each hidden row) within 4%."""
  head = make_head('is', SMALL_V, SMALL_D, num_samples=4000)
  softmax = make_head('softmax', SMALL_V, SMALL_D)
  params = random_params(softmax, SMALL_D, seed=5)  # The two heads share one parameter tree.
  hidden, targets = random_hidden(SMALL_V, SMALL_D, seed=6), SKEWED_TARGETS
  got = mean_sampled_grads(head, params, hidden, targets, draws=20)
  errors = relative_errors(got, numpy_softmax_grads(params, hidden, targets))
  assert max(errors.values()) < 0.04, errors


def normalized_nce_setup(shift=0.0):
  """One hidden vector repeated for every target, the biases shifted so that its scores are
  log-probabilities (exp z = 1), then moved by `shift` (off NCE's fixed point unless 0)."""
  head = make_head('nce', SMALL_V, SMALL_D, num_samples=5000)
  params = random_params(head, SMALL_D, seed=7)
  hidden = np.repeat(random_hidden(1, SMALL_D, seed=8), len(SKEWED_TARGETS), axis=0)
  scores = unit_scores(params['output'], hidden[0].astype(np.float64))
  log_z = np.log(np.exp(scores - scores.max()).sum()) + scores.max()
  params['output']['bias'] = (params['output']['bias'] - log_z + shift).astype(np.float32)
  return head, params, hidden, SKEWED_TARGETS


@pytest.mark.parametrize('noise_per_example', [False, True])
def test_nce_gradient_at_normalized_scores_is_the_softmax_gradient(noise_per_example):
  """Where exp(z_h) = 1, NCE's gradient (k = 5000 noise words, 20 draws; shared by the batch
  or drawn per example) is that of mean -log P within 4%, for every example's hidden vector
  too."""
  head, params, hidden, targets = normalized_nce_setup()
  head = head.clone(noise_per_example=noise_per_example)
  got = mean_sampled_grads(head, params, hidden, targets, draws=20)
  errors = relative_errors(got, numpy_softmax_grads(params, hidden, targets))
  assert max(errors.values()) < 0.04, errors


def test_nce_gradient_off_its_fixed_point_is_not_the_softmax_gradient():
  """The check above can fail: with scores summing to e^1.5 the two gradients differ."""
  head, params, hidden, targets = normalized_nce_setup(shift=1.5)
  got = mean_sampled_grads(head, params, hidden, targets, draws=2)
  errors = relative_errors(got, numpy_softmax_grads(params, hidden, targets))
  assert errors['bias'] > 0.5 and errors['vectors'] > 0.5, errors


# --- 5. accidental hits -------------------------------------------------------------------

def test_importance_sampling_masks_samples_equal_to_the_target():
  """Q puts all its mass on word 0, so every sample is word 0. For target 0 all samples are
  masked: Ẑ = exp(s_t) and the loss is 0 (log 2 if the hits were counted). For any other
  target the k samples each weigh exp(s_0)/(kQ_0): loss = log(1 + exp(s_0 - s_t)/Q_0)."""
  counts = np.r_[1e12, np.ones(7)]
  head = make_head('is', 8, SMALL_D, counts=counts, num_samples=50)
  params, hidden = random_params(head, SMALL_D, seed=9), random_hidden(16, SMALL_D, seed=10)
  targets = np.r_[np.zeros(8), np.arange(8)].astype(np.int32)

  def total_loss(params):
    losses = head.apply({'params': params}, hidden, targets, jax.random.key(11),
                        method=head.loss)
    return losses.sum(), losses
  (_, got), grads = jax.jit(jax.value_and_grad(total_loss, has_aux=True))(params)
  got = np.asarray(got)
  scores = unit_scores(params['output'], hidden.astype(np.float64))
  s_t, q_0 = scores[np.arange(16), targets], counts[0] / counts.sum()
  want = np.where(targets == 0, 0.0, np.log1p(np.exp(scores[:, 0] - s_t) / q_0))
  assert np.all(np.isfinite(got)) and np.all(got >= 0)
  np.testing.assert_allclose(got, want, atol=1e-5)
  assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))


# --- 6-8. tiny training runs: exact perplexity whatever head trained ----------------------

TRAINED_HEADS = {
    'softmax': {}, 'class': {}, 'tree': {'tree': 'huffman'}, 'is': {'num_samples': 10},
    'nce': {'num_samples': 10}, 'adaptive': {'adaptive_cutoffs': '10,30'},
    'negative_sampling': {'num_samples': 10}}


@pytest.fixture(scope='module')
def trained(tiny_corpus, tmp_path_factory):
  """trained(head) -> (config, summary) of one tiny run per head, shared by the tests."""
  runs = {}

  def train(head):
    if head not in runs:
      config = tiny_config(tmp_path_factory.mktemp(head), head=head, epochs=2, patience=2,
                           log_every=1000, checkpoint_every=1000, **TRAINED_HEADS[head])
      runs[head] = config, run(config, tiny_corpus)
    return runs[head]
  return train


def initial_valid_perplexity(config, corpus) -> float:
  """The exact validation perplexity of the parameters the run starts from."""
  lm = build_language_model(config, corpus.vocab.counts)
  init_rng, _ = jax.random.split(jax.random.key(config.seed))
  params = WindowFeed.init_state(config, lm, init_rng, make_optimizer(config)).params
  ids = corpus.splits['valid']
  padded = batching.pad_split(ids, config.order, int(corpus.vocab.encode([TEXT_END])[0]))
  context, targets = batching.windows(padded, np.arange(len(ids)), config.order)
  log_p = jax.jit(lambda p, c, t: lm.apply({'params': p}, c, t, method=lm.log_prob))(
      params, context, targets)
  return float(np.exp(-np.mean(np.asarray(log_p, np.float64))))


@pytest.mark.parametrize('head', ['softmax', 'class', 'tree', 'is', 'nce', 'adaptive'])
@pytest.mark.slow
def test_training_lowers_exact_validation_perplexity(trained, tiny_corpus, head):
  """Two epochs of nplm.trainer.run cut the exact validation perplexity of the parameters the
  run started from by at least 5% (NCE and the Huffman tree start near the unigram's)."""
  config, summary = trained(head)
  assert summary['status'] == 'epochs_done'
  before = initial_valid_perplexity(config, tiny_corpus)
  assert summary['valid_ppl'] < 0.95 * before, (summary['valid_ppl_history'], before)


@pytest.mark.parametrize('head', ['is', 'nce'])
@pytest.mark.slow
def test_sampled_heads_report_the_exact_softmax_perplexity(trained, tiny_corpus, head):
  """The reported perplexity is the full softmax over the best parameters, summed in numpy,
  not anything sampled."""
  config, summary = trained(head)
  params = jax.tree.map(np.asarray, saved_params(Path(config.workdir)))
  for split in ('valid', 'test'):
    want = brute_force_perplexity(params, tiny_corpus.splits[split], tiny_corpus.vocab, config)
    assert summary[f'{split}_ppl'] == pytest.approx(want, rel=1e-4)


@pytest.mark.slow
def test_negative_sampling_trains_and_is_evaluated_normalized(trained):
  """Not a language model, but it trains and its exact perplexity is finite (its log_prob is
  normalized: see test_log_prob_is_normalized_and_equals_the_numpy_formula)."""
  _, summary = trained('negative_sampling')
  assert summary['status'] == 'epochs_done'
  assert all(np.isfinite(summary[f'{s}_ppl']) for s in ('train', 'valid', 'test'))
