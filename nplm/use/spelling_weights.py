"""What each next token weighs while the word being typed is spelt out, for what reads one
token at a time: nplm predict's list and nplm generate's draws (nplm complete's search weighs
whole continuations instead).

A subword model's typed word may be spelt in many pieces ("▁church"; "▁ch" "urch"; "▁c" "h"
"urch"; nplm.use.prompts). One token at a time, the likeliest first piece is not the
likeliest spelling: "▁c" begins many words and outweighs "▁church", though after it the
model gives "h" "ur" little. So a next token t after the history h weighs

    p(t | h) · S(h t, the rest after t)

where S(h, rest), the probability that what follows h spells out `rest`, is

    S(h, rest) = Σ_{t takes all of rest} p(t | h)
               + Σ_{t spells a beginning r of rest} p(t | h) · S(h t, rest - r),

1 once nothing is left: exact, summed over the tree of the pieces that spell proper
beginnings of the typed word, one next-words read per node. A draw from these weights,
renormalized, is a draw from the model given that its text goes on with what was typed; a
list of them is each token's probability of coming next and spelling the word out. For words
every allowed token takes all of it (the words it begins), the tree is its root, and a
token's weight is p(t | h).

A long word typed in short pieces can make the tree large: beyond MAX_NODES nodes the
prefix is read as typed (`weigh` says so with None).

With typos read (a Corrector: predict's and generate's --typos), a word-level model's word
being typed may also be a misspelt beginning of words ("the jury recie"), as nplm complete
reads it: each word w it may begin weighs p(w | h) · P(typed | w), P of the corrector's channel
(nplm.use.prefix_channel), so that a draw is one from the words meant given what was typed,
and a list ranks them by that, the posterior's order.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nplm.use.prompts import Spelling, Typing, read_prompt, read_typing

MAX_NODES = 256  # Next-words reads of the tree, batched by depth.


@dataclasses.dataclass(frozen=True)
class SpellingWeights:
  """log S · 0/1 of each next token, per node of the tree: a path of pieces from the prompt
  (() its root), while the word is not yet spelt out."""
  log_weights: dict[tuple[int, ...], np.ndarray]  # float64 [|V|]: -inf where not allowed.
  # log p(· | the prompt), float64 [|V|]: the root's read, batched with the tree's.
  prompt_log_probs: np.ndarray
  # ln P(typed | w) of each word w that may come first, with typos read (the module
  # docstring's last paragraph), float64 [|V|]; None: the word is spelt as typed.
  channel_log_probs: np.ndarray | None = None

  def weights(self, path: tuple[int, ...]) -> np.ndarray:
    """ln of what weighs each next token at `path` (a draw's): its log S, and first its
    ln P(typed | it)."""
    if path or self.channel_log_probs is None:
      return self.log_weights[path]
    return self.log_weights[path] + self.channel_log_probs

  def after(self, path: tuple[int, ...], token: int) -> tuple[int, ...] | None:
    """The node after `token`, or None where it spelt the word out."""
    child = (*path, token)
    return child if child in self.log_weights else None


def read_and_weigh(model, text: str, corrector=None) -> tuple[Typing, SpellingWeights | None]:
  """(`text` read with the word being typed apart, the weights of spelling it out), or
  (`text` read as typed, None) where it ends in no such word or its tree is too large; with
  a `corrector` (nplm.use.correction's), its typos read (Corrector.typing): a word being
  typed that no word begins also as a misspelt beginning of those the channel reaches."""
  typing = read_typing(model, text) if corrector is None else corrector.typing(text)
  if not typing.tokens:
    return typing, None
  channel = None if corrector is None else corrector.prefix_channel.log_probs(
      typing.spelling, corrector.in_letters(text))
  weights = weigh(model, typing.prompt.ids, typing.spelling, channel)
  if weights is None:
    as_typed = Typing(read_prompt(model, text), [])
    return (as_typed if corrector is None else corrector.read(as_typed)), None
  return typing, weights


def weigh(model, prompt_ids: np.ndarray, spelling: str,
          channel_log_probs: np.ndarray | None = None) -> SpellingWeights | None:
  """The weights of spelling out `spelling` after the prompt (the module docstring), or None
  where the tree has more than MAX_NODES nodes; with `channel_log_probs` (words: ln P(typed |
  w)), the words it reaches spell it out."""
  spell = Spelling(model)
  rests = {(): spelling}  # Each node's rest to spell, parents before children.
  frontier = [()]
  while frontier:
    frontier = [(*path, int(t)) for path in frontier for t in spell.pieces(rests[path])]
    for child in frontier:
      rests[child] = spell.rest_after(rests[child[:-1]], child[-1])
    if len(rests) > MAX_NODES:
      return None
  log_p = _log_probs(model, prompt_ids, list(rests))
  log_s, log_weights = {}, {}
  for path in reversed(list(rests)):  # Children before their parents.
    rest = rests[path]
    spelt = (np.isfinite(channel_log_probs) if channel_log_probs is not None and not path
             else spell.taking_all(rest))
    weights = np.where(spelt, 0.0, -np.inf)
    for t in spell.pieces(rest):
      weights[t] = log_s[(*path, int(t))]
    log_weights[path] = weights
    if path:
      log_s[path] = np.logaddexp.reduce(log_p[path] + weights)
  return SpellingWeights(log_weights, log_p[()], channel_log_probs)


def _log_probs(model, prompt_ids: np.ndarray,
               paths: list[tuple[int, ...]]) -> dict[tuple[int, ...], np.ndarray]:
  """log p(· | prompt, path) of each path, float64 [|V|]: one next-words read per depth,
  every depth's rows (the root's too) padded to the power of two that holds the largest:
  one shape to compile (a step compiles per row count), not one per depth: compiling, not
  reading, is most of a one-off nplm predict."""
  reader, log_p, levels = model.next_words(), {}, {}
  for path in paths:
    levels.setdefault(len(path), []).append(path)
  rows_per_read = 1 << (max(map(len, levels.values()), default=1) - 1).bit_length()
  for depth, level in sorted(levels.items()):
    rows = np.array([[*prompt_ids, *path] for path in level], np.int32).reshape(len(level), -1)
    rows = np.concatenate([rows, np.repeat(rows[:1], rows_per_read - len(level), axis=0)])
    read, _ = reader.next(reader.start(rows))
    log_p.update(zip(level, np.asarray(read, np.float64)))
  return log_p
