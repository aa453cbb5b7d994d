"""A trained network read one word at a time: the exact distribution of the next word.

The protocol every read-back model offers (`next_words()`; n-gram runs have their own):
  start(prompts int32 [S, L]) -> state: the prompts read after the start-of-split context,
    the one scoring reads a split from (n-1 boundary tokens before a window model's first
    word; h_0 = 0 and the boundary token as a recurrent model's first input);
  next(state) -> (log p of the next word, float32 [S, |V|], state): exact and normalized,
    the head's `log_probs` whatever objective trained it;
  push(state, words [S]) -> state: the words read next;
  rows(state, indices [R]) -> state: the states of those rows, in that order, a row as often
    as it is named (a beam search's extensions go on from their parents' states).
Prediction, generation and completion use nothing else, so they work for every kind of
model.

A window model's state is its last n-1 words, w_{t-1} first (Eq. 1's x of Bengio et al.
2003); a recurrent model's is its carried state and the hidden vector after the last word
read. `next` computes from the state without changing it. Each step is compiled once per
model and S: a recurrent prompt is read one word at a time by the same step as `push`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nplm.precision import exact


class RecurrentState(NamedTuple):
  carry: jnp.ndarray  # The model's state after the words read so far.
  hidden: jnp.ndarray  # [S, D]: its hidden vector after the last of them.


@functools.partial(jax.jit, static_argnames='lm')
def _window_log_probs(lm, variables, window):
  return lm.apply(variables, window, method=lm.log_probs)


@functools.partial(jax.jit, static_argnames='lm')
@exact
def _recurrent_step(lm, variables, carry, words):
  """The model one word on: [S] words in, (carry after them, hidden [S, D]) out."""
  hidden, carry = lm.apply(variables, words[:, None], carry,
                           method=lambda m, w, c: m.model(w, c))
  return RecurrentState(carry, hidden[:, 0])


@functools.partial(jax.jit, static_argnames='lm')
@exact
def _recurrent_log_probs(lm, variables, hidden):
  return lm.apply(variables, hidden, method=lambda m, h: m.head.log_probs(h))


class NextWords:
  """The next-word distributions of a trained network (nplm.lm.LanguageModel) and its
  parameters; `boundary_id` is the token before a split's first."""

  def __init__(self, lm, params: dict, boundary_id: int):
    self.lm, self.boundary_id = lm, boundary_id
    self.variables = lm.variables_of(params)
    self.recurrent = lm.model.recurrent
    # The step leaves each carry where the parameters are when they all lie in one place,
    # whole: the first carry is put there too, so the step is compiled once, not twice.
    shardings = {leaf.sharding for leaf in jax.tree.leaves(self.variables)}
    whole = [sharding for sharding in shardings if sharding.is_fully_replicated]
    self._carry_sharding = whole[0] if len(shardings) == len(whole) == 1 else None

  def start(self, prompts) -> np.ndarray | RecurrentState:
    prompts = np.asarray(prompts, np.int32).reshape(len(prompts), -1)
    if self.recurrent:
      state = RecurrentState(self._initial_carry(len(prompts)), None)
      for words in [np.full(len(prompts), self.boundary_id, np.int32), *prompts.T]:
        state = self.push(state, words)
      return state
    width = self.lm.model.order - 1
    padding = np.full((len(prompts), width), self.boundary_id, np.int32)
    return np.concatenate([padding, prompts], axis=1)[:, ::-1][:, :width].copy()

  def carries(self, words) -> list[np.ndarray]:
    """A recurrent model's carried state before each of `words` [T] is read, from h_0 = 0
    (each [layers, parts, H]): the states a reading of them passes through, for reading on
    from any of them (nplm.use.sentences.rows_log_probs)."""
    state = RecurrentState(self._initial_carry(1), None)
    carries = [np.asarray(state.carry)[:, :, 0]]
    for word in np.asarray(words, np.int32)[:-1]:
      state = self.push(state, [word])
      carries.append(np.asarray(state.carry)[:, :, 0])
    return carries

  def next(self, state) -> tuple[np.ndarray, np.ndarray | RecurrentState]:
    if self.recurrent:
      log_probs = _recurrent_log_probs(self.lm, self.variables, state.hidden)
    else:
      log_probs = _window_log_probs(self.lm, self.variables, jnp.asarray(state))
    return np.asarray(log_probs, np.float32), state

  def _initial_carry(self, rows: int):
    carry = self.lm.model.initial_state(rows)
    return carry if self._carry_sharding is None else jax.device_put(carry,
                                                                     self._carry_sharding)

  def rows(self, state, indices) -> np.ndarray | RecurrentState:
    indices = np.asarray(indices, np.int32)
    if self.recurrent:  # The carry's rows are its third axis (initial_state's layout).
      return RecurrentState(jnp.take(state.carry, indices, axis=2),
                            jnp.take(state.hidden, indices, axis=0))
    return state[indices]

  def push(self, state, words) -> np.ndarray | RecurrentState:
    words = np.asarray(words, np.int32)
    if self.recurrent:
      return _recurrent_step(self.lm, self.variables, state.carry, jnp.asarray(words))
    return np.concatenate([words[:, None], state[:, :-1]], axis=1)
