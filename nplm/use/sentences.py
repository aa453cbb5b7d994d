"""Typed sentences scored by a trained model, many at once: log p of each token given the
tokens before it, and of the sentence's end.

Each sentence is read alone, as the start of a split: a model with a finite context of c
tokens (feed-forward, Transformer, n-gram) reads c boundary tokens first, a recurrent model
starts from h_0 = 0 with the boundary token as its first input. A sentence is tokenized as
the model's dataset was (its tokenizer: Brown's punctuation is a token of its own, "said." is
"said ."); a token outside the vocabulary is scored as `<unk>`, the class it was trained as,
times the model's probability of its spelling among the strings outside the vocabulary
(the open vocabulary, nplm.ngram.spelling): log_prob is the open figure, closed_log_prob the
one that charges an unknown word p(<unk> | h) alone.
Where the dataset ends its sentences with a token (`<eos>` after every line of a text
dataset), that token is scored too, as KenLM's query scores </s>; Brown's sentences have none.

Many sentences share one compiled program, BATCH_TOKENS tokens at a time (a large file is
streamed). A finite-context model scores each token after its c tokens, a sentence's first
behind c boundary tokens (which restart the context exactly as a split's start does), by its
window scoring (`window_log_probs`): --eval_batch_size tokens a call, the last call's padded
to a power of two. A recurrent model reads a batch as rows, sentences of one length bucket
(a power of two) each, padded at the end, every row from h_0 = 0: padding after a sentence
cannot change what came before it; the head then scores the sentences' own positions only.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Iterator, Sequence

import jax
import numpy as np

from nplm.data.vocab import Vocabulary
from nplm.errors import ConfigError
from nplm.use.open_vocabulary import spelling_log_probs

BATCH_TOKENS = 1 << 16  # Tokens (with a finite context's boundary tokens) scored together.
_SMALLEST_BUCKET = 8  # The shortest piece (or row) length compiled.


@dataclasses.dataclass(frozen=True)
class TokenScore:
  word: str  # As typed (after tokenization); the end mark where a sentence end is scored.
  token: str  # The vocabulary's token the model read: `word`, or <unk> outside the vocabulary.
  # Natural log p(word | the earlier tokens of the sentence), open: ln p(<unk> | ...) + ln q(word)
  # for a word read as <unk>.
  log_prob: float
  oov: bool  # The model read it as <unk>.
  spelling_log_prob: float  # ln q(word) of an unknown word, 0 for the others.


@dataclasses.dataclass(frozen=True, eq=False)
class SentenceScore:
  """A sentence's score; its per-token details are built only when asked for (`tokens`)."""
  text: str
  log_prob: float  # ln p(w_1 … w_n [end]) = Σ_t ln p(w_t | w_1 … w_{t-1}) (chain rule), open.
  num_tokens: int  # Tokens scored, the end mark included.
  num_oovs: int  # Tokens read as <unk>.
  closed_log_prob: float  # log_prob with each unknown word charged p(<unk> | h) alone.
  words: Sequence[str] = dataclasses.field(repr=False)
  ids: np.ndarray = dataclasses.field(repr=False)
  token_log_probs: np.ndarray = dataclasses.field(repr=False)  # Open, per token.
  spelling_log_probs: np.ndarray = dataclasses.field(repr=False)  # ln q(word), or 0.
  vocab: Vocabulary = dataclasses.field(repr=False)

  @property
  def log10_prob(self) -> float:
    return self.log_prob / math.log(10)

  @property
  def perplexity(self) -> float:
    """exp(-mean ln p) per token: the split perplexity's formula on this one sentence."""
    return math.exp(-self.log_prob / self.num_tokens)

  @property
  def tokens(self) -> tuple[TokenScore, ...]:
    unk_id = self.vocab.unk_id
    return tuple(TokenScore(word, token, float(log_prob), int(i) == unk_id, float(spelt))
                 for word, token, i, log_prob, spelt
                 in zip(self.words, self.vocab.decode(self.ids), self.ids,
                        self.token_log_probs, self.spelling_log_probs))

  def as_dict(self, tokens: bool = True) -> dict:
    """The numbers for JSON; with `tokens`, each token's word, token read, ln p and oov."""
    numbers = {'text': self.text, 'log_prob': self.log_prob, 'log10_prob': self.log10_prob,
               'closed_log_prob': self.closed_log_prob, 'num_tokens': self.num_tokens,
               'num_oovs': self.num_oovs, 'perplexity': self.perplexity}
    if tokens:
      numbers['tokens'] = [dataclasses.asdict(t) for t in self.tokens]
    return numbers


