"""The causal Transformer: a numpy forward of the whole model, the causal mask, exact
evaluation over every token, training on every position of non-overlapping windows, every
head, dropout, bfloat16 and models trained together."""

import math
import re

import jax
import numpy as np
import pytest

from nplm.run_files.saved_params import saved_params
from nplm.config import ConfigError
from nplm.data import batching
from nplm.data.vocab import TEXT_END
from nplm.use.generation import Sampling, generate
from nplm.lm import build_language_model, in_compute_dtype
from nplm.models.transformer import sinusoidal_encodings
from nplm.perplexity import perplexity
from nplm.use.trained import load_trained
from nplm.trainer import run
from nplm.training.window_feed import WindowFeed
from tests.test_heads import TRAINED_HEADS
from tests.test_train import tiny_config
from nplm.training.config_checks import validated

ORDER, D, HEADS = 5, 8, 2  # A window of 4 words; two heads of width 4.


def transformer_config(workdir='unused', **changes):
  config = tiny_config(workdir, model='transformer', order=ORDER, feature_size=D,
                       hidden_size=12, direct=False, num_layers=2, num_heads=HEADS)
  return validated(config.replace(**changes))


# --- the model written out in numpy ------------------------------------------------------

def formula_encodings(length, width):
  """Vaswani et al. 2017, section 3.5, one entry at a time."""
  table = np.zeros((length, width))
  for pos in range(length):
    for column in range(width):
      i = column // 2
      angle = pos / 10000 ** (2 * i / width)
      table[pos, column] = math.sin(angle) if column % 2 == 0 else math.cos(angle)
  return table


def layer_norm(x, p):
  mean = x.mean(-1, keepdims=True)
  variance = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(variance + 1e-6) * p['scale'] + p['bias']


def gelu(x):  # GPT-2's tanh form (jax.nn.gelu's default)
  return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def dense(x, p):
  return x @ p['kernel'] + p['bias']


def causal_attention(x, p, num_heads):
  """Per head softmax(Q Kᵀ / √d_k) V, position i reading positions j <= i, then W^O."""
  batch, length, width = x.shape
  qkv = dense(x, p['qkv'])
  split = lambda m: m.reshape(batch, length, num_heads, -1)  # noqa: E731
  q, k, v = (split(qkv[..., part * width:(part + 1) * width]) for part in range(3))
  out = np.zeros_like(q)
  for b in range(batch):
    for h in range(num_heads):
      for i in range(length):
        scores = k[b, :i + 1, h] @ q[b, i, h] / np.sqrt(q.shape[-1])
        weights = np.exp(scores - scores.max())
        out[b, i, h] = (weights / weights.sum()) @ v[b, :i + 1, h]
  return dense(out.reshape(batch, length, width), p['output'])


def numpy_every_position(params, context, num_heads):
  """[B, n-1, d] in time order from the context given w_{t-1} first."""
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), params['model'])
  words = context[:, ::-1]
  C = p['C']['embedding']
  positions = p['positions'] if 'positions' in p else formula_encodings(*words.shape[1:],
                                                                        C.shape[1])
  x = C[words] * np.sqrt(C.shape[1]) + positions
  for layer in range(sum(name.startswith('block_') for name in p)):
    block = p[f'block_{layer}']
    x = x + causal_attention(layer_norm(x, block['attention_norm']), block['attention'],
                             num_heads)
    x = x + dense(gelu(dense(layer_norm(x, block['ffn_norm']), block['ffn']['hidden'])),
                  block['ffn']['output'])
  return layer_norm(x, p['final_norm'])


def log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def numpy_log_probs(params, context, num_heads):
  """log p(· | each prefix of the window) under the softmax head: [B, n-1, |V|]."""
  out = params['head']['output']
  hidden = numpy_every_position(params, context, num_heads)
  return log_softmax(hidden @ np.asarray(out['embedding'], np.float64).T
                     + np.asarray(out['bias'], np.float64))


