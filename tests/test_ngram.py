"""The n-gram baselines: counts and discounts worked out by hand, exact normalization over
the vocabulary (brute force), and agreement with plain-Python implementations written from
the definitions (dicts and Counters, one n-gram at a time)."""

import collections
import math

import numpy as np
import pytest

from nplm.data.vocab import TEXT_END
from nplm.ngram import InterpolatedTrigram, KneserNey, NgramTable, frequency_bins, perplexity
from nplm.ngram import kneser_ney
from nplm.ngram.kneser_ney import FALLBACK_DISCOUNTS

# A stream over {0 = boundary, 1, 2, 3, 4} built so that both orders of a bigram model have
# every count-of-counts n1 … n4 non-zero. With the boundary before it, its 18 bigrams are
# (0,4) (4,1) (1,4) (4,2) (2,4) once, (3,4) (3,2) (2,3) twice, (4,3) three and (3,3) four times.
HAND_STREAM = np.array([4, 1, 4, 2, 3, 3, 3, 3, 3, 4, 3, 2, 4, 3, 2, 3, 4, 3])


def hand_model():
  return KneserNey.fit(HAND_STREAM, order=2, vocab_size=5, boundary_id=0)


def test_hand_worked_counts():
  model = hand_model()
  table = model.table
  bigrams = {divmod(int(key), 5): int(count)
             for key, count in zip(table.keys[1], table.counts[1]) if count}
  assert bigrams == {(0, 4): 1, (4, 1): 1, (1, 4): 1, (4, 2): 1, (2, 4): 1,
                     (3, 4): 2, (3, 2): 2, (2, 3): 2, (4, 3): 3, (3, 3): 4}
  # Continuation counts N1+(• w): 1 follows {4}; 2 follows {4, 3}; 3 follows {2, 4, 3};
  # 4 follows {0, 1, 3, 2}; 0 is never a token.
  assert model.adjusted[0].tolist() == [0, 1, 2, 3, 4]


def test_hand_worked_discounts():
  low, high = hand_model().discounts
  # Unigram continuation counts: n1 = n2 = n3 = n4 = 1, Y = 1/3.
  assert low == pytest.approx((1 - 2 / 3, 2 - 1, 3 - 4 / 3))
  # Bigram counts: n1 = 5, n2 = 3, n3 = 1, n4 = 1, Y = 5/11.
  assert high == pytest.approx((5 / 11, 17 / 11, 13 / 11))


def test_hand_worked_probabilities():
  probs = np.exp(hand_model().log_probs(np.array([[3], [1]])))
  # Unigrams: γ = 1/3 + 1 + 2·5/3 = 14/3 spread over |V| = 5, total 10:
  # p1 = (0, 2/3, 1, 4/3, 7/3) + 14/15, all / 10 = (14, 24, 29, 34, 49) / 150.
  p1 = np.array([14, 24, 29, 34, 49]) / 150
  # After 3: counts (3,4) 2, (3,2) 2, (3,3) 4, total 8, γ = 2·17/11 + 13/11 = 47/11.
  gamma3 = 47 / 11
  assert probs[0, 3] == pytest.approx((4 - 13 / 11 + gamma3 * p1[3]) / 8)  # 781/1650
  assert probs[0, 0] == pytest.approx(gamma3 * p1[0] / 8)  # 329/6600, never seen after 3
  # After 1: only (1,4), once: p = (1 - 5/11 + 5/11 · p1(4)) / 1.
  assert probs[1, 4] == pytest.approx(1 - 5 / 11 + 5 / 11 * p1[4])
  assert probs.sum(axis=1) == pytest.approx([1.0, 1.0], abs=1e-12)


def test_discounts_fall_back_when_count_of_counts_vanish():
  model = KneserNey.fit(np.array([1, 2, 1, 2]), order=2, vocab_size=3, boundary_id=0)
  assert model.fallback_orders == (1, 2)
  assert model.discounts == (FALLBACK_DISCOUNTS, FALLBACK_DISCOUNTS)
  assert np.exp(model.log_probs(np.array([[0], [1], [2]]))).sum(axis=1) == pytest.approx(1.0)


# --- an independent modified Kneser-Ney, one n-gram at a time -------------------------