def score_sentences(model, sentences: Sequence[str]) -> list[SentenceScore]:
  """Every sentence scored on its own, each from the start-of-split context, in order."""
  return list(scored(model, sentences))


def rank_sentences(model, sentences: Sequence[str]) -> list[SentenceScore]:
  """The sentences' scores, the most probable first (ties in the order given)."""
  return sorted(score_sentences(model, sentences), key=lambda score: -score.log_prob)


def scored(model, sentences: Iterable[str],
           batch_tokens: int = BATCH_TOKENS) -> Iterator[SentenceScore]:
  """The scores of a stream of sentences, in order, about `batch_tokens` tokens scored at a
  time. Scores are held back until some token of the input is in the vocabulary: input that
  has none (another language, another tokenization) is refused rather than scored."""
  return scored_tokens(model, ((text, model.tokenizer.tokens(text)) for text in sentences),
                       batch_tokens)


def scored_tokens(model, sentences: Iterable[tuple[str, Sequence[str]]],
                  batch_tokens: int = BATCH_TOKENS, all_unknown_refused: bool = True,
                  ended: bool = True) -> Iterator[SentenceScore]:
  """`scored` of sentences given as (text, its tokens): a sentence built token by token (a
  correction's candidates), scored as those tokens whatever its text reads as. Input with no
  word in the vocabulary is scored too where not `all_unknown_refused` (one sentence among
  a file's: a correction leaves it as it is). Not `ended`: the beginnings of sentences, no
  end mark scored after them (a prefix being typed)."""
  model.require_language_model()
  held, known = [], not all_unknown_refused
  for texts, words, ids, lengths, any_known in _batches(model, sentences, batch_tokens,
                                                        ended):
    scores = _scored_batch(model, texts, words, ids, lengths)
    known = known or any_known
    if not known:
      held.extend(scores)
      continue
    yield from held
    held = []
    yield from scores
  if held:
    raise ConfigError("none of the words of the input is in the model's vocabulary (every "
                      'one would be read as <unk>): a text in another language or '
                      'tokenization?')


def _batches(model, sentences: Iterable[tuple[str, Sequence[str]]], batch_tokens: int,
             ended: bool = True):
  """(texts, tokens per sentence, ids of all of them with the end marks where `ended`,
  lengths, whether a typed token is in the vocabulary) for each run of whole sentences that
  fills at most `batch_tokens` (a longer sentence alone), each sentence counted with its c
  boundary tokens where the context is finite."""
  vocab, end = model.vocab, model.sentence_end if ended else None
  padding = model.context_length or 0
  texts, words, count = [], [], 0
  for number, (text, tokens) in enumerate(sentences, 1):
    if not tokens:
      raise ConfigError(f'sentence {number} has no words to score ({text!r})')
    if end is not None:
      tokens = [*tokens, end]
    if texts and count + len(tokens) + padding > batch_tokens:
      yield _encoded(vocab, end, texts, words)
      texts, words, count = [], [], 0
    texts.append(text)
    words.append(tokens)
    count += len(tokens) + padding
  if texts:
    yield _encoded(vocab, end, texts, words)


def _encoded(vocab, end, texts, words):
  lengths = np.array([len(w) for w in words])
  ids = vocab.encode([token for sentence in words for token in sentence])
  typed = ids if end is None else np.delete(ids, np.cumsum(lengths) - 1)
  return texts, words, ids, lengths, bool((typed != vocab.unk_id).any())