def numpy_split_log_probs(params, ids, boundary, order, num_heads):
  """log p(w_t | its n-1 previous words) for every token, the windows built one by one."""
  stream = [boundary] * (order - 1) + [int(i) for i in ids]
  contexts = np.array([[stream[t + order - 2 - j] for j in range(order - 1)]
                       for t in range(len(ids))])
  return numpy_log_probs(params, contexts, num_heads)[np.arange(len(ids)), -1, ids]


def random_params(lm, vocab_size, seed=0):
  """Initial parameters plus noise, so that every bias and LayerNorm scale is exercised."""
  context = np.zeros((1, ORDER - 1), np.int32)
  params = jax.jit(lambda key: lm.init(key, context, method=lm.log_probs))(
      jax.random.key(seed))['params']
  rng = np.random.default_rng(seed)
  return jax.tree.map(lambda p: (np.asarray(p) + 0.2 * rng.normal(size=p.shape)).astype(
      np.float32), params)


def every_position_log_probs(lm):
  """(params, context) -> log p(· | each prefix of the window) [B, n-1, |V|], compiled."""
  return jax.jit(lambda params, context: lm.apply(
      {'params': params}, context, method=lambda m, c: m.head.log_probs(
          m.model.every_position(c).reshape(-1, D)).reshape(*c.shape, -1)))


# --- the model against numpy -------------------------------------------------------------

def test_sinusoidal_encodings_follow_the_formula():
  for length, width in [(7, 8), (5, 9)]:
    np.testing.assert_allclose(sinusoidal_encodings(length, width),
                               formula_encodings(length, width), atol=1e-6)


@pytest.mark.parametrize('positions', ['sinusoidal', 'learned'])
@pytest.mark.slow
def test_log_probs_and_training_loss_match_a_numpy_forward(positions):
  """Every position's distribution equals the numpy model's; log_prob and log_probs read the
  last position and agree; the training loss is the mean over the window of -log p of the
  word after each position (the window shifted by one, then the target)."""
  vocab_size = 17
  lm = build_language_model(transformer_config(positions=positions), np.ones(vocab_size))
  params = random_params(lm, vocab_size)
  assert ('positions' in params['model']) == (positions == 'learned')
  context = np.random.default_rng(3).integers(0, vocab_size, (6, ORDER - 1)).astype(np.int32)
  targets = np.arange(6, dtype=np.int32) % vocab_size
  want = numpy_log_probs(params, context, HEADS)
  np.testing.assert_allclose(every_position_log_probs(lm)(params, context), want, atol=1e-4)
  got, got_target, loss = jax.jit(lambda v: (
      lm.apply(v, context, method=lm.log_probs), lm.apply(v, context, targets, method=lm.log_prob),
      lm.apply(v, context, targets, jax.random.key(0), method=lm.loss)))({'params': params})
  got = np.asarray(got, np.float64)
  np.testing.assert_allclose(got, want[:, -1], atol=1e-4)
  np.testing.assert_allclose(np.exp(got).sum(-1), 1.0, atol=1e-5)
  np.testing.assert_allclose(got_target, want[np.arange(6), -1, targets], atol=1e-4)
  following = np.concatenate([context[:, ::-1][:, 1:], targets[:, None]], axis=1)
  want_loss = -np.take_along_axis(want, following[..., None], axis=-1)[..., 0].mean(axis=1)
  np.testing.assert_allclose(loss, want_loss, atol=1e-4)


def test_the_mask_is_causal_and_every_word_of_the_window_counts():
  """Changing a word of the window never changes the distributions at the positions before
  it, and always changes the ones at and after it: p(w_t) reads every w_{t-k}, k < n."""
  vocab_size = 17
  lm = build_language_model(transformer_config(), np.ones(vocab_size))
  params = random_params(lm, vocab_size)
  context = np.random.default_rng(4).integers(0, vocab_size, (1, ORDER - 1)).astype(np.int32)
  log_probs = every_position_log_probs(lm)
  before = np.asarray(log_probs(params, context)[0])
  for k in range(ORDER - 1):  # context[:, k] is w_{t-1-k}, at time position n-2-k.
    changed = context.copy()
    changed[0, k] = (changed[0, k] + 1) % vocab_size
    after = np.asarray(log_probs(params, changed)[0])
    position = ORDER - 2 - k
    np.testing.assert_array_equal(after[:position], before[:position])
    assert np.all(np.abs(after[position:] - before[position:]).max(axis=-1) > 1e-4)


