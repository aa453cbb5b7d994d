"""The next-word reader (nplm.use.next_words): words pushed one at a time read as the same words
given in the prompt, and a recurrent model's step compiled once per batch of prompts (the
carry it starts from placed where the step leaves every later one)."""

import jax
import numpy as np

from nplm import parallel
from nplm.config import Config
from nplm.lm import build_language_model
from nplm.training.families import feed_of
from nplm.use import next_words


def test_a_recurrent_reader_compiles_its_step_once_and_pushed_words_read_as_the_prompt(
    tiny_corpus):
  config = Config(workdir='unused', model='lstm', feature_size=8, hidden_size=12)
  lm = build_language_model(config, tiny_corpus.vocab.counts)
  feed = feed_of(lm.model)(config, lm, {'valid': tiny_corpus.splits['valid']},
                           tiny_corpus.boundary_id, parallel.make_mesh(''))
  reader = next_words.NextWords(lm, feed.create_state(jax.random.key(0)).params,
                                tiny_corpus.boundary_id)
  compiled = next_words._recurrent_step._cache_size()  # pylint: disable=protected-access
  pushed, _ = reader.next(reader.push(reader.start([[1, 2], [3, 4]]), np.array([5, 6])))
  assert next_words._recurrent_step._cache_size() == compiled + 1  # pylint: disable=protected-access
  given, _ = reader.next(reader.start([[1, 2, 5], [3, 4, 6]]))
  np.testing.assert_array_equal(pushed, given)