def _scored_batch(model, texts, words, ids, lengths) -> list[SentenceScore]:
  closed = (_window_log_probs(model, ids, lengths) if model.context_length is not None
            else _row_log_probs(model, ids, lengths))
  spelt = spelling_log_probs(model, [token for sentence in words for token in sentence], ids)
  log_probs = closed + spelt
  starts = _starts(lengths)
  totals, closed_totals = np.add.reduceat(log_probs, starts), np.add.reduceat(closed, starts)
  oovs = np.add.reduceat((ids == model.vocab.unk_id).astype(np.int64), starts)
  return [SentenceScore(text, float(total), int(length), int(oov), float(closed_total),
                        sentence_words, ids[start:start + length],
                        log_probs[start:start + length], spelt[start:start + length],
                        model.vocab)
          for text, total, length, oov, closed_total, sentence_words, start
          in zip(texts, totals, lengths, oovs, closed_totals, words, starts)]


def _starts(lengths: np.ndarray) -> np.ndarray:
  """Where each sentence starts among the concatenated tokens."""
  return np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)


def _buckets(lengths) -> np.ndarray:
  """The power of two at or above each length (at least _SMALLEST_BUCKET): few shapes
  compile."""
  powers = np.ceil(np.log2(np.maximum(np.asarray(lengths), 1))).astype(np.int64)
  return np.maximum(_SMALLEST_BUCKET, np.left_shift(1, powers))


# --- a finite context: each token after its c tokens, a sentence's behind c boundary tokens ----