def reference_kneser_ney(train, vocab_size, order, boundary):
  """p(w | context) from the textbook definition, with dicts (Chen & Goodman 1998)."""
  padded = [boundary] * (order - 1) + [int(w) for w in train]
  events = {k: collections.Counter() for k in range(1, order + 1)}
  for t in range(order - 1, len(padded)):
    for k in range(1, order + 1):
      events[k][tuple(padded[t - k + 1:t + 1])] += 1
  adjusted = {order: dict(events[order])}
  for k in range(1, order):
    left = collections.defaultdict(set)
    for gram in events[k + 1]:
      left[gram[1:]].add(gram[0])
    adjusted[k] = {gram: len(words) for gram, words in left.items()}
  discounts = {}
  for k, counts in adjusted.items():
    n = [sum(1 for c in counts.values() if c == r) for r in (1, 2, 3, 4)]
    d = None
    if min(n) > 0:
      y = n[0] / (n[0] + 2 * n[1])
      d = (1 - 2 * y * n[1] / n[0], 2 - 3 * y * n[2] / n[1], 3 - 4 * y * n[3] / n[2])
      if not all(0 < x < r for x, r in zip(d, (1, 2, 3))):
        d = None
    discounts[k] = d or FALLBACK_DISCOUNTS

  def discount(k, count):
    return 0.0 if count == 0 else discounts[k][min(count, 3) - 1]

  def prob(history, word, k):
    if k == 0:
      return 1.0 / vocab_size
    context = tuple(history[len(history) - (k - 1):]) if k > 1 else ()
    followers = {g: c for g, c in adjusted[k].items() if g[:-1] == context}
    lower = prob(history, word, k - 1)
    total = sum(followers.values())
    if total == 0:
      return lower
    count = followers.get(context + (word,), 0)
    gamma = sum(discount(k, c) for c in followers.values())
    return (max(count - discount(k, count), 0.0) + gamma * lower) / total

  return prob


@pytest.mark.parametrize('order', [2, 3, 4, 5])
def test_kneser_ney_matches_a_reference_implementation(tiny_corpus, order):
  vocab, splits = tiny_corpus.vocab, tiny_corpus.splits
  boundary = int(vocab.encode([TEXT_END])[0])
  model = KneserNey.fit(splits['train'], order, vocab.size, boundary)
  prob = reference_kneser_ney(splits['train'], vocab.size, order, boundary)
  test = [int(w) for w in splits['test'][:60]]
  stream = [boundary] * (order - 1) + test
  expected = [math.log(prob(stream[t:t + order - 1], stream[t + order - 1], order))
              for t in range(len(test))]
  np.testing.assert_allclose(model.log_prob_split(np.array(test)), expected, rtol=1e-10)


