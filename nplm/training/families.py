"""The feed of each model family: a model's `family` names it (nplm.models)."""

from nplm.training.feed import Feed
from nplm.training.stream_feed import StreamFeed
from nplm.training.window_feed import WindowFeed
from nplm.training.word2vec_feed import Word2VecFeed

FEEDS = {'windows': WindowFeed, 'streams': StreamFeed, 'word2vec': Word2VecFeed}


def feed_of(model) -> type[Feed]:
  """The feed class of a model (or model class): n-gram windows (feed-forward), BPTT streams
  (recurrent), or word2vec's windows on both sides."""
  return FEEDS[model.family]
