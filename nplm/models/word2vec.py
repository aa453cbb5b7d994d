"""word2vec's two models up to their output layer: CBOW and skip-gram (Mikolov et al. 2013a,
section 3; trained as in Mikolov et al. 2013b).

Both read a window of ±c words around a position t of the text, both sides, and neither is a
language model: they learn word vectors C(w) from the words around each word.
- CBOW (continuous bag of words): hidden = the mean of C(w_{t+j}) over the context words,
  0 < |j| <= b; the head predicts w_t from it.
- Skip-gram: hidden = C(w_t); the head predicts each context word w_{t+j}, 0 < |j| <= b,
  one example per (w_t, w_{t+j}) pair.
The window radius b is drawn per position in training (nplm.training.word2vec_feed), so nearer
words weigh more (Mikolov et al. 2013a, section 3.2).

A context is [batch, 2c] word ids, w_{t-c} … w_{t-1}, w_{t+1} … w_{t+c}, with ABSENT where
no word is: beyond the drawn radius, or beyond the split's ends. The models know how their
examples are made from such windows (`examples`), and what their own exact prediction of a
position is (`token_log_probs`), so the feed is the same for both.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from nplm import heads, sparse_rows
from nplm.precision import exact
from nplm.knobs import Knob

ABSENT = -1  # A context slot without a word.


def _initial_vectors(key, shape, dtype=jnp.float32):
  """Uniform in ±0.5/m, as the word2vec tool and gensim start C: small, so that the first
  updates come from the output side."""
  return jax.random.uniform(key, shape, dtype, -0.5 / shape[1], 0.5 / shape[1])


def chunk_positions(config) -> int:
  """The positions of a step updated together (--chunk_positions, at most the batch)."""
  chunk = config.chunk_positions
  return chunk if 0 < chunk < config.batch_size else config.batch_size


class _Word2Vec(nn.Module):
  """What CBOW and skip-gram share: the vectors C, the knobs, the start-up line."""
  vocab_size: int
  feature_size: int  # m: the width of C(w) and of the hidden vector

  language_model = False  # It predicts a word from both sides: no probability of a text.
  family = 'word2vec'  # Its feed (nplm.training.families).
  recurrent = False
  # window, subsample: read by the word2vec feed too (nplm.training.word2vec_feed).
  knobs = {
      'feature_size': Knob(30, 'm: the size of each word feature vector C(w) (the embedding).'),
      'window': Knob(5, 'c, the largest window radius; each position draws its radius from '
                        '1 … c in training.'),
      'subsample': Knob(0.0, 't, frequent words are kept with probability (√(f/tN) + 1)·tN/f '
                             'each epoch (Mikolov et al. 2013b; word2vec: 1e-3); 0 = keep '
                             'every token.'),
      'chunk_positions': Knob(128, 'Positions whose updates are summed from one reading of the '
                                   'vectors (skip-gram with negative sampling: as many pairs '
                                   'as they hold on average); a step applies its --batch_size '
                                   'positions this many at a time, one chunk after another, as '
                                   'word2vec updates one after another (0: the largest chunk '
                                   'that trains stably, for an accelerator). A chunk of 128 '
                                   "stays in a CPU's cache."),
  }
  # What word2vec's own update (nplm.training.word2vec_update) trains: (knob, its value).
  trained_by = (('optimizer', 'sgd'), ('weight_decay', 0.0), ('clip_norm', 0.0),
                ('dtype', 'float32'))

  @classmethod
  def config_errors(cls, config) -> list[str]:
    checks = [
        (config.window >= 1, f'--window must be at least 1, got {config.window}'),
        (config.subsample >= 0, f'--subsample must be 0 (off) or positive, got '
         f'{config.subsample}'),
        (config.chunk_positions >= 0 and config.batch_size % chunk_positions(config) == 0,
         f'--chunk_positions must be 0 (the whole batch), at least --batch_size or divide it '
         f'({config.batch_size}), got {config.chunk_positions}'),
        (heads.serves_word2vec(config.head),
         f'--model={config.model} trains by word2vec\'s own update, with '
         f'{" or ".join(f"--head={name}" for name in heads.serving_word2vec())}, not '
         f'--head={config.head} (e.g. --flagfile={config.model}_ns)'),
    ]
    checks += [(getattr(config, knob) == value,
                f'--model={config.model} trains by word2vec\'s own SGD update (a rate per '
                f'pair or position, no decay or clipping): set --{knob}={value}, not '
                f'--{knob}={getattr(config, knob)} (e.g. --flagfile={config.model}_ns)')
               for knob, value in cls.trained_by]
    return [message for ok, message in checks if not ok]

  @classmethod
  def describe(cls, config) -> str:
    subsample = f', subsample {config.subsample:g}' if config.subsample else ''
    return (f'{config.model} (m={config.feature_size}, window {config.window}{subsample}'
            f'; its perplexities are exp(-mean '
            f'{cls.evaluated.format(c=config.window)}), not a language model\'s)')

  @classmethod
  def from_config(cls, config, vocab_size: int) -> '_Word2Vec':
    return cls(vocab_size=vocab_size, feature_size=config.feature_size)

  @property
  def output_width(self) -> int:
    return self.feature_size

  def update_words(self, config, head, batch: int, examples: int) -> int:
    """Words word2vec's update holds for `batch` positions of `examples` each
    (nplm.training.word2vec_update): the batch's examples (context ids, their rows, labels
    and counts), and one chunk's vectors read, output rows read and their updates."""
    kind, *read = head.word2vec_output()[1]
    rows = read[0].shape[1] if kind == 'tree' else read[1] + 1  # A path's nodes; k + 1.
    chunk, window = min(chunk_positions(config), batch), config.window
    return (batch * (4 * window + 3 * examples * rows)
            + chunk * self.feature_size * (4 * window + 2 * examples * rows + examples))

  def vectors(self, words: jnp.ndarray) -> jnp.ndarray:
    """C(w) of each word; an ABSENT slot reads row 0, which its caller leaves out."""
    table = sparse_rows.Embed(self.vocab_size, self.feature_size,
                              embedding_init=_initial_vectors, name='C')
    return table(jnp.where(words == ABSENT, 0, words))


