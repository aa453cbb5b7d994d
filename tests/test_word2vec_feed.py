"""word2vec's feed before the update (nplm.training.word2vec_feed): subsampling (the tool's
keep probabilities, each epoch's kept tokens) and the dynamic window (its radii, and windows
that never cross a split's ends), against numpy and counts."""

import math

import jax
import numpy as np
import pytest

from nplm.config import Config
from nplm.lm import build_language_model
from nplm.training.word2vec_feed import Word2VecFeed
from nplm.training.word2vec_windows import (Subsampler, context_windows, keep_probabilities,
                                           padded_stream, window_radii)

ABSENT = -1


def numpy_context(ids, t: int, radius: int) -> list[int]:
  """The words within `radius` of position t, left then right, none past the split's ends."""
  return [int(ids[t + j]) for j in [*range(-radius, 0), *range(1, radius + 1)]
          if 0 <= t + j < len(ids)]


# --- subsampling ------------------------------------------------------------------------

def test_keep_probabilities_follow_the_word2vec_formula():
  t, total = 1e-3, 100_000  # tN = 100
  counts = np.array([40_000, 25_000, 400, 261, 100, 5, 0, 34_209], np.float64)
  counts[-1] = total - counts[:-1].sum()
  got = keep_probabilities(counts, t)
  # (√(f/tN) + 1)·tN/f by hand: f = 400 → (2 + 1)/4; f = 100 → 2, capped at 1.
  assert got[2] == pytest.approx(0.75)
  assert got[4] == 1.0 and got[5] == 1.0 and got[6] == 1.0
  for f, p in zip(counts, got):
    if f > 0:
      assert p == pytest.approx(min(1.0, (math.sqrt(f / 100) + 1) * 100 / f))
  assert np.all(keep_probabilities(counts, 0.0) == 1.0)


def test_each_token_is_kept_with_its_probability_and_every_epoch_keeps_as_many():
  rng = np.random.default_rng(0)
  ranks = np.arange(1, 501)
  ids = rng.choice(500, size=200_000, p=(1 / ranks) / np.sum(1 / ranks)).astype(np.int32)
  subsampler = Subsampler(ids, 1e-3)
  counts = np.bincount(ids, minlength=500).astype(np.float64)
  tn = 1e-3 * len(ids)
  keep = np.minimum(1.0, (np.sqrt(counts / tn) + 1) * tn / np.maximum(counts, 1))
  expected = keep[ids].sum()
  epochs, kept_per_word = 8, np.zeros(500)
  for epoch in range(epochs):
    mask = subsampler.keep_mask(np.random.default_rng([7, epoch]))
    assert mask.sum() in (math.floor(expected), math.ceil(expected))
    assert mask.sum() <= subsampler.max_kept
    kept_per_word += np.bincount(ids[mask], minlength=500)
  share = kept_per_word / np.maximum(counts * epochs, 1)
  trials = counts * epochs
  frequent = trials >= 2000
  assert frequent.sum() > 20 and keep[frequent].min() < 0.2  # Truly thinned words.
  tolerance = 5 * np.sqrt(keep * (1 - keep) / np.maximum(trials, 1)) + 1e-9
  assert np.all(np.abs(share - keep)[frequent] <= tolerance[frequent])
  assert np.all(share[keep == 1.0] == 1.0)
  again = subsampler.keep_mask(np.random.default_rng([7, 3]))
  np.testing.assert_array_equal(again, subsampler.keep_mask(np.random.default_rng([7, 3])))
  assert not np.array_equal(again, subsampler.keep_mask(np.random.default_rng([7, 4])))


def test_an_epoch_stream_is_the_kept_tokens_in_order_between_absent_ends():
  rng = np.random.default_rng(1)
  ids = rng.choice(30, size=3000, p=np.arange(30, 0, -1) / 465).astype(np.int32)
  config = Config(workdir='unused', model='cbow', head='softmax', feature_size=4, window=2,
                  subsample=2e-3, batch_size=64)
  lm = build_language_model(config, np.bincount(ids, minlength=30))
  feed = Word2VecFeed(config, lm, {'train': ids}, boundary_id=0)
  stream, order = feed.epoch_stream(epoch=2)
  kept = stream[2:][stream[2:] != ABSENT]
  assert len(kept) < 0.9 * len(ids) and len(stream) == feed.subsampler.max_kept + 4
  assert np.all(stream[:2] == ABSENT) and np.all(stream[2 + len(kept):] == ABSENT)
  position = iter(range(len(ids)))  # `kept` is a subsequence of the split, in order.
  assert all(any(ids[i] == word for i in position) for word in kept)
  np.testing.assert_array_equal(np.sort(order), np.arange(len(kept)))
  assert feed.steps_per_epoch == math.ceil(feed.subsampler.max_kept / 64)


# --- windows ----------------------------------------------------------------------------

def test_radii_are_uniform_from_1_to_the_window():
  radii = np.asarray(window_radii(jax.random.key(0), 60_000, 5))
  counts = np.bincount(radii, minlength=7)
  assert counts[0] == 0 and counts[6] == 0
  chi_square = np.sum((counts[1:6] - 12_000) ** 2 / 12_000)
  assert chi_square < 18.47  # The 0.999 quantile of χ² with 4 degrees of freedom.


def test_windows_keep_to_each_radius_and_never_cross_the_ends_of_a_split():
  rng = np.random.default_rng(2)
  ids = rng.integers(0, 50, 17).astype(np.int32)
  window = 4
  radii = rng.integers(1, window + 1, len(ids))
  windows, centers = context_windows(padded_stream(ids, window, len(ids)),
                                     np.arange(len(ids)), radii, window)
  windows = np.asarray(windows)
  np.testing.assert_array_equal(centers, ids)
  for t in range(len(ids)):
    want = [int(ids[t + j]) if abs(j) <= radii[t] and 0 <= t + j < len(ids) else ABSENT
            for j in [*range(-window, 0), *range(1, window + 1)]]
    np.testing.assert_array_equal(windows[t], want)
    assert sorted(windows[t][windows[t] != ABSENT]) == sorted(numpy_context(ids, t, radii[t]))