@pytest.mark.slow
def test_exact_evaluation_sums_every_token_with_its_n_minus_1_previous_words(tiny_corpus):
  """WindowFeed's log p of every token of a split (padded last batch) equals the numpy
  model's, each window built by hand from the boundary-padded split."""
  config = transformer_config(eval_batch_size=7)
  lm = build_language_model(config, tiny_corpus.vocab.counts)
  feed = WindowFeed(config, lm, tiny_corpus.splits, tiny_corpus.boundary_id)
  feed.create_state(jax.random.key(0))
  params = random_params(lm, tiny_corpus.vocab.size)
  ids = tiny_corpus.splits['valid']
  assert len(ids) % config.eval_batch_size
  got = feed.log_probs(params, 'valid')
  boundary = int(tiny_corpus.vocab.encode([TEXT_END])[0])
  np.testing.assert_allclose(got, numpy_split_log_probs(params, ids, boundary, ORDER, HEADS),
                             atol=1e-4)


# --- training ----------------------------------------------------------------------------

@pytest.mark.parametrize('num_tokens', [12, 13, 14, 15])
def test_training_windows_cover_every_token_once_per_epoch(tiny_corpus, num_tokens):
  """Positions every n-1 from the last token: the n-1 targets of each window (padded
  indices t+1 … t+n-1) cover each of the split's tokens exactly once; only the first window
  reaches into the padding. The feed counts those windows as its steps and their targets as
  its examples."""
  window, batch_size = ORDER - 1, 2
  covered = []
  for positions, mask in batching.train_batches(num_tokens, batch_size, seed=1, epoch=2,
                                                stride=window):
    covered += [index for t in positions[mask > 0] for index in range(t + 1, t + window + 1)]
  split_indices = [index - window for index in covered if index >= window]
  assert sorted(split_indices) == list(range(num_tokens))
  assert len(covered) - num_tokens == -num_tokens % window

  config = transformer_config(batch_size=batch_size)
  lm = build_language_model(config, tiny_corpus.vocab.counts)
  splits = {**tiny_corpus.splits, 'train': tiny_corpus.splits['train'][:num_tokens]}
  feed = WindowFeed(config, lm, splits, tiny_corpus.boundary_id)
  windows = -(-num_tokens // window)
  assert feed.steps_per_epoch == -(-windows // batch_size)
  _, batches = feed.start_epoch(None, epoch=0, start=1)
  assert sum(examples for _, examples in batches) == (windows - batch_size) * window


def train_by_feed(config, corpus, epochs):
  """(exact validation perplexity before, after, lm, trained parameters): `epochs` of
  WindowFeed's updates, no workdir."""
  lm = build_language_model(config, corpus.vocab.counts)
  feed = WindowFeed(config, lm, corpus.splits, corpus.boundary_id)
  init_rng, run_rng = jax.random.split(jax.random.key(config.seed))
  state = feed.create_state(init_rng)
  before = valid_perplexity(feed, state.params)
  for epoch in range(epochs):
    state, batches = feed.start_epoch(state, epoch, 0)
    for batch, _ in batches:
      state, _ = feed.step(state, batch, run_rng)
  state = feed.pay_decay_debts(state)
  return before, valid_perplexity(feed, state.params), lm, state.params


def valid_perplexity(feed, params) -> float:
  """exp(Σ NLL / Σ tokens) of the feed's exact log-probs of the validation split."""
  return perplexity(-np.sum(feed.log_probs(params, 'valid')), feed.sizes['valid'])['ppl']


@pytest.mark.parametrize('head', ['softmax', 'class', 'tree', 'is', 'nce', 'adaptive'])
@pytest.mark.slow
def test_every_head_trains_and_evaluates_normalized(tiny_corpus, head):
  """A short training lowers the exact validation perplexity by at least 5%, and the trained
  model's distributions sum to 1 with log_prob equal to log_probs at the target."""
  config = transformer_config(head=head, num_layers=1, **TRAINED_HEADS[head])
  before, after, lm, params = train_by_feed(config, tiny_corpus, epochs=4)
  assert after < 0.95 * before
  padded = batching.pad_split(tiny_corpus.splits['test'], ORDER, tiny_corpus.boundary_id)
  context, targets = batching.windows(padded, np.arange(20), ORDER)
  variables = lm.variables_of(params)
  log_probs, log_prob = jax.jit(lambda v, c, t: (
      lm.apply(v, c, method=lm.log_probs), lm.apply(v, c, t, method=lm.log_prob)))(
          variables, context, targets)
  log_probs = np.asarray(log_probs, np.float64)
  np.testing.assert_allclose(np.exp(log_probs).sum(-1), 1.0, atol=1e-5)
  np.testing.assert_allclose(log_prob, log_probs[np.arange(20), targets], atol=1e-5)


@pytest.mark.slow
def test_a_run_with_dropout_tied_learned_positions_and_bfloat16(tiny_corpus, tmp_path):
  """nplm.trainer with dropout, tied embeddings, learned positions and --dtype=bfloat16: the
  hidden vectors are bfloat16 in training, the saved parameters float32; the reported
  perplexities are the numpy model's (float64, without dropout) over every token of each
  split and lower than the start's; evaluating twice gives the same; the trained model
  scores and generates."""
  config = transformer_config(tmp_path / 'run', num_layers=1, dropout=0.1, tie_embeddings=True,
                              positions='learned', dtype='bfloat16', epochs=3, patience=3)
  summary = run(config, tiny_corpus)
  params = jax.tree.map(np.asarray, saved_params(tmp_path / 'run'))
  assert 'embedding' not in params['head']['output']
  assert {leaf.dtype for leaf in jax.tree.leaves(params)} == {np.dtype(np.float32)}
  lm = build_language_model(config, tiny_corpus.vocab.counts)
  hidden = jax.jit(lambda p: lm.apply({'params': in_compute_dtype(p, 'bfloat16')},
                                      np.zeros((2, ORDER - 1), np.int32), train=True,
                                      rngs={'dropout': jax.random.key(0)},
                                      method=lambda m, c, train: m.model(c, train)))(
      lm.variables_of(params)['params'])
  assert hidden.dtype == np.dtype('bfloat16')
  full = lm.variables_of(params)['params']
  boundary = int(tiny_corpus.vocab.encode([TEXT_END])[0])
  for split in ('valid', 'test'):
    ids = tiny_corpus.splits[split]
    want = np.exp(-np.mean(numpy_split_log_probs(full, ids, boundary, ORDER, HEADS)))
    assert summary[f'{split}_ppl'] == pytest.approx(want, rel=1e-5)
  assert summary['valid_ppl'] < 0.95 * initial_valid_perplexity(config, tiny_corpus)
  trained = load_trained(tmp_path / 'run')
  once, twice = (trained.split_log_probs(tiny_corpus.splits['valid']) for _ in range(2))
  np.testing.assert_array_equal(once, twice)
  (sample,) = generate(trained, prompt=tiny_corpus.splits['test'][:3],
                       sampling=Sampling(length=6))
  assert 1 <= len(sample) <= 6 and np.all(sample < tiny_corpus.vocab.size)


def initial_valid_perplexity(config, corpus) -> float:
  """The numpy model's exact validation perplexity of the parameters a run starts from."""
  lm = build_language_model(config, corpus.vocab.counts)
  init_rng, _ = jax.random.split(jax.random.key(config.seed))
  context, targets = np.zeros((1, ORDER - 1), np.int32), np.zeros(1, np.int32)
  initialized = jax.jit(lambda key: lm.init(key, context, targets, method=lm.log_prob))(
      init_rng)['params']
  params = lm.variables_of(lm.stored_params(initialized))['params']  # A tied head reads C.
  boundary = int(corpus.vocab.encode([TEXT_END])[0])
  log_p = numpy_split_log_probs(params, corpus.splits['valid'], boundary, ORDER, HEADS)
  return float(np.exp(-np.mean(log_p)))


def test_dropout_masks_change_the_training_loss(tiny_corpus):
  """Dropout is on in training: two dropout keys give two losses, and the loss without
  dropout keys differs from both."""
  lm = build_language_model(transformer_config(dropout=0.3), tiny_corpus.vocab.counts)
  params = random_params(lm, tiny_corpus.vocab.size)
  context, targets = batching.windows(batching.pad_split(tiny_corpus.splits['train'], ORDER, 0),
                                      np.arange(8), ORDER)

  @jax.jit
  def loss(key):
    return lm.apply({'params': params}, context, targets, jax.random.key(0),
                    rngs={'dropout': key}, method=lm.loss)
  assert not np.allclose(loss(jax.random.key(1)), loss(jax.random.key(2)))
  plain = build_language_model(transformer_config(), tiny_corpus.vocab.counts)
  no_dropout = jax.jit(lambda: plain.apply({'params': params}, context, targets,
                                           jax.random.key(0), method=plain.loss))()
  assert not np.allclose(loss(jax.random.key(1)), no_dropout)


@pytest.mark.slow
def test_a_model_trained_together_equals_it_trained_alone(tiny_corpus, tmp_path):
  """Two transformers in one vmapped program (other seed and learning rate): the second's
  numbers equal the same config trained alone."""
  configs = [transformer_config(tmp_path / f'together{k}', seed=k, learning_rate=rate,
                                data_seed=7, num_layers=1, epochs=1, patience=1)
             for k, rate in enumerate([1e-2, 3e-3])]
  together = run(configs, tiny_corpus)
  alone = run(configs[1].replace(workdir=str(tmp_path / 'alone')), tiny_corpus)
  assert together[1]['steps'] == alone['steps']
  assert together[0]['valid_ppl'] != together[1]['valid_ppl']
  for split in ('train', 'valid', 'test'):
    assert together[1][f'{split}_ppl'] == pytest.approx(alone[f'{split}_ppl'], rel=1e-4)


# --- refusals ----------------------------------------------------------------------------

@pytest.mark.parametrize('changes,message', [
    ({'num_heads': 3}, '--num_heads=3 must divide --feature_size=8'),
    ({'num_heads': 0}, '--num_heads must be positive'),
    ({'direct': True}, '--direct is read by --model=nnlm, not --model=transformer'),
    ({'positions': 'rotary'}, "unknown --positions='rotary'; known: sinusoidal, learned"),
    ({'hidden_size': 0}, '--model=transformer needs --hidden_size'),
    ({'num_layers': 0}, '--num_layers must be positive'),
    ({'order': 1}, '--order must be at least 2'),
    ({'model': 'nnlm', 'num_layers': 1, 'num_heads': 2},
     '--num_heads is read by --model=transformer, not --model=nnlm'),
    ({'model': 'nnlm', 'num_layers': 1, 'num_heads': 1, 'positions': 'learned'},
     '--positions is read by --model=transformer, not --model=nnlm'),
    ({'model': 'lstm', 'num_heads': 2}, '--num_heads is read by --model=transformer, not '
     '--model=lstm'),
    ({'model': 'lstm', 'num_heads': 1, 'order': 3},
     '--order is read by --model=nnlm, transformer, not --model=lstm'),
])
def test_bad_combinations_are_refused_in_one_line(changes, message):
  config = transformer_config().replace(**changes)
  with pytest.raises(ConfigError, match=re.escape(message)):
    validated(config)
