"""Recurrent models: cells against numpy recurrences, BPTT streams, exact evaluation, training."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax.training import train_state

from nplm.training import stream_feed
from nplm.run_files.saved_params import saved_params
from nplm.config import Config, ConfigError
from nplm.data import streams
from nplm.data.vocab import TEXT_END
from nplm.heads import HEADS
from nplm.lm import build_language_model
from nplm.training.optimizer import apply_gradients, make_optimizer
from nplm.use.trained import load_trained
from nplm.trainer import run
from tests.conftest import TINY_SPLIT
from nplm.training.config_checks import validated

CELLS = ('rnn', 'lstm', 'gru')


def rnn_config(workdir='unused', **changes) -> Config:
  config = Config(workdir=str(workdir), model='lstm', feature_size=6, hidden_size=7,
                  batch_size=3, bptt_length=5, epochs=2, patience=2, eval_batch_size=9,
                  log_every=4, checkpoint_every=4, learning_rate=1e-2, clip_norm=1.0,
                  unk_max_count=1, **TINY_SPLIT)
  return validated(config.replace(**changes))


# --- a numpy reading of the seeds' equations -------------------------------------------

def sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def numpy_layer(cell, p, xs, state):
  """One layer over xs [B, T, E] step by step; the fused matrices are read gate by gate."""
  W_x, b, W_h = p['input']['kernel'], p['input']['bias'], p['recurrent']
  H = W_h.shape[0]
  block = lambda M, k: M[..., k * H:(k + 1) * H]  # noqa: E731
  h, c = state[0], state[-1]
  outputs = []
  for t in range(xs.shape[1]):
    x = xs[:, t]
    if cell == 'rnn':  # h_t = tanh(U h_{t-1} + W v + c)   (seed 002, Eq. 15.38)
      h = np.tanh(h @ W_h + x @ W_x + b)
    elif cell == 'lstm':  # blocks [f, i, o, c̃]   (seed 004)
      gate = lambda k: h @ block(W_h, k) + x @ block(W_x, k) + block(b, k)  # noqa: E731
      f, i, o, c_tilde = sigmoid(gate(0)), sigmoid(gate(1)), sigmoid(gate(2)), np.tanh(gate(3))
      c = f * c + i * c_tilde
      h = o * np.tanh(c)
    else:  # blocks [u, r] of W_h, [u, r, h̃] of W_x   (seed 004)
      u = sigmoid(h @ block(W_h, 0) + x @ block(W_x, 0) + block(b, 0))
      r = sigmoid(h @ block(W_h, 1) + x @ block(W_x, 1) + block(b, 1))
      h_tilde = np.tanh((r * h) @ p['recurrent_candidate'] + x @ block(W_x, 2) + block(b, 2))
      h = (1 - u) * h + u * h_tilde
    outputs.append(h)
  final = np.stack([h, c]) if cell == 'lstm' else h[None]
  return np.stack(outputs, axis=1), final


def numpy_model(cell, params, words, state):
  x = params['C']['embedding'][words]
  finals = []
  for layer in range(state.shape[0]):
    x, final = numpy_layer(cell, params[f'layer{layer}'], x, state[layer])
    finals.append(final)
  return x, np.stack(finals)


def numpy_split_log_probs(lm, params, ids, boundary):
  """One pass over the whole split from h_0 = 0, then a full softmax over the vocabulary."""
  params = jax.tree.map(np.asarray, lm.variables_of(params)['params'])
  words = np.concatenate([[boundary], ids[:-1]])[None]
  hidden, _ = numpy_model(lm.model.cell, params['model'], words,
                          np.zeros(lm.model.initial_state(1).shape))
  logits = hidden[0] @ params['head']['output']['embedding'].T + params['head']['output']['bias']
  logits = logits - logits.max(axis=1, keepdims=True)
  log_z = np.log(np.exp(logits).sum(axis=1))
  return logits[np.arange(len(ids)), ids] - log_z


def init_params(lm, seed=0):
  words = jnp.zeros((1, 1), jnp.int32)
  params = lm.init(jax.random.key(seed), words, words, lm.model.initial_state(1),
                   method=lm.log_prob)['params']
  return lm.stored_params(params)


def stream_log_probs(config, lm, params, ids, boundary, segment_length):
  """The stream feed's exact log-probs of `ids`, one stream, `segment_length` words a
  segment."""
  feed = stream_feed.StreamFeed(config.replace(eval_batch_size=segment_length), lm,
                                {'split': ids}, boundary)
  return feed.log_probs(params, 'split')


# --- cells and the model ----------------------------------------------------------------

@pytest.mark.parametrize('cell', CELLS)
def test_each_cell_follows_its_numpy_recurrence_from_any_state(cell):
  config = rnn_config(model=cell, num_layers=2)
  lm = build_language_model(config, np.arange(30, 0, -1))
  params = init_params(lm)
  words = np.random.default_rng(1).integers(0, 30, (2, 6))
  state = np.random.default_rng(2).normal(size=lm.model.initial_state(2).shape) * 0.5
  hidden, final = lm.apply(lm.variables_of(params), words, state,
                           method=lambda m, w, s: m.model(w, s))
  want_hidden, want_final = numpy_model(cell, jax.tree.map(np.asarray, params['model']),
                                        words, state)
  np.testing.assert_allclose(hidden, want_hidden, atol=1e-5)
  np.testing.assert_allclose(final, want_final, atol=1e-5)


# --- streams and exact evaluation -----------------------------------------------------

@pytest.mark.parametrize('tokens,num_streams,length', [(23, 3, 4), (24, 4, 3), (5, 8, 2),
                                                        (100, 1, 7)])
def test_streams_hold_every_token_once_after_the_word_before_it(tokens, num_streams, length):
  ids = np.arange(10, 10 + tokens)
  words, targets, mask = streams.streams(ids, num_streams, length, boundary_id=1)
  segments = streams.num_segments(tokens, num_streams, length)
  assert words.shape == targets.shape == mask.shape == (num_streams, segments * length)
  assert sorted(targets[mask > 0]) == list(ids)  # Every token once.
  for b in range(num_streams):  # Each stream contiguous, its inputs one token behind.
    real = targets[b][mask[b] > 0]
    assert np.all(np.diff(real) == 1)
    previous = words[b][mask[b] > 0]
    np.testing.assert_array_equal(previous, np.where(real == 10, 1, real - 1))
  assert np.all(mask[:, :-length].sum(axis=0) > 0)  # Padding only in the last segment.


@pytest.mark.parametrize('cell', CELLS)
@pytest.mark.slow
def test_segmented_evaluation_equals_one_unsegmented_numpy_pass(cell, tiny_corpus):
  config = rnn_config(model=cell, num_layers=2)
  lm = build_language_model(config, tiny_corpus.vocab.counts)
  params = init_params(lm, seed=3)
  ids = tiny_corpus.splits['valid']
  boundary = int(tiny_corpus.vocab.encode([TEXT_END])[0])
  want = numpy_split_log_probs(lm, params, ids, boundary)
  for segment_length in (7, len(ids), 2048):  # 2048: one segment of the split's length.
    got = stream_log_probs(config, lm, params, ids, boundary, segment_length)
    assert got.shape == (len(ids),)
    np.testing.assert_allclose(got, want, atol=2e-5)
  feed = stream_feed.StreamFeed(config.replace(eval_batch_size=2048), lm, {'split': ids},
                                boundary)
  pieces, count = feed.scoring_pass(params, ids, len(ids))
  assert count == 1 and [mask.shape for _, mask in pieces] == [(1, -(-len(ids) // 8) * 8)]


def test_splits_of_different_lengths_share_one_compiled_scoring_program(tiny_corpus):
  """Valid (120 words, 14 segments of 9) and test's first 100 (12 segments): one program
  scores both (the one stream padded to one scored length, 128), each split the
  unsegmented numpy pass."""
  config = rnn_config()
  lm = build_language_model(config, tiny_corpus.vocab.counts)
  params = init_params(lm, seed=3)
  boundary = int(tiny_corpus.vocab.encode([TEXT_END])[0])
  splits = {'valid': tiny_corpus.splits['valid'], 'test': tiny_corpus.splits['test'][:100]}
  assert len(splits['valid']) == 120 and config.eval_batch_size == 9
  feed = stream_feed.StreamFeed(config, lm, splits, boundary)
  for name, ids in splits.items():
    np.testing.assert_allclose(feed.log_probs(params, name),
                               numpy_split_log_probs(lm, params, ids, boundary), atol=2e-5)
  assert feed.log_prob_step._cache_size() == 1  # pylint: disable=protected-access


@pytest.mark.slow
def test_training_carries_the_state_from_segment_to_segment_and_resets_it_each_epoch(
    tiny_corpus):
  """Each update's loss is the numpy NLL of its segment given everything before it in its
  stream (an optimizer step too small to move the weights)."""
  config = rnn_config(optimizer='sgd', learning_rate=1e-30, clip_norm=0.0)
  lm = build_language_model(config, tiny_corpus.vocab.counts)
  boundary = int(tiny_corpus.vocab.encode([TEXT_END])[0])
  feed = stream_feed.StreamFeed(config, lm, tiny_corpus.splits, boundary)
  state = feed.create_state(jax.random.key(0))
  params = state.params
  words, targets, mask = streams.streams(tiny_corpus.splits['train'], config.batch_size,
                                         config.bptt_length, boundary)
  per_stream = []
  for b in range(config.batch_size):  # Each stream read as one split from h_0 = 0.
    stream_ids = targets[b][mask[b] > 0]
    log_p = numpy_split_log_probs(lm, params, stream_ids, int(words[b, 0]))
    per_stream.append(np.pad(log_p, (0, mask.shape[1] - len(log_p))))
  nll = -np.stack(per_stream)
  T = config.bptt_length
  for epoch in range(2):
    state, batches = feed.start_epoch(state, epoch, 0)
    for (index,), tokens in batches:
      state, loss = feed.step(state, (index,), jax.random.key(1))
      segment = slice(index * T, (index + 1) * T)
      assert tokens == mask[:, segment].sum()
      assert float(loss) == pytest.approx(nll[:, segment].sum() / tokens, rel=1e-5)


# --- every head, tied embeddings, clipping ---------------------------------------------

@pytest.mark.parametrize('head', sorted(HEADS))
@pytest.mark.slow
def test_every_head_scores_recurrent_states_normalized_and_trains(head, tiny_corpus):
  sampled = {'num_samples': 5} if head in ('is', 'nce', 'negative_sampling') else {}
  config = rnn_config(model='gru', head=head, **sampled)
  lm = build_language_model(config, tiny_corpus.vocab.counts)
  params = init_params(lm)
  V = tiny_corpus.vocab.size
  words = np.random.default_rng(0).integers(0, V, (2, 4))
  state = lm.model.initial_state(2)
  variables = lm.variables_of(params)
  log_probs, _ = lm.apply(variables, words, state, method=lm.log_probs)
  assert log_probs.shape == (2, 4, V)
  np.testing.assert_allclose(np.exp(np.asarray(log_probs, np.float64)).sum(-1), 1.0, atol=1e-5)
  log_prob = jax.jit(lambda t: lm.apply(variables, words, t, state, method=lm.log_prob)[0])
  for target in range(0, V, 7):  # log_prob of a target = its entry in the full distribution.
    np.testing.assert_allclose(log_prob(np.full((2, 4), target)), log_probs[..., target],
                               atol=1e-5)
  boundary = int(tiny_corpus.vocab.encode([TEXT_END])[0])
  feed = stream_feed.StreamFeed(config, lm, tiny_corpus.splits, boundary)
  state = feed.create_state(jax.random.key(0))
  state, loss = feed.step(state, (0,), jax.random.key(1))
  assert math.isfinite(float(loss))


def test_tied_embeddings_are_one_array_for_input_and_output(tiny_corpus):
  config = rnn_config(model='rnn', feature_size=7, tie_embeddings=True)
  lm = build_language_model(config, tiny_corpus.vocab.counts)
  params = init_params(lm)
  assert 'embedding' not in params['head']['output']
  ids, boundary = tiny_corpus.splits['valid'], int(tiny_corpus.vocab.encode([TEXT_END])[0])
  want = numpy_split_log_probs(lm, params, ids, boundary)  # Output rows read from C.
  C = params['model']['C']['embedding']
  untied = {**params, 'head': {'output': {**params['head']['output'], 'embedding': C}}}
  assert lm.variables_of(params)['params']['head']['output']['embedding'] is C
  got = stream_log_probs(config, lm.clone(tied=False), untied, ids, boundary, 9)
  np.testing.assert_allclose(got, want, atol=2e-5)


@pytest.mark.parametrize('changes,message', [
    ({'tie_embeddings': True, 'head': 'tree'}, '--tie_embeddings needs a head'),
    ({'tie_embeddings': True}, 'as wide as the embeddings'),
])
def test_impossible_tying_is_refused_by_name(changes, message, tiny_corpus):
  with pytest.raises(ConfigError, match=message):
    build_language_model(rnn_config(**changes), tiny_corpus.vocab.counts)


@pytest.mark.parametrize('changes,message', [
    ({'direct': True}, '--direct is read by --model=nnlm, not --model=lstm'),
    ({'hidden_size': 0}, 'needs --hidden_size of at least 1'),
    ({'model': 'nnlm', 'num_layers': 2},
     '--num_layers is read by --model=rnn, lstm, gru, transformer, not --model=nnlm'),
    ({'model': 'nnlm'}, '--bptt_length is read by --model=rnn, lstm, gru, not --model=nnlm'),
    ({'model': 'nnlm', 'dropout': 1.0}, r'--dropout must be within \[0, 1\)'),
    ({'bptt_length': 0}, '--bptt_length must be positive'),
    ({'clip_norm': -1.0}, '--clip_norm must be 0'),
    ({'dropout': 1.0}, r'--dropout must be within \[0, 1\)'),
])
def test_invalid_recurrent_settings_are_refused_by_name(changes, message):
  with pytest.raises(ConfigError, match=message):
    rnn_config(**changes)


def test_clipping_bounds_the_update_to_the_clip_norm():
  config = rnn_config(optimizer='sgd', learning_rate=1.0, clip_norm=0.5)
  params = {'a': {'kernel': jnp.zeros((3, 4))}, 'b': {'bias': jnp.zeros(5)}}
  state = train_state.TrainState.create(apply_fn=None, params=params,
                                        tx=make_optimizer(config))
  rng = np.random.default_rng(0)
  for scale in (100.0, 1e-3):
    grads = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=x.shape) * scale), params)
    norm = np.sqrt(sum(np.sum(np.asarray(g) ** 2) for g in jax.tree.leaves(grads)))
    after = apply_gradients(config, state, grads)
    updates = jax.tree.map(lambda new, old: new - old, after.params, params)
    for g, u in zip(jax.tree.leaves(grads), jax.tree.leaves(updates)):
      np.testing.assert_allclose(u, -np.asarray(g) * min(1.0, 0.5 / norm), rtol=1e-5)
    update_norm = np.sqrt(sum(np.sum(np.asarray(u) ** 2) for u in jax.tree.leaves(updates)))
    assert update_norm <= 0.5 * (1 + 1e-6)


# --- the loop -------------------------------------------------------------------------

@pytest.mark.parametrize('cell', CELLS)
@pytest.mark.slow
def test_a_short_run_lowers_validation_perplexity_and_reports_exact_numbers(
    cell, tiny_corpus, tmp_path):
  config = rnn_config(tmp_path / cell, model=cell, epochs=3, patience=3, dropout=0.1,
                      learning_rate=2e-2)
  summary = run(config, tiny_corpus)
  lm = build_language_model(config, tiny_corpus.vocab.counts)
  boundary = int(tiny_corpus.vocab.encode([TEXT_END])[0])
  untrained = math.exp(-np.mean(numpy_split_log_probs(
      lm, init_params(lm, seed=config.seed), tiny_corpus.splits['valid'], boundary)))
  assert summary['valid_ppl'] < 0.8 * untrained
  best = jax.tree.map(np.asarray, saved_params(tmp_path / cell))
  for split in ('valid', 'test'):
    log_p = numpy_split_log_probs(lm, best, tiny_corpus.splits[split], boundary)
    assert summary[f'{split}_ppl'] == pytest.approx(math.exp(-np.mean(log_p)), rel=1e-5)
  scored = load_trained(tmp_path / cell).split_log_probs(tiny_corpus.splits['test'])
  np.testing.assert_allclose(scored, numpy_split_log_probs(
      lm, best, tiny_corpus.splits['test'], boundary), atol=2e-5)


@pytest.mark.slow
def test_a_run_stopped_mid_epoch_resumes_its_state_to_the_uninterrupted_result(
    tiny_corpus, tmp_path):
  config = rnn_config(tmp_path / 'whole', dropout=0.2)
  whole = run(config, tiny_corpus)
  steps_per_epoch = streams.num_segments(TINY_SPLIT['train_tokens'], config.batch_size,
                                         config.bptt_length)
  cut = config.replace(workdir=str(tmp_path / 'cut'), max_steps=steps_per_epoch + 3)
  assert run(cut, tiny_corpus)['status'] == 'max_steps'
  resumed = run(cut.replace(max_steps=0), tiny_corpus)
  for key in ('valid_ppl', 'test_ppl', 'steps', 'valid_ppl_history'):
    assert resumed[key] == pytest.approx(whole[key], rel=1e-6), key
  on_disk = json.loads((tmp_path / 'cut' / 'summary.json').read_text())
  assert on_disk['config']['model'] == 'lstm'