class CBOW(_Word2Vec):
  """Context [batch, 2c] (ABSENT where no word) -> the mean of its words' C, [batch, m]."""

  evaluated = 'log p(w_t | the ±{c} words around it)'  # What evaluation scores, per token.

  @nn.compact
  def __call__(self, context: jnp.ndarray, train: bool = False) -> jnp.ndarray:
    del train  # No dropout.
    present = (context != ABSENT).astype(jnp.float32)
    vectors = self.vectors(context)
    summed = jnp.einsum('bj,bjm->bm', present.astype(vectors.dtype), vectors)
    # A position with no context word at all (a one-token split) gets the zero vector.
    return summed / jnp.maximum(present.sum(axis=1, keepdims=True), 1.0).astype(summed.dtype)

  @staticmethod
  def examples(windows: jnp.ndarray, centers: jnp.ndarray, mask: jnp.ndarray):
    """(context, targets, mask) of the training examples: one per position."""
    return windows, centers, mask

  def activation_words(self, config, head, batch: int, evaluated: int,
                       shards: int) -> tuple[int, int]:
    """(word2vec's update in training, evaluation) in words (nplm.training.memory): in
    evaluation, per position the 2c context vectors, their mean and the head's scores."""
    _, head_eval = heads.step_scores(head, config.eval_batch_size, shards)
    m = self.feature_size
    return (self.update_words(config, head, batch, examples=1),
            evaluated * (2 * config.window * m + m + head_eval))

  @exact
  def token_log_probs(self, head, windows: jnp.ndarray, centers: jnp.ndarray,
                      whole_distribution: bool = False) -> jnp.ndarray:
    """log p(w_t | its context) per position, [batch]: the head's exact log_prob (one target
    per position, so `whole_distribution` changes nothing)."""
    del whole_distribution
    return head.log_prob(self(windows), centers)


class SkipGram(_Word2Vec):
  """The center word [batch, 1] -> its vector C(w_t), [batch, m]."""

  evaluated = 'over tokens of the mean over their ±{c} words of log p(w_{{t+j}} | w_t)'

  @nn.compact
  def __call__(self, center: jnp.ndarray, train: bool = False) -> jnp.ndarray:
    del train  # No dropout.
    return self.vectors(center[:, 0])

  @staticmethod
  def examples(windows: jnp.ndarray, centers: jnp.ndarray, mask: jnp.ndarray):
    """(context, targets, mask) of the training examples: one per (w_t, w_{t+j}) pair,
    [batch·2c]; the pairs of absent context words are masked."""
    pairs = windows.shape[1]
    context = jnp.repeat(centers, pairs)[:, None]
    targets = jnp.where(windows == ABSENT, 0, windows).reshape(-1)
    present = (windows != ABSENT).astype(mask.dtype) * mask[:, None]
    return context, targets, present.reshape(-1)

  def activation_words(self, config, head, batch: int, evaluated: int,
                       shards: int) -> tuple[int, int]:
    """(word2vec's update in training, evaluation) in words (nplm.training.memory): in
    evaluation, per position one full distribution (heads with output rows: log_probs,
    whole_distribution) or the 2c pairs' scores."""
    pairs = 2 * config.window
    if head.output_rows:
      per_position = heads.step_scores(head, None, shards)[1] + pairs
    else:
      per_position = pairs * heads.step_scores(head, config.eval_batch_size, shards)[1]
    return (self.update_words(config, head, batch, examples=pairs),
            evaluated * (self.feature_size + per_position))

  @exact
  def token_log_probs(self, head, windows: jnp.ndarray, centers: jnp.ndarray,
                      whole_distribution: bool = False) -> jnp.ndarray:
    """The mean of log p(w_{t+j} | w_t) over the context words of each position, [batch]
    (0 where there is none: a one-token split), all exact. `whole_distribution`: the head's
    full distribution once per position, read at each context word (2c times fewer scores
    where a head's log_prob normalizes over every word anyway); else its log_prob per pair
    (a tree reads only each target's path)."""
    present = windows != ABSENT
    targets = jnp.where(present, windows, 0)
    hidden = self(centers[:, None])
    if whole_distribution:
      pair_log_probs = jnp.take_along_axis(head.log_probs(hidden), targets, axis=1)
    else:
      pairs = jnp.repeat(hidden, windows.shape[1], axis=0)
      pair_log_probs = head.log_prob(pairs, targets.reshape(-1)).reshape(windows.shape)
    total = jnp.sum(jnp.where(present, pair_log_probs, 0.0), axis=1)
    return total / jnp.maximum(present.sum(axis=1), 1)
