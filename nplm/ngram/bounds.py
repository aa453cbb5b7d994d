"""What a Kneser-Ney model of order n will take, said before the work rather than found after
it (nplm ngram): its memory, bounded from the tokens and the order before counting and from
each order's count of distinct n-grams as it comes, and the size of its ARPA file.

Memory, in 8-byte words (numpy int64 and float64):
  the model      MODEL_WORDS per distinct k-gram of every order: its code and count
                 (NgramTable), its adjusted count and, as a context, its total and γ
                 (KneserNey)
  counting       COUNTING_WORDS per token of the padded training split while one order is
                 counted (its codes, ids, np.unique's sorted copy, order and inverse)
  scoring        a split's tokens BLOCK_ROWS at a time (KneserNey.log_prob_windows): a few
                 arrays of a block, and the split's log-probabilities
A k-gram of the stream extends a (k-1)-gram that ends one token later, so each order has at
least as many distinct n-grams as the one below, less the k-1 that start in the padding:
after counting order k, the orders still to count have at least that many each.

The ARPA file (nplm.ngram.arpa): one line per listed n-gram: log10 p (at most 14
characters), the k words and their spaces, a backoff below the highest order.
"""

WORD = 8
MODEL_WORDS = 5
COUNTING_WORDS = 8
NUMBER_CHARS = 14  # '-1.2345678e-05': log10 p or a backoff, as arpa.py writes them ('.8g').


def model_bytes(grams: list[int]) -> int:
  """The fitted model's arrays, for `grams[k-1]` distinct k-grams."""
  return WORD * MODEL_WORDS * sum(grams)


def work_bytes(train_tokens: int, order: int, longest_split: int) -> int:
  """What counting or scoring holds besides the model (the larger of the two)."""
  counting = WORD * COUNTING_WORDS * (train_tokens + order - 1)
  scoring = WORD * 2 * longest_split  # Its windows' log-probabilities, and their sum's copy.
  return max(counting, scoring)


def at_most(vocab_size: int, train_tokens: int, order: int, longest_split: int) -> int:
  """Before counting: every k-gram (k > 1) of the padded split distinct."""
  grams = [min(vocab_size, train_tokens)] + [train_tokens + order - 1] * (order - 1)
  return model_bytes(grams) + work_bytes(train_tokens, order, longest_split)


def at_least(grams: list[int], order: int, train_tokens: int, longest_split: int) -> int:
  """After counting orders 1 … len(grams): the higher orders at least as many as the last,
  less those that start in the padding."""
  counted = len(grams)
  rest = [max(0, grams[-1] - k) for k in range(counted, order)]
  return model_bytes(grams + rest) + work_bytes(train_tokens, order, longest_split)


def arpa_bytes(grams: list[int], vocab_size: int, word_chars: float,
               vocab_chars: float) -> int:
  """The ARPA file's size for `grams[k-1]` distinct k-grams: `word_chars` the mean length
  of a word of the training stream, `vocab_chars` of a vocabulary word (the unigrams list
  every one)."""
  order, total = len(grams), 0.0
  for k, count in enumerate(grams, start=1):
    listed, chars = (vocab_size, vocab_chars) if k == 1 else (count, word_chars)
    backoff = NUMBER_CHARS + 1 if k < order else 0
    total += listed * (NUMBER_CHARS + 1 + k * (chars + 1) + backoff)
  return int(total)