@pytest.mark.parametrize('order', [3, 4, 5])
def test_kneser_ney_sums_to_one_for_random_contexts(tiny_corpus, order):
  vocab = tiny_corpus.vocab
  boundary = int(vocab.encode([TEXT_END])[0])
  model = KneserNey.fit(tiny_corpus.splits['train'], order, vocab.size, boundary)
  rng = np.random.default_rng(order)
  seen = np.lib.stride_tricks.sliding_window_view(tiny_corpus.splits['train'], order - 1)
  contexts = np.concatenate([rng.integers(0, vocab.size, (20, order - 1)),  # Mostly unseen.
                             seen[rng.integers(0, len(seen), 20)]])
  log_probs = model.log_probs(contexts)
  assert np.all(np.isfinite(log_probs))
  np.testing.assert_allclose(np.exp(log_probs).sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize('order', [2, 4])
def test_full_distributions_are_the_references_for_every_word(tiny_corpus, order, monkeypatch):
  """log_probs puts each context's seen n-grams into a row of the vocabulary
  (NgramTable.next_grams), blocks of 3 contexts at a time here."""
  vocab = tiny_corpus.vocab
  boundary = int(vocab.encode([TEXT_END])[0])
  train = tiny_corpus.splits['train']
  model = KneserNey.fit(train, order, vocab.size, boundary)
  prob = reference_kneser_ney(train, vocab.size, order, boundary)
  rng = np.random.default_rng(order)
  seen = np.lib.stride_tricks.sliding_window_view(train, order - 1)
  contexts = np.concatenate([rng.integers(0, vocab.size, (2, order - 1)),
                             seen[rng.integers(0, len(seen), 5)]])
  monkeypatch.setattr(kneser_ney, 'BLOCK_ROWS', 3 * vocab.size)
  log_probs = model.log_probs(contexts)
  expected = [[math.log(prob(list(context), word, order)) for word in range(vocab.size)]
              for context in contexts]
  np.testing.assert_allclose(log_probs, expected, rtol=1e-10)


def test_table_refuses_ids_outside_the_vocabulary():
  with pytest.raises(ValueError, match='vocabulary size'):
    NgramTable.build(np.array([0, 5]), 2, vocab_size=5, boundary_id=0)
  with pytest.raises(ValueError, match='empty'):
    NgramTable.build(np.array([], np.int32), 2, vocab_size=5, boundary_id=0)


# --- the paper's interpolated trigram ---------------------------------------------------

def test_frequency_bins_by_hand():
  counts = np.array([0, 1, 2, 3, 4, 7, 8, 1000, 10 ** 9])
  assert frequency_bins(counts, num_bins=12).tolist() == [0, 1, 2, 2, 3, 3, 4, 10, 11]


def fit_trigram(corpus, **kwargs):
  boundary = int(corpus.vocab.encode([TEXT_END])[0])
  return InterpolatedTrigram.fit(corpus.splits['train'], corpus.splits['valid'],
                                 corpus.vocab.size, boundary, **kwargs), boundary


def test_trigram_components_are_relative_frequencies(tiny_corpus):
  model, boundary = fit_trigram(tiny_corpus)
  train = [boundary, boundary] + [int(w) for w in tiny_corpus.splits['train']]
  uni = collections.Counter(train[2:])
  bi = collections.Counter(zip(train[1:-1], train[2:]))
  tri = collections.Counter(zip(train[:-2], train[1:-1], train[2:]))
  bi_context = collections.Counter(train[1:-1])
  tri_context = collections.Counter(zip(train[:-2], train[1:-1]))
  test = [boundary, boundary] + [int(w) for w in tiny_corpus.splits['test']]
  windows = np.array([test[t:t + 3] for t in range(len(test) - 2)])
  got = np.exp(model.component_log_probs(windows))
  for row, (u, v, w) in zip(got, windows.tolist()):
    p1 = uni[w] / (len(train) - 2)
    p2 = bi[v, w] / bi_context[v] if bi_context[v] else p1
    p3 = tri[u, v, w] / tri_context[u, v] if tri_context[u, v] else p2
    np.testing.assert_allclose(row, [1 / tiny_corpus.vocab.size, p1, p2, p3], rtol=1e-12)
  bins = model.bins(windows)
  expected = [0 if not tri_context[u, v] else min(1 + int(math.log2(tri_context[u, v])), 15)
              for u, v, _ in windows.tolist()]
  assert bins.tolist() == expected


def test_trigram_full_distributions_score_every_word_as_its_window(tiny_corpus):
  """log_probs' rows of the vocabulary against log_prob_windows, window by window (whose
  components the test above checks against counts)."""
  model, _ = fit_trigram(tiny_corpus, num_bins=4)
  rng, size = np.random.default_rng(1), tiny_corpus.vocab.size
  seen = np.lib.stride_tricks.sliding_window_view(tiny_corpus.splits['train'], 2)
  contexts = np.concatenate([rng.integers(0, size, (2, 2)), seen[rng.integers(0, len(seen), 5)]])
  windows = np.array([[*context, word] for context in contexts for word in range(size)])
  np.testing.assert_array_equal(model.log_probs(contexts),
                                model.log_prob_windows(windows).reshape(len(contexts), size))


def test_trigram_sums_to_one_and_em_never_lowers_validation_likelihood(tiny_corpus):
  model, _ = fit_trigram(tiny_corpus, num_bins=4)
  history = np.array(model.fitted.log_likelihoods)
  assert model.fitted.iterations >= 2
  assert np.all(np.diff(history) >= -1e-9)
  assert history[-1] > history[0]
  np.testing.assert_allclose(model.weights.sum(axis=1), 1.0)
  rng = np.random.default_rng(0)
  contexts = rng.integers(0, tiny_corpus.vocab.size, (30, 2))
  np.testing.assert_allclose(np.exp(model.log_probs(contexts)).sum(axis=1), 1.0, atol=1e-12)
  valid = tiny_corpus.splits['valid']
  assert perplexity(model.log_prob_split(valid)) == pytest.approx(
      math.exp(-history[-1] / len(valid)))