def _window_log_probs(model, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
  """ln p of each id (sentences of `lengths`, concatenated), each after its c tokens: the
  sentence's own, behind c boundary tokens (nplm.use.trained's window_log_probs). Only the
  sentences' own positions are scored, not the boundary tokens nor a stream's padding."""
  c = model.context_length
  # Token k of sentence s sits at s + 1 times c, plus its place among the ids.
  positions = np.arange(len(ids)) + np.repeat(np.arange(1, len(lengths) + 1) * c, lengths)
  stream = np.full(positions[-1] + 1, model.boundary_id, np.int32)
  stream[positions] = ids
  return model.window_log_probs(stream[positions[:, None] + np.arange(-c, 0)], ids)


# --- a recurrent model: rows from h_0 = 0, padded to a length bucket ----------------------------

@functools.partial(jax.jit, static_argnames='lm')
def _rows_hidden(lm, variables, words, carry):
  """What the head reads after each of the rows' words [R·L, H], row r read on from its
  state carry[:, :, r]; compiled once per (rows, length) shape."""
  return lm.apply(variables, words, carry, method=lm.hidden)[0]


@functools.partial(jax.jit, static_argnames='lm')
def _positions_scored(lm, variables, hidden, targets):
  """ln p of each target [N] from its hidden state [N, H]; compiled once per N."""
  return lm.apply(variables, hidden, targets, method=lm.head_log_prob)


@functools.partial(jax.jit, static_argnames='lm')
def _rows_scored(lm, variables, words, carry, own, targets):
  """_rows_hidden then _positions_scored at the positions `own` [N], in one call."""
  return _positions_scored(lm, variables, _rows_hidden(lm, variables, words, carry)[own],
                           targets)


def _row_log_probs(model, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
  """ln p of each id, each sentence a row read from h_0 = 0, the boundary token its first
  input."""
  sentences = np.split(ids, np.cumsum(lengths)[:-1])
  inputs = [np.concatenate([[model.boundary_id], sentence])[:len(sentence)]
            for sentence in sentences]  # Each target's input: the token before it.
  start = np.asarray(model.lm.model.initial_state(1))[:, :, 0]
  return np.concatenate(rows_log_probs(model, inputs, sentences, [start] * len(sentences)))


def rows_log_probs(model, inputs: Sequence[np.ndarray], targets: Sequence[np.ndarray],
                   carries: Sequence[np.ndarray]) -> list[np.ndarray]:
  """Closed ln p of each row's targets, row r reading inputs[r] (one per target) on from
  carries[r], a recurrent model's state ([layers, parts, H]: h_0 = 0 at a sentence's start,
  nplm.use.next_words' `carries` within one). The rows are read in groups of one length
  bucket, a power of two of them holding at most --eval_batch_size tokens (a longer row
  alone), padded at the end: padding after a row cannot change what came before it. The
  head then scores the rows' own positions only (_Positions): it is most of the work where
  the vocabulary is large, and padding is up to half of a bucket's positions. Rows that
  make one group and one piece (a request's sentence) are read and scored in one call."""
  lm, budget = model.lm, model.config.eval_batch_size
  variables = lm.variables_of(model.params)
  lengths = np.array([len(row) for row in targets])
  groups, positions = _row_groups(lengths, budget), _Positions(lm, variables, budget)
  for group, length in groups:
    words, carry, own = _group_rows(inputs, carries, lengths, group, length)
    aims = np.concatenate([targets[r] for r in group])
    if len(groups) == 1 and len(own) <= positions.piece:  # A request's few rows.
      size = int(_buckets([len(own)])[0])
      positions.add_scored(np.asarray(_rows_scored(
          lm, variables, words, carry, _padded(own, size), _padded(aims, size)))[:len(own)])
    else:
      positions.add(np.asarray(_rows_hidden(lm, variables, words, carry))[own], aims)
  order = np.concatenate([group for group, _ in groups])
  out = [None] * len(targets)
  for r, log_probs in zip(order, np.split(positions.scored(), np.cumsum(lengths[order])[:-1])):
    out[r] = log_probs
  return out


def _row_groups(lengths: np.ndarray, budget: int) -> list[tuple[np.ndarray, int]]:
  """(the rows of a group, their length bucket): rows of one bucket, at most a power of two
  of them within `budget` tokens (a longer row alone)."""
  buckets, groups = _buckets(lengths), []
  for length in np.unique(buckets):
    same = np.flatnonzero(buckets == length)
    most = 1 << max(0, int(budget // length).bit_length() - 1)
    groups += [(group, int(length)) for group in np.split(same, np.arange(most, len(same), most))]
  return groups


def _group_rows(inputs, carries, lengths: np.ndarray, group: np.ndarray, length: int):
  """(words [R, length], carry [layers, parts, R, H], the rows' own positions among the R ·
  length): the group's rows padded at the end, R the power of two at or above their count."""
  size = 1 << (len(group) - 1).bit_length()
  words = np.zeros((size, length), np.int32)
  parts, width = np.shape(carries[group[0]])[1:]
  carry = np.zeros((len(carries[group[0]]), parts, size, width), np.float32)
  for row, r in enumerate(group):
    words[row, :lengths[r]] = inputs[r]
    carry[:, :, row] = carries[r]
  own = np.concatenate([row * length + np.arange(lengths[r]) for row, r in enumerate(group)])
  return words, carry, own.astype(np.int32)


def _padded(values: np.ndarray, size: int) -> np.ndarray:
  out = np.zeros((size, *values.shape[1:]), values.dtype)
  out[:len(values)] = values
  return out


class _Positions:
  """Hidden states and their targets, gathered from row groups in order, scored by the head
  a piece at a time (the largest power of two within --eval_batch_size, the last one padded
  to a power of two) as they fill one: no more than a piece and a group are held."""

  def __init__(self, lm, variables, budget: int):
    self.lm, self.variables, self.piece = lm, variables, 1 << (max(budget, 1).bit_length() - 1)
    self.hidden, self.targets, self.log_probs = [], [], []

  def add(self, hidden: np.ndarray, targets: np.ndarray) -> None:
    self.hidden.append(hidden)
    self.targets.append(targets)
    if sum(map(len, self.targets)) >= self.piece:
      self._score(last=False)

  def add_scored(self, log_probs: np.ndarray) -> None:
    """Targets' ln p scored already (read in one call): the next in order."""
    self._score(last=True)
    self.log_probs.append(np.asarray(log_probs, np.float64))

  def scored(self) -> np.ndarray:
    """ln p of every target added, in order."""
    self._score(last=True)
    return np.concatenate(self.log_probs)

  def _score(self, last: bool) -> None:
    if not self.targets:
      return
    hidden, targets = np.concatenate(self.hidden), np.concatenate(self.targets)
    end = len(targets) if last else len(targets) // self.piece * self.piece
    for start in range(0, end, self.piece):
      count = min(self.piece, end - start)
      size = int(_buckets([count])[0])
      self.log_probs.append(np.asarray(_positions_scored(
          self.lm, self.variables, _padded(hidden[start:start + count], size),
          _padded(targets[start:start + count], size)), np.float64)[:count])
    left = end < len(targets)
    self.hidden, self.targets = ([hidden[end:]], [targets[end:]]) if left else ([], [])
