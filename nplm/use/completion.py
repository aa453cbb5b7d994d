"""The k most probable continuations of a typed prefix, of a few words at most: completion as
a search box offers it, by beam search over the model's exact probabilities.

The prefix is read as `nplm predict` reads it (nplm.use.prompts: the model's tokenizer,
after the start-of-split context), and continuations through the `next_words()`
protocol alone (nplm.use.next_words; NgramNextWords for n-gram runs), so that every family
of model completes alike.

A continuation is a sequence of tokens after the prefix, one word at least. Its log p
(natural log, summed in float64) is the sum of the model's exact log p of each of its tokens
given the prefix and the tokens before it. It is finished:
  at a sentence end: an end mark of the dataset (`<eos>`; Brown's `</p>` and `</text>`:
    nplm.use.generation.end_ids), its last token and counted in its probability; for word
    tokenizations also a token that ends a sentence by generation's rule ('.', '!', '?',
    closing quotes and brackets after them; "3.5" none: generation.SentenceEnds). Words are
    spaced, so the sentence ends at that token unless a closing quote follows, which is not
    proposed;
  at max_words words, counted as a reader counts them: for word tokenizations each token
    (punctuation included) is one word; for characters and subwords they are the
    whitespace-separated words of the continuation's text (the rest of a word the prefix
    began counts as one). Its last word is whole: for characters and subwords its log p adds
    log p(the next token does not go on with that word: a space, an end mark, a token that
    starts a word); where each token is a word, that p is 1.
`<unk>` is never proposed: it stands for every rare word at once, none of which one types.
Its text is the prefix and the continuation as nplm generate writes them.

A prefix may end inside a word, as it does in a search box while the word is typed: the
prefix is then read without it and the continuation spells it out first (nplm.use.prompts:
for words, one of the words it begins; for subwords, in any pieces, token healing), its log
p the word's, what was typed of it included, as any continuation's is; for subwords, its
words are counted after what was typed. Characters go on with a word as any text does.
Where each token is a word, that word may be misspelt (typos, as a search box reads them):
one that may be the misspelt beginning of words is completed by them too, and the search
ranks each continuation by its log p plus ln P(typed | its first word)
(nplm.use.prefix_channel), the posterior's order; Completion keeps the two apart. The words
before it are corrected first (nplm.use.correction, as the beginning of a sentence), and
continued as corrected.

The beam search keeps `beam_width` live continuations, all of the same length: each step
reads them in one `next` call of beam_width rows (padded, so compiled once) and keeps the
beam_width most probable of all their extensions, each going on from its parent's state
(`rows`) with its new token read (`push`): the prefix is read once, so a step costs the same
after a long prefix as after a short one, a recurrent model's too. The
search stops when no live continuation is more probable than the k-th best finished one (a
token added only lowers a probability), or after MAX_TOKENS_PER_WORD tokens a word. The
result is exact where the beam held each continuation that could reach the top k: a wide
beam_width holds them all.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from nplm.data.tokenizers import Tokenization, token_kind
from nplm.errors import ConfigError
from nplm.use.correction import Corrector
from nplm.use.generation import SentenceEnds, as_text, end_ids
from nplm.use.prompts import Prompt, Spelling, Typing, read_typing
from nplm.use.spelling_channel import SECOND_EDIT

# A search box suggests a few words: each word more lowers every continuation's probability,
# so the best of longer ones differ mostly in their last words.
DEFAULT_MAX_WORDS = 3
MOST_K, MOST_WORDS = 1000, 50
MAX_TOKENS_PER_WORD = 30  # The search's cap, per word (characters; words need one each).
SENTENCE_END, MAX_WORDS = 'sentence_end', 'max_words'  # How a continuation ended.


@dataclasses.dataclass(frozen=True)
class Completion:
  text: str  # The prefix and the continuation, as generate writes them (no end mark).
  tokens: list[str]  # The continuation's tokens, an end mark last where it ends at one.
  log_prob: float  # Natural log.
  probability: float
  words: int
  ended: str  # SENTENCE_END or MAX_WORDS.
  # ln P(the word being typed | the continuation's first word), the typos' channel
  # (nplm.use.prefix_channel); 0 where no word was being typed or typos are not read.
  channel_log_prob: float = 0.0

  def as_dict(self) -> dict:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class _Continuation:
  ids: tuple[int, ...]
  log_prob: float
  words: int
  ended: str | None = None  # None while it is live.
  rest: str = ''  # What is left to spell of the word being typed, in tokens' text.
  typed: str = ''  # That word as typed, in text: the words counted follow it.
  in_letters: bool = False  # That word compared in its letters: typed in capitals.
  channel: float = 0.0  # Completion.channel_log_prob.

  @property
  def score(self) -> float:
    """What the search ranks by: ln p(continuation | prefix) P(typed | continuation)."""
    return self.log_prob + self.channel


def check_bounds(k: int, max_words: int) -> None:
  if not 1 <= k <= MOST_K:
    raise ConfigError(f'--k must be from 1 to {MOST_K:,}, not {k:,}')
  if not 1 <= max_words <= MOST_WORDS:
    raise ConfigError(f'--max_words must be from 1 to {MOST_WORDS}, not {max_words:,}')


def default_beam_width(k: int) -> int:
  """Twice k, room for continuations that overtake the k best on their later tokens; 16 at
  least (a beam of 2 is nearly greedy), 128 at most unless k is more (each live continuation
  is a row of every step's batch)."""
  return min(max(2 * k, 16), max(k, 128))


def complete(model, prefix: str, k: int = 10, max_words: int = DEFAULT_MAX_WORDS,
             beam_width: int | None = None, **typos) -> list[Completion]:
  """The k most probable continuations of `prefix`, the most probable first; `typos`:
  Completer's."""
  return Completer(model, **typos).complete(prefix, k, max_words, beam_width)


class Completer:
  """A model's completions, with what each vocabulary token does to a continuation, read
  once for any number of prefixes.

  With `typos`, a word-level model's words may be misspelt: those before the word being
  typed are corrected as nplm correct corrects the beginning of a sentence, and each
  continuation is weighed by P(typed | its first word) too (nplm.use.prefix_channel), both
  of the channel that `alpha`, `second_edit` and `misspellings` make
  (nplm.use.correction.model_channel). Characters and subwords spell any typed string: they
  go on with it as typed."""

  def __init__(self, model, typos: bool = True, alpha: float | None = None,
               second_edit: float = SECOND_EDIT,
               misspellings: Sequence[tuple[str, str]] = ()):
    model.require_language_model()
    self.model, self.tokenizer, vocab = model, model.tokenizer, model.vocab
    tokenization = Tokenization.of(model.config)
    self.each_token_a_word = tokenization.tokens == 'words' and not tokenization.learned
    self.end_marks = np.zeros(vocab.size, bool)
    self.end_marks[end_ids(model)] = True
    # What a continuation may begin with: a word (no end mark) that one types (no <unk>).
    self.first = ~self.end_marks & (np.arange(vocab.size) != vocab.unk_id)
    self.spelling = Spelling(model)
    if self.each_token_a_word:
      self.ends, self.continues_word = self.end_marks | _sentence_marks(model), None
    else:
      self.ends = self.end_marks
      special = self.end_marks | (np.arange(vocab.size) == vocab.unk_id)
      self.continues_word = _continuing(self.tokenizer, vocab.words, special) & ~self.ends
    if misspellings and not (typos and self.each_token_a_word):
      raise ConfigError(f'--misspellings weighs typos in the word being typed: this model '
                        f'reads {token_kind(model.config)}, which spell it as typed; leave '
                        f'--misspellings out' if typos else
                        '--misspellings weighs typos, which --notypos leaves unread: leave '
                        'out one or the other')
    self.corrector = self.prefix_channel = None
    if typos and self.each_token_a_word:
      self.corrector = Corrector(model, alpha, second_edit=second_edit,
                                 misspellings=misspellings)
      self.prefix_channel = self.corrector.prefix_channel

  def typing(self, prefix: str) -> Typing:
    """The prefix read with the word being typed at its end apart (nplm.use.prompts); with
    typos, also an unknown last word that no word begins but the channel reaches, and the
    words before it corrected (Corrector.typing)."""
    # While a word is typed, the sentences before it stay: each corrected once
    # (the corrector keeps them) for all its keystrokes.
    return (read_typing(self.model, prefix, search_box=True) if self.corrector is None
            else self.corrector.typing(prefix, search_box=True))

  def complete(self, prefix: str, k: int = 10, max_words: int = DEFAULT_MAX_WORDS,
               beam_width: int | None = None) -> list[Completion]:
    check_bounds(k, max_words)
    width = beam_width or default_beam_width(k)
    typing = self.typing(prefix)
    reader = self.model.next_words()
    prompt = typing.prompt
    live = [_Continuation((), 0.0, 0, rest=typing.spelling,
                          typed=self.tokenizer.detokenize(typing.tokens),
                          in_letters=self._in_letters(prefix))]
    state = reader.rows(reader.start(prompt.ids[None]), np.zeros(width, np.int32))
    finished = []
    for _ in range(max_words * MAX_TOKENS_PER_WORD + len(typing.spelling)):
      log_probs = np.asarray(reader.next(state)[0][:len(live)], np.float64)
      extended, newly_finished = self._step(live, log_probs, max_words, width, k)
      finished = _best([*finished, *newly_finished], k)
      going_on = [(row, c) for row, c in extended
                  if len(finished) < k or c.score > finished[-1].score]
      if not going_on:
        break
      parents, live = map(list, zip(*going_on))
      state = _read_on(reader, state, parents, [c.ids[-1] for c in live], width)
    return [self._completion(prompt, c) for c in finished]

  def _in_letters(self, prefix: str) -> bool:
    """Whether the word being typed is compared in its letters (Corrector.in_letters)."""
    return self.corrector is not None and self.corrector.in_letters(prefix)

  def _weights(self, continuation: _Continuation) -> np.ndarray | None:
    """ln of what weighs each token that may extend a continuation, float [|V|] (None: 0
    for each): -inf for one that may not. A word that one types (not an end mark, not
    <unk>) first; while the word being typed is spelt out, one that spells on, or where
    typos are read, P(typed | it) (a word-level model's first word)."""
    if continuation.rest and self.prefix_channel is not None:
      return self.prefix_channel.log_probs(continuation.rest, continuation.in_letters)
    allowed = (self.spelling.allowed(continuation.rest) & self.first if continuation.rest
               else self.first if continuation.words == 0 else None)
    return None if allowed is None else np.where(allowed, 0.0, -np.inf)

  def _step(self, live: list[_Continuation], log_probs: np.ndarray, max_words: int,
            width: int, k: int) -> tuple[list[tuple[int, _Continuation]], list[_Continuation]]:
    """(the `width` most probable extensions that go on, each with its parent's row, the
    finished ones: the `k` most probable extensions that end, and each continuation at
    max_words with its last word whole, for characters and subwords)."""
    model_log_probs = np.array([c.log_prob for c in live])[:, None] + log_probs
    weights = np.zeros_like(log_probs)
    weights[:, self.model.vocab.unk_id] = -np.inf
    for row, continuation in enumerate(live):
      row_weights = self._weights(continuation)
      if row_weights is not None:
        weights[row] += row_weights
    scores = model_log_probs + weights + np.array([c.channel for c in live])[:, None]
    finished = []
    for row in np.flatnonzero([c.words == max_words and not c.rest for c in live]):
      # Characters and subwords: what goes on with its last word is all that may follow.
      whole_word = np.logaddexp.reduce(log_probs[row, ~self.continues_word])
      finished.append(dataclasses.replace(
          live[row], log_prob=float(live[row].log_prob + whole_word), ended=MAX_WORDS))
      scores[row, ~self.continues_word] = -np.inf
    ending = np.repeat(self.ends[None], len(live), axis=0)
    if self.each_token_a_word:
      ending[[c.words + 1 == max_words for c in live]] = True
    finished += [self._extension(live[row], token, model_log_probs[row, token],
                                 weights[row, token],
                                 SENTENCE_END if self.ends[token] else MAX_WORDS)
                 for row, token in _top(np.where(ending, scores, -np.inf), k)]
    extended = [(row, self._extension(live[row], token, model_log_probs[row, token],
                                      weights[row, token]))
                for row, token in _top(np.where(ending, -np.inf, scores), width)]
    return extended, finished

  def _extension(self, parent: _Continuation, token: int, log_prob: float, weight: float,
                 ended: str | None = None) -> _Continuation:
    ids = (*parent.ids, token)
    if self.end_marks[token]:
      words = parent.words
    elif self.each_token_a_word:
      words = parent.words + 1
    else:  # Words after the one being typed, if any; the rest of a word begun counts.
      text = self.tokenizer.detokenize(self.model.vocab.decode(ids))
      words = len(text[len(parent.typed):].split()) if text.startswith(parent.typed) else 0
    rest = self.spelling.rest_after(parent.rest, token) if parent.rest else ''
    return _Continuation(ids, float(log_prob), words, ended, rest, parent.typed,
                         parent.in_letters, parent.channel + float(weight))

  def _completion(self, prompt: Prompt, continuation: _Continuation) -> Completion:
    tokens = self.model.vocab.decode(continuation.ids)
    return Completion(as_text(self.model, [*prompt.tokens, *tokens]), tokens,
                      continuation.log_prob, math.exp(continuation.log_prob),
                      continuation.words, continuation.ended, continuation.channel)


def _read_on(reader, state, parents: list[int], tokens: list[int], width: int):
  """The state of each live continuation: its parent's row (`parents`) with its last token
  read, `width` rows (the first repeated as padding, so each step is compiled once)."""
  padding = width - len(parents)
  return reader.push(reader.rows(state, np.array(parents + parents[:1] * padding, np.int32)),
                     np.array(tokens + tokens[:1] * padding, np.int32))


def _top(scores: np.ndarray, m: int) -> list[tuple[int, int]]:
  """(row, token) of the m highest finite scores, the highest first (ties: the lowest)."""
  flat = scores.ravel()
  if m < flat.size:  # argpartition alone would keep any of the scores tied with the m-th.
    mth = -np.partition(-flat, m - 1)[m - 1]
    above = np.flatnonzero(flat > mth)
    best = np.concatenate([above, np.flatnonzero(flat == mth)[:m - len(above)]])
  else:
    best = np.arange(flat.size)
  best = best[np.isfinite(flat[best])]
  return [divmod(int(i), scores.shape[1]) for i in best[np.lexsort((best, -flat[best]))]]


def _best(continuations: list[_Continuation], k: int) -> list[_Continuation]:
  return sorted(continuations, key=lambda c: (-c.score, c.ids))[:k]


def _sentence_marks(model) -> np.ndarray:
  """Which tokens end a sentence where a word follows them, by generation's rule: a fresh
  SentenceEnds reading each token alone is left marked by those only."""
  fresh = SentenceEnds(model, previous='')

  def marks(token: str) -> bool:
    reader = copy.copy(fresh)
    reader.read(token)
    return reader.marked

  return np.array([marks(token) for token in model.vocab.words])


def _continuing(tokenizer, tokens, special: np.ndarray) -> np.ndarray:
  """Which tokens, written after a word, go on with it: its text then one word still, with
  no space at its end. Characters and subwords tell by themselves (a space; '▁' before a
  subword), so any word written before them shows it."""
  anchor = next(token for token, skipped in zip(tokens, special) if not skipped
                and tokenizer.detokenize([token]).split() == [tokenizer.detokenize([token])])

  def continues(token: str) -> bool:
    text = tokenizer.detokenize([anchor, token])
    return len(text.split()) == 1 and not text[-1:].isspace()

  return np.array([continues(token) for token in tokens])
