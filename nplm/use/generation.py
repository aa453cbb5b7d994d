"""Text sampled from a trained model, one token at a time from its exact distribution.

Any read-back model (network or n-gram) gives the exact, normalized distribution of the next
token through its `next_words()` reader (nplm.use.next_words), after the same start-of-split
context that scoring uses, then the prompt: w_t ~ p(· | prompt, w_1 … w_{t-1}). The draw is
reshaped as Hugging Face's `generate` reshapes it, in this order:
  no_unk: `<unk>` stands for every rare word at once; it is taken out of the draw;
  temperature T: p_T(w) ∝ p(w)^(1/T); T = 1 is the model, larger flatter, T = 0 greedy (the
    most probable token; ties: the lowest id);
  top-k: only the k most probable tokens keep their mass; 0 keeps all;
  top-p (nucleus, [Holtzman et al. 2020]): only the smallest set of most probable tokens
    whose mass reaches p; 1 keeps all.
Both cuts keep every token tied with the last one kept, and the survivors are renormalized.
A drawn `<unk>` shows as a word drawn from the open vocabulary's spelling model (`spell_unk`,
`shown_unknowns`): the model gives a word w outside V the probability p(<unk> | h) · q(w)
(nplm.ngram.spelling), so a draw of <unk> then of w from q is a draw of w.
A prompt that ends in a word being typed (nplm.use.prompts: "The jury sa"; a subword model's
last word) is read without it, and each sample spells it out first: while it does, the draw
is from the model given that its text goes on with what was typed (each token weighed by
nplm.use.spelling_weights: for words, the words it begins, renormalized; with typos read,
also those it may be a misspelt beginning of, each weighed by P(typed | it)). Those tokens
count in `length`.

A sample runs on across sentence and text ends for `length` tokens, or stops after its
`sentences`-th sentence when that comes first. Sentences are counted as a reader counts
them: one ends at '.', '!' or '?' (closing quotes and brackets after it included) followed
by a space or a line end, so "3.5" ends none; and at an end mark: the dataset's own
(`<eos>`, the model's `sentence_end`) or, for Brown, whose sentences carry none, a
paragraph's (`</p>`), and the boundary token (`</text>`). A text dataset whose lines are
paragraphs thus counts the sentences of a line, not its `<eos>` alone. An end right after
another ('.' then `<eos>`, Brown's `</text>` after its text's last `</p>`, a blank line)
ends nothing new. Whether a space follows is the model's tokenizer's call (words are
spaced; characters and subwords tell), so a sample stops after its last sentence's last
token (the token that showed the space is drawn, then left out) or after the end mark that
closed it.

Sample i's token t is drawn with the key fold_in(fold_in(key(seed), i), t): a seed gives the
same text every time, and sample i does not depend on how many are drawn beside it, so a
program can draw samples one at a time and write each as it comes (`text_pieces`), holding
no more than a line's last PIECE_TOKENS tokens, whatever the length.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
import time
from collections.abc import Iterable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from nplm.data.vocab import PARAGRAPH_END, SPECIAL_TOKENS, UNK
from nplm.errors import ConfigError
from nplm.use.spelling_weights import SpellingWeights, read_and_weigh

MOST = 2 ** 31 - 1  # Steps and samples are folded into the draws' keys as 32-bit numbers.
PIECE_TOKENS = 64  # A line is written at its end, or every this many tokens if longer,
PIECE_SECONDS = 1.0  # or this long after its last piece was written: a slow model shows text.
_CONTEXT_TOKENS = 8  # Written tokens kept, so that the rest of a line is read after them.
# A sentence's last word: '.', '!' or '?' ending it, closing quotes and brackets after them.
_CLOSERS = '"\'”’»)]}'
_SENTENCE_MARK = re.compile(f'[.!?][{re.escape(_CLOSERS)}]*$')


@dataclasses.dataclass(frozen=True)
class Sampling:
  length: int = 50  # At most this many tokens per sample.
  temperature: float = 1.0  # T in p(w)^(1/T); 0 = greedy.
  top_k: int = 0  # Draw from the k most probable tokens only; 0 = all.
  top_p: float = 1.0  # Draw from the smallest set of mass ≥ p only; 1 = all.
  no_unk: bool = False  # Never draw `<unk>`.
  samples: int = 1  # Independent samples, drawn side by side as one batch.
  sentences: int = 0  # Stop a sample after this many sentence ends; 0 = at `length` only.
  spell_unk: bool = True  # A drawn <unk> shown as a word drawn from q (`shown_unknowns`).

  def validate(self) -> Sampling:
    if not 1 <= self.length <= MOST:
      raise ConfigError(f'--length must be at least 1 and at most {MOST:,}, not '
                        f'{self.length:,}')
    if not self.temperature >= 0:
      raise ConfigError(f'--temperature must be 0 (greedy) or positive, not '
                        f'{self.temperature}')
    if self.top_k < 0:
      raise ConfigError(f'--top_k must be 0 (all tokens) or positive, not {self.top_k}')
    if not 0 < self.top_p <= 1:
      raise ConfigError(f'--top_p must be in (0, 1] (1 = all tokens), not {self.top_p}')
    if not 1 <= self.samples <= MOST:
      raise ConfigError(f'--samples must be at least 1 and at most {MOST:,}, not '
                        f'{self.samples:,}')
    if self.sentences < 0:
      raise ConfigError(f'--sentences must be 0 (no limit) or positive, not {self.sentences}')
    return self


def sampling_logits(log_probs: jnp.ndarray, temperature: float, top_k: int = 0,
                    banned: int | None = None, top_p: float = 1.0) -> jnp.ndarray:
  """Unnormalized log p_T over the allowed tokens, [..., |V|]: a categorical draw from them
  gives p(w)^(1/T) renormalized over the top k, then over the top-p nucleus.

  The ban comes first and the best allowed token is shifted to 0 before dividing by T: a
  tiny T then sends every other token to -inf (or a huge negative) while the best keeps 0,
  the greedy limit, where dividing first would turn every token into -inf (or NaN) alike."""
  logits = jnp.asarray(log_probs, jnp.float32)
  if banned is not None:
    logits = logits.at[..., banned].set(-jnp.inf)
  shifted = logits - jnp.max(logits, axis=-1, keepdims=True)
  # 0 / T stays 0 even where T underflows to 0 (a subnormal T flushed on the device).
  tempered = jnp.where(shifted < 0, shifted / temperature, 0.0)
  best = jnp.arange(logits.shape[-1]) == jnp.argmax(logits, axis=-1, keepdims=True)
  logits = jnp.where(temperature == 0, jnp.where(best, 0.0, -jnp.inf), tempered)
  if 0 < top_k < logits.shape[-1]:
    logits = _cut_below(logits, jax.lax.top_k(logits, top_k)[0][..., -1:])
  if top_p < 1:
    descending = -jnp.sort(-logits, axis=-1)
    probs = jax.nn.softmax(descending, axis=-1)
    mass_before = jnp.cumsum(probs, axis=-1) - probs
    kept = jnp.sum(mass_before < top_p, axis=-1, keepdims=True)  # At least the best one.
    logits = _cut_below(logits, jnp.take_along_axis(descending, kept - 1, axis=-1))
  return logits


def _cut_below(logits, lowest_kept):
  return jnp.where(logits < lowest_kept, -jnp.inf, logits)


@functools.partial(jax.jit, static_argnames=('top_k', 'top_p', 'banned'))
def _draw(log_probs, seed, first, t, temperature, top_k, top_p, banned):
  """Token t of samples first, first + 1, ...; compiled once per settings and batch (seed,
  first, t and the temperature are traced)."""
  logits = sampling_logits(log_probs, temperature, top_k, banned, top_p)
  sample_keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(seed), i))
  keys = jax.vmap(lambda key: jax.random.fold_in(key, t))(
      sample_keys(first + jnp.arange(len(logits))))
  return jax.vmap(jax.random.categorical)(keys, logits).astype(jnp.int32)


def end_ids(model) -> np.ndarray:
  """The ids of the end marks that end a sentence (the module docstring says which)."""
  ends = [model.sentence_end or PARAGRAPH_END, model.vocab.decode([model.boundary_id])[0]]
  return np.unique([model.vocab.id_of(token) for token in ends if token in model.vocab.words])


class SentenceEnds:
  """One sample's sentences, counted as its tokens come (the module docstring's rule)."""

  def __init__(self, model, previous: str):
    self.tokenizer, self.ends = model.tokenizer, set(model.vocab.decode(end_ids(model)))
    self.previous, self.after_end = previous, previous in self.ends
    self.marked = False  # The text read ends with a sentence mark, not yet followed.
    self.count = 0

  def read(self, token: str) -> str | None:
    """Reads the next token. 'at' when a sentence ends with it (an end mark), 'before' when
    one ended with the token before it (a mark now followed by a space), else None."""
    previous, self.previous = self.previous, token
    if token in self.ends:
      ended = None if self.after_end else 'at'
      self.after_end, self.marked = True, False
    else:
      ended = None
      if self.marked and not closing(token):
        ended = 'before' if _spaced(self.tokenizer, previous, token) else None
        self.marked = False
      self.after_end = False
      self.marked = self.marked or bool(_SENTENCE_MARK.search(token))
    self.count += ended is not None
    return ended


def closing(token: str) -> bool:
  """Only closing quotes and brackets (Brown's '' too): they end the sentence before them."""
  return bool(token) and all(ch in _CLOSERS for ch in token)


def _spaced(tokenizer, previous: str, token: str) -> bool:
  """Whether the tokenizer writes a space between the two tokens (words: always; characters:
  when the second is one; subwords: when it starts a word)."""
  both, first = tokenizer.detokenize([previous, token]), tokenizer.detokenize([previous])
  return not both.startswith(first) or both[len(first):][:1].isspace()


def _steps(model, prompt: Sequence[int], sampling: Sampling, seed: int, first: int,
           samples: int, spelling: SpellingWeights | None = None
           ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
  """(the tokens t of samples first … first + samples - 1 [samples], which of them belong to
  their sample [samples]) for t = 0, 1, …: each spells out a word being typed first, drawn by
  `spelling`'s weights; a sample is over at `sampling.length` tokens or after its
  `sampling.sentences`-th sentence. Ends when every sample is over."""
  sampling.validate()
  reader = model.next_words()
  prompt = np.asarray(prompt, np.int32).reshape(1, -1)
  state = reader.start(np.repeat(prompt, samples, axis=0))
  banned = model.vocab.unk_id if sampling.no_unk else None
  previous = model.vocab.words[int(prompt[0, -1]) if prompt.size else model.boundary_id]
  counters = [SentenceEnds(model, previous) for _ in range(samples)]
  spell = speller(model, sampling, seed) if sampling.sentences else None
  going = np.ones(samples, bool)
  nodes = [() if spelling else None] * samples  # Where each is in spelling's tree.
  for t in range(sampling.length):
    log_probs, state = reader.next(state)
    if any(node is not None for node in nodes):
      log_probs = log_probs + np.stack([np.zeros(model.vocab.size) if node is None
                                        else spelling.weights(node) for node in nodes])
    words = np.asarray(_draw(log_probs.astype(np.float32), seed, first, t,
                             sampling.temperature, sampling.top_k, sampling.top_p, banned))
    nodes = [None if node is None else spelling.after(node, int(word))
             for node, word in zip(nodes, words)]
    kept = going.copy()
    for i in np.flatnonzero(going) if sampling.sentences else ():
      token = model.vocab.words[int(words[i])]
      ended = counters[i].read(spell(first + i, t) if spell and token == UNK else token)
      if counters[i].count == sampling.sentences:
        going[i], kept[i] = False, ended == 'at'
    yield words, kept
    if not going.any():
      return
    if t + 1 < sampling.length:
      state = reader.push(state, words)


def generate(model, prompt: Sequence[int] = (), sampling: Sampling = Sampling(),
             seed: int = 0, spelling: SpellingWeights | None = None) -> list[np.ndarray]:
  """`sampling.samples` continuations of the prompt's token ids, drawn side by side, each
  `sampling.length` ids in [0, |V|), or fewer, up to its `sampling.sentences`-th sentence's
  end; each spelling out a word being typed first, where `spelling` weighs one."""
  rows = [[] for _ in range(sampling.samples)]
  for words, kept in _steps(model, prompt, sampling, seed, 0, sampling.samples, spelling):
    for i in np.flatnonzero(kept):
      rows[i].append(words[i])
  return [np.asarray(row, np.int32) for row in rows]


def text_pieces(model, prompt: str = '', sampling: Sampling = Sampling(), seed: int = 0,
                sample: int = 0, piece_tokens: int = PIECE_TOKENS, corrector=None
                ) -> Iterator[str]:
  """Sample number `sample` (from 0) drawn alone, the same as generate_text's, as text
  written as it comes: the typed prompt (as read: with a `corrector`, its typos corrected),
  then the continuation, a piece at each line end, or every `piece_tokens` tokens of a
  longer line, or PIECE_SECONDS after the last piece; ''.join() of the pieces is the whole
  text. Holds a line's last few tokens, no more."""
  typing, spelling = read_and_weigh(model, prompt, corrector)
  steps = _steps(model, typing.prompt.ids, sampling, seed, sample, 1, spelling)
  drawn = (model.vocab.words[int(words[0])] for words, kept in steps if kept[0])
  shown = shown_unknowns(model, drawn, sampling, seed, sample)
  return written(model, itertools.chain(typing.prompt.tokens, shown), piece_tokens)


def shown_unknowns(model, drawn: Iterable[str], sampling: Sampling, seed: int,
                   sample: int) -> Iterator[str]:
  """A sample's drawn tokens as they print: each `<unk>` spelt (`speller`)."""
  spell = speller(model, sampling, seed)
  for place, token in enumerate(drawn):
    yield spell(sample, place) if spell and token == UNK else token


def speller(model, sampling: Sampling, seed: int):
  """spell(sample, place), for a `<unk>` drawn there: a word outside the vocabulary drawn
  from the model's q (q's own draw at any temperature: temperature, top-k and top-p shape
  the tokens' draw, <unk>'s share in it included), from a generator of its own for (seed,
  sample, place), so that a seed gives the same text however the samples are drawn, and the
  sentence counter reads the word that prints. None where `<unk>` stays: `sampling.spell_unk` off, at
  temperature 0 (no draw names the likeliest spelling), and where the model has no spelling
  model or learned it from no word that fell to <unk> (its text's own `<unk>`, PTB's: the
  text withholds those words)."""
  # getattr: a reader of the protocol (nplm.use) may have no spelling model at all.
  spelling = (getattr(model, 'spelling', None)
              if sampling.spell_unk and sampling.temperature > 0 else None)
  if spelling is None or 'fell to <unk>' not in spelling.trained_on.get('what', ''):
    return None
  excluded = {*model.vocab.words, *SPECIAL_TOKENS}

  def spell(sample: int, place: int) -> str:
    return spelling.draw(np.random.default_rng([seed % 2 ** 63, sample, place]), excluded)
  return spell


def written(model, tokens: Iterable[str], piece_tokens: int = PIECE_TOKENS) -> Iterator[str]:
  """as_text(model, tokens) in pieces, as the tokens come (text_pieces says when). Joined,
  they are that text exactly where a line's text is its parts' (words, characters,
  subwords); NLTK's detokenizer reads quotes across a line, so a piece cut inside a long
  line may space a clitic after it otherwise."""
  tokenizer, ends = model.tokenizer, set(model.vocab.decode(end_ids(model)))
  line, done, lines, begun, last = [], 0, 0, False, time.monotonic()
  for token in tokens:
    at_end = token in ends
    if not at_end:
      line.append(token)
    due = at_end or (len(line) > done and (len(line) - done >= piece_tokens or
                                           time.monotonic() - last >= PIECE_SECONDS))
    if not due:
      continue
    piece = ('\n' if lines and not begun else '') + _rest(tokenizer, line, done)
    if at_end:
      line, done, lines, begun = [], 0, lines + 1, False
    else:
      line = line[-_CONTEXT_TOKENS:]
      done, begun = len(line), True
    last = time.monotonic()
    if piece:
      yield piece
  if len(line) > done:
    yield ('\n' if lines and not begun else '') + _rest(tokenizer, line, done)


def _rest(tokenizer, line: Sequence[str], done: int) -> str:
  """The text of line[done:] as it follows line[:done] (already written): read after them,
  so that a subword or a clitic joins its word as in the whole line's text."""
  whole = tokenizer.detokenize(line)
  before = tokenizer.detokenize(line[:done]) if done else ''
  if whole.startswith(before):
    return whole[len(before):]
  return ' ' + tokenizer.detokenize(line[done:])


def generate_text(model, prompt: str = '', sampling: Sampling = Sampling(),
                  seed: int = 0, corrector=None) -> list[str]:
  """The typed prompt (as read: with a `corrector`, its typos corrected) and each sample's
  continuation as text, one line per sentence."""
  typing, spelling = read_and_weigh(model, prompt, corrector)
  return [as_text(model, [*typing.prompt.tokens,
                          *shown_unknowns(model, model.vocab.decode(ids), sampling, seed, i)])
          for i, ids in enumerate(generate(model, typing.prompt.ids, sampling, seed, spelling))]


def as_text(model, tokens: Sequence[str]) -> str:
  """Tokens as text, each line through the model's tokenizer (words spaced, characters
  joined, subwords merged), a line break at each sentence end; an end token itself does not
  print (two in a row leave a blank line)."""
  ends = set(model.vocab.decode(end_ids(model)))
  lines, line = [], []
  for token in tokens:
    if token in ends:
      lines.append(line)
      line = []
    else:
      line.append(token)
  if line or not lines:
    lines.append(line)
  return '\n'.join(model.tokenizer.detokenize(words) for words in lines)
