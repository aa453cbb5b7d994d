"""word2vec's CBOW and skip-gram: scores and losses against numpy, the linear schedule, whole
runs through nplm.trainer, and the tools that refuse them (the feed's subsampling and
windows: tests/test_word2vec_feed.py)."""

import json
import logging
import math
from pathlib import Path

import jax
import numpy as np
import pytest
from flax.training import train_state

from nplm.run_files.saved_params import saved_params
from nplm.flagfiles import config_from_flagfile
from nplm.cli.mix import mix_report
from nplm.config import Config, ConfigError
from nplm.use.evaluation import evaluate
from nplm.use.generation import generate
from nplm.lm import build_language_model
from nplm.use.neighbours import feature_vectors, nearest
from nplm.training.optimizer import (apply_gradients, hyperparameters_of, make_optimizer,
                                    with_hyperparameters)
from nplm.training.schedules import learning_rate_at
from nplm.use.trained import load_trained
from nplm.use.sentences import score_sentences
from nplm.trainer import run
from nplm.training.word2vec_feed import Word2VecFeed
from tests import cli
from tests.conftest import TINY_SPLIT
from tests.test_word2vec_feed import numpy_context
from nplm.training.config_checks import validated

ABSENT = -1


# --- numpy references -------------------------------------------------------------------

def numpy_log_softmax(params, hidden: np.ndarray) -> np.ndarray:
  """log softmax(b + O h) over every output row, in float64."""
  out = params['head']['output']
  scores = hidden @ np.asarray(out['embedding'], np.float64).T + np.asarray(out['bias'])
  scores -= scores.max(axis=-1, keepdims=True)
  return scores - np.log(np.exp(scores).sum(axis=-1, keepdims=True))


def numpy_cbow_log_prob(params, ids, t: int, radius: int) -> float:
  vectors = np.asarray(params['model']['C']['embedding'], np.float64)
  context = numpy_context(ids, t, radius)
  hidden = vectors[context].mean(axis=0) if context else np.zeros(vectors.shape[1])
  return float(numpy_log_softmax(params, hidden)[ids[t]])


def numpy_skipgram_pairs(params, ids, t: int, radius: int) -> list[float]:
  """log p(w_{t+j} | w_t) for each context word."""
  vectors = np.asarray(params['model']['C']['embedding'], np.float64)
  log_p = numpy_log_softmax(params, vectors[ids[t]])
  return [float(log_p[word]) for word in numpy_context(ids, t, radius)]


def tiny_feed(model: str, window: int, head: str = 'softmax'):
  """A feed for a random 12-word vocabulary, with random output vectors (and, for the
  softmax, random non-zero biases)."""
  rng = np.random.default_rng(0)
  splits = {'train': rng.integers(0, 12, 60).astype(np.int32),
            'valid': rng.integers(0, 12, 23).astype(np.int32)}
  config = Config(workdir='unused', model=model, head=head, feature_size=6, window=window,
                  batch_size=8, eval_batch_size=5, optimizer='sgd', learning_rate=0.05)
  lm = build_language_model(config, np.bincount(splits['train'], minlength=12))
  feed = Word2VecFeed(config, lm, splits, boundary_id=0)
  state = feed.create_state(jax.random.key(3))
  params = jax.tree.map(np.array, state.params)
  for layer in params['head'].values():
    layer['embedding'] = rng.normal(size=layer['embedding'].shape).astype(np.float32)
    if head == 'softmax':
      layer['bias'] = rng.normal(size=layer['bias'].shape).astype(np.float32)
  params['model']['C']['embedding'] *= 20  # Scores far from uniform.
  return feed, state.replace(params=jax.tree.map(jax.numpy.asarray, params)), params, splits


def numpy_tree_log_prob(lm, params, hidden: np.ndarray, word: int) -> float:
  """log P(word | h) down the Huffman tree: Σ over its path's nodes of log σ(±o_n·h), + where
  the path turns right (word2vec's code 0), in float64."""
  tree, nodes = lm.head.tree, np.asarray(params['head']['nodes']['embedding'], np.float64)
  on_path = tree.mask[word]
  scores = nodes[tree.paths[word][on_path]] @ hidden
  signs = np.where(tree.bits[word][on_path], 1.0, -1.0)
  return float(np.sum(-np.logaddexp(0.0, -signs * scores)))


def numpy_path_step(lm, params, hidden: np.ndarray, word: int, alpha: float) -> None:
  """word2vec's step on the word's path, in place: o_n += α (bit - σ(o_n·h)) h, a node whose
  score is beyond ±6 left as it is."""
  tree = lm.head.tree
  nodes = params['head']['nodes']['embedding']
  path = tree.paths[word][tree.mask[word]]
  scores = nodes[path].astype(np.float64) @ hidden
  g = alpha * (tree.bits[word][tree.mask[word]] - 1.0 / (1.0 + np.exp(-scores)))
  nodes[path] += (np.where(np.abs(scores) < 6.0, g, 0.0)[:, None] * hidden).astype(nodes.dtype)


# --- scores and losses ------------------------------------------------------------------

def test_cbow_scores_each_token_from_the_mean_of_its_context_vectors():
  feed, _, params, splits = tiny_feed('cbow', window=3)
  got = feed.log_probs(params, 'valid')
  ids = splits['valid']
  want = [numpy_cbow_log_prob(params, ids, t, 3) for t in range(len(ids))]
  np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize('whole_distribution', [True, False])
def test_skipgram_scores_each_token_by_the_mean_log_prob_of_its_context_words(
    whole_distribution, monkeypatch):
  """Both ways: the softmax head's distribution read at each context word (the feed's way
  for it), and its log_prob per pair (the tree's way)."""
  feed, _, params, splits = tiny_feed('skipgram', window=2)
  ids = splits['valid']
  want = [np.mean(numpy_skipgram_pairs(params, ids, t, 2)) for t in range(len(ids))]
  np.testing.assert_allclose(feed.log_probs(params, 'valid'), want, atol=1e-5)
  monkeypatch.setattr(Word2VecFeed, 'whole_distribution', whole_distribution)
  got = feed.score(params, feed.splits['valid'], np.arange(len(ids)))
  np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize('model', ['cbow', 'skipgram'])
def test_the_logged_loss_is_the_mean_over_the_steps_examples_of_their_tree_losses(model):
  """Window 1: every radius is 1, so a step's examples are known without the draws: CBOW
  predicts w_t from the mean of its neighbours, skip-gram predicts w_t from each neighbour's
  C (word2vec's direction). The loss is of the scores each example trained on: the
  parameters the step found, but the path's nodes as a skip-gram position's earlier pairs
  left them (nplm.training.word2vec_update.path_in_turn)."""
  feed, state, params, splits = tiny_feed(model, window=1, head='tree')
  state, batches = feed.start_epoch(state, epoch=0, start=0)
  batch, held = next(batches)
  stream, positions, index = batch
  ids = splits['train']  # --subsample=0: the epoch's stream is the split.
  np.testing.assert_array_equal(np.asarray(stream)[1:-1], ids)
  centers = np.asarray(positions)[:8]
  assert int(index) == 0 and held == 8 and sorted(centers) == sorted(set(centers))
  vectors = np.asarray(params['model']['C']['embedding'], np.float64)
  losses = []
  for t in centers:
    context = numpy_context(ids, t, 1)
    if model == 'cbow':
      losses.append(-numpy_tree_log_prob(feed.lm, params, vectors[context].mean(0), ids[t]))
    else:
      taken = jax.tree.map(np.array, params)  # The position's pairs in turn on its path.
      for w in context:
        losses.append(-numpy_tree_log_prob(feed.lm, taken, vectors[w], ids[t]))
        numpy_path_step(feed.lm, taken, vectors[w], ids[t], feed.config.learning_rate)
  _, loss = feed.step(state, batch, jax.random.key(5))
  assert float(loss) == pytest.approx(np.mean(losses), rel=1e-5)


@pytest.mark.slow
def test_models_trained_together_take_the_updates_each_takes_alone():
  """K = 2 skip-gram models (negative sampling) in one vmapped step, each with its own
  learning rate and key, against each stepped alone on the same batch."""
  ids = np.random.default_rng(4).integers(0, 12, 80).astype(np.int32)
  configs = [Config(workdir=f'w{k}', model='skipgram', head='negative_sampling',
                    feature_size=6, window=2, batch_size=8, optimizer='sgd',
                    learning_rate=rate, lr_schedule='linear', num_samples=3)
             for k, rate in enumerate([0.5, 2.0])]
  lm = build_language_model(configs[0], np.bincount(ids, minlength=12))
  keys = [jax.random.key(k) for k in range(2)]
  together = Word2VecFeed(configs[0], lm, {'train': ids}, boundary_id=0, num_models=2)
  states = [with_hyperparameters(together.create_state(key),
                                 hyperparameters_of(config, together.steps_per_epoch))
            for config, key in zip(configs, keys)]
  stacked = jax.tree.map(lambda *leaves: jax.numpy.stack(leaves), *states)
  stacked, batches = together.start_epoch(stacked, epoch=1, start=2)
  batch, _ = next(batches)
  after, losses = together.step(stacked, batch, jax.numpy.stack(keys))
  alone = Word2VecFeed(configs[0], lm, {'train': ids}, boundary_id=0)
  for k, config in enumerate(configs):
    state = with_hyperparameters(alone.create_state(keys[k]),
                                 hyperparameters_of(config, alone.steps_per_epoch))
    state, loss = alone.step(state, batch, keys[k])
    assert float(losses[k]) == pytest.approx(float(loss), rel=1e-6)
    for mine, theirs in zip(jax.tree.leaves(state.params), jax.tree.leaves(after.params)):
      np.testing.assert_allclose(np.asarray(theirs)[k], mine, rtol=1e-5, atol=1e-7)


# --- the linear schedule ----------------------------------------------------------------

def test_the_linear_schedule_decays_to_a_floor_over_the_planned_steps():
  config = Config(workdir='unused', learning_rate=0.5, lr_schedule='linear')
  for t, want in [(0, 0.5), (25, 0.375), (50, 0.25), (99, 0.005), (100, 0.5e-4), (150, 0.5e-4)]:
    assert float(learning_rate_at(config, t, {'planned': 100})) == pytest.approx(want, rel=1e-6)
  inverse = Config(workdir='unused', learning_rate=0.5, lr_decay=0.1)
  assert learning_rate_at(inverse, 10, {'planned': 100}) == pytest.approx(0.25)


def after_61_updates(config, steps_per_epoch: int) -> np.ndarray:
  """The weights after 60 updates with a zero gradient and a 61st with a fixed one."""
  state = train_state.TrainState.create(apply_fn=None, params={'w': np.zeros(3, np.float32)},
                                        tx=make_optimizer(config, steps_per_epoch=steps_per_epoch))
  update = jax.jit(lambda state, grads: apply_gradients(config, state, grads))
  for _ in range(60):
    state = update(state, {'w': np.zeros(3, np.float32)})
  return np.asarray(update(state, {'w': np.array([1.0, -2.0, 0.5], np.float32)}).params['w'])


@pytest.mark.parametrize('optimizer', ['sgd', 'adamw'])
def test_an_update_takes_the_linear_rate_of_its_step(optimizer):
  """T = --epochs × steps per epoch = 4 × 25: update 61 (60 before it) has the rate 0.4 ε0,
  the update of a constant rate 0.4 ε0 (SGD: -0.2 times the gradient)."""
  linear = Config(workdir='unused', learning_rate=0.5, lr_schedule='linear', epochs=4,
                  optimizer=optimizer)
  constant = Config(workdir='unused', learning_rate=0.2, optimizer=optimizer)
  moved = after_61_updates(linear, steps_per_epoch=25)
  np.testing.assert_allclose(moved, after_61_updates(constant, steps_per_epoch=25), rtol=1e-6)
  if optimizer == 'sgd':
    np.testing.assert_allclose(moved, [-0.2, 0.4, -0.1], rtol=1e-6)


# --- configs ----------------------------------------------------------------------------

TRAINABLE = dict(head='tree', optimizer='sgd')  # What word2vec's update trains.


@pytest.mark.parametrize('changes,message', [
    (dict(model='cbow', window=0, **TRAINABLE), '--window must be at least 1'),
    (dict(model='skipgram', subsample=-1e-3, **TRAINABLE), '--subsample must be 0'),
    (dict(model='cbow', order=7, **TRAINABLE), '--order'),
    (dict(model='skipgram', hidden_size=50, dropout=0.1, **TRAINABLE),
     '--hidden_size is read by --model=nnlm, rnn, lstm, gru, transformer, not --model=skipgram'),
    (dict(model='skipgram', dropout=0.1, **TRAINABLE), '--dropout is read by'),
    (dict(model='nnlm', window=3), '--window is read by --model=cbow, skipgram, not --model=nnlm'),
    (dict(model='lstm', subsample=1e-3),
     '--subsample is read by --model=cbow, skipgram, not --model=lstm'),
    (dict(lr_schedule='exponential'), "unknown --lr_schedule='exponential'"),
    (dict(lr_schedule='linear', lr_decay=1e-8), "--lr_decay is the inverse schedule's"),
    (dict(patience=-1), '--patience must be 0'),
    (dict(model='cbow', head='softmax', optimizer='sgd'),
     "--model=cbow trains by word2vec's own update, with --head=tree"),
    (dict(model='skipgram', head='tree'), "set --optimizer=sgd, not --optimizer=adamw"),
    (dict(model='skipgram', head='tree', optimizer='sgd', weight_decay=1e-4),
     'set --weight_decay=0.0'),
    (dict(model='skipgram', head='tree', optimizer='sgd', clip_norm=1.0),
     'set --clip_norm=0.0'),
    (dict(model='cbow', head='tree', optimizer='sgd', tie_embeddings=True),
     '--tie_embeddings is read by'),
    (dict(model='cbow', head='tree', optimizer='sgd', batch_size=200, chunk_positions=128),
     '--chunk_positions must be 0'),
    (dict(learning_rate=0.01, min_learning_rate=0.1, lr_schedule='linear'),
     '--min_learning_rate must be within'),
    (dict(min_learning_rate=1e-4), '--min_learning_rate is where --lr_schedule=linear or cosine ends'),
])
def test_bad_word2vec_settings_are_refused_by_name(changes, message):
  with pytest.raises(ConfigError, match=message.replace('(', r'\(')):
    validated(Config(workdir='unused', **changes))


@pytest.mark.parametrize('name', ['cbow_ns', 'cbow_hs', 'skipgram_ns', 'skipgram_hs'])
def test_the_flagfiles_set_word2vecs_defaults(name):
  config = config_from_flagfile(name)  # The recipe nplm/recipes/<name>.flags.
  validated(config.resolved())
  model, head = name.split('_')
  assert config.model == model and config.head == {'ns': 'negative_sampling',
                                                    'hs': 'tree'}[head]
  assert (config.feature_size, config.window, config.subsample, config.epochs) == (
      100, 5, 1e-3, 5)
  assert config.unk_max_count == 4  # Words seen fewer than 5 times: gensim's min_count=5.
  assert (config.optimizer, config.lr_schedule, config.patience) == ('sgd', 'linear', 0)
  # alpha and min_alpha, per pair (skip-gram) or position (CBOW), whatever the batch.
  assert (config.learning_rate, config.min_learning_rate) == (
      {'cbow': 0.05, 'skipgram': 0.025}[model], 0.0001)
  if head == 'ns':
    assert (config.num_samples, config.proposal_power) == (5, 0.75)
  else:
    assert config.tree == 'huffman'


def test_a_linear_schedule_run_does_not_resume_with_other_epochs():
  saved = Config(workdir='w', lr_schedule='linear', epochs=5).to_dict()
  assert Config(workdir='w', lr_schedule='linear', epochs=5).incompatibilities(saved) == []
  (problem,) = Config(workdir='w', lr_schedule='linear', epochs=8).incompatibilities(saved)
  assert problem.startswith('epochs: checkpoint has 5, this run has 8')
  inverse = Config(workdir='w', epochs=5).to_dict()
  assert Config(workdir='w', epochs=8).incompatibilities(inverse) == []


# --- whole runs -------------------------------------------------------------------------

def tiny_run_config(workdir, head='negative_sampling', **changes) -> Config:
  sampled = dict(num_samples=5, proposal_power=0.75) if head == 'negative_sampling' else {}
  config = Config(workdir=str(workdir), model='cbow', head=head, feature_size=8,
                  window=2, subsample=1e-2, **sampled,
                  optimizer='sgd', lr_schedule='linear', learning_rate=0.1, batch_size=16,
                  epochs=3, patience=0, eval_batch_size=64, log_every=2, checkpoint_every=1000,
                  unk_max_count=1, **TINY_SPLIT)
  return config.replace(**changes)


def logged_losses(workdir) -> list[float]:
  lines = (json.loads(line) for line in (Path(workdir) / 'metrics.jsonl').read_text().splitlines())
  return [line['loss'] for line in lines if line['kind'] == 'train']


@pytest.fixture(scope='module')
def cbow_run(tiny_corpus, tmp_path_factory):
  root = tmp_path_factory.mktemp('word2vec')
  config = tiny_run_config(root / 'cbow', eval_splits='train,valid,test')  # Asked for.
  return config, run(config, tiny_corpus)


@pytest.mark.slow
def test_cbow_learns_and_reports_exact_scores_of_its_last_parameters(cbow_run, tiny_corpus):
  config, summary = cbow_run
  losses = logged_losses(config.workdir)
  assert np.mean(losses[-4:]) < np.mean(losses[:4]) - 0.3
  assert summary['status'] == 'epochs_done' and summary['best_epoch'] == 3  # --patience=0
  assert (Path(config.workdir) / 'learning_curve.png').exists()
  params = jax.tree.map(np.asarray, saved_params(Path(config.workdir)))
  ids = tiny_corpus.splits['valid']
  nll = -sum(numpy_cbow_log_prob(params, ids, t, config.window) for t in range(len(ids)))
  assert summary['valid_ppl'] == pytest.approx(math.exp(nll / len(ids)), rel=1e-5)
  assert summary['valid_ppl'] == pytest.approx(summary['valid_ppl_history'][-1], rel=1e-6)


@pytest.mark.slow
def test_a_run_stopped_mid_epoch_resumes_to_the_same_numbers(cbow_run, tiny_corpus, tmp_path):
  config, summary = cbow_run
  steps_per_epoch = summary['steps'] // config.epochs
  asked = dict(eval_splits=config.eval_splits)
  stopped = run(tiny_run_config(tmp_path / 'resumed', max_steps=steps_per_epoch + 3, **asked),
                tiny_corpus)
  assert stopped['status'] == 'max_steps'
  resumed = run(tiny_run_config(tmp_path / 'resumed', **asked), tiny_corpus)
  for key in ('train_ppl', 'valid_ppl', 'test_ppl'):
    assert resumed[key] == pytest.approx(summary[key], rel=1e-6)


@pytest.mark.slow
def test_skipgram_with_the_huffman_tree_learns_and_scores_no_perplexity_unless_asked(
    tiny_corpus, tmp_path, caplog):
  """Its training loss falls; no split is scored, each epoch or at the end, nor a
  validation recorded (--eval_splits left to auto, --patience=0); its vectors are saved."""
  config = tiny_run_config(tmp_path / 'skipgram', model='skipgram', head='tree')
  with caplog.at_level(logging.INFO, logger='nplm'):
    summary = run(config, tiny_corpus)
  losses = logged_losses(config.workdir)
  assert np.mean(losses[-4:]) < np.mean(losses[:4]) - 0.15
  saved = json.loads((tmp_path / 'skipgram' / 'summary.json').read_text())
  assert saved['status'] == 'epochs_done' and saved['epochs'] == config.epochs
  assert saved['evaluated'] == {} and not [key for key in saved if key.endswith('_ppl')]
  assert saved['valid_ppl_history'] == [] and saved['best_epoch'] is None
  assert saved['phase_seconds']['validation'] == 0 and saved['phase_seconds']['evaluation'] == {}
  assert saved['reported'] == {'parameters': 'last', 'step': saved['steps'], 'valid_ppl': None}
  kinds = {json.loads(line)['kind']
           for line in (tmp_path / 'skipgram' / 'metrics.jsonl').read_text().splitlines()}
  assert 'valid' not in kinds
  assert ('skipgram is not a language model: no perplexity is scored (--eval_splits=valid,test '
          'asks for them)') in caplog.messages
  vectors = saved_params(tmp_path / 'skipgram')['model']['C']['embedding']
  assert vectors.shape == (summary['vocab_size'], 8)


# --- the tools --------------------------------------------------------------------------

@pytest.mark.slow
def test_language_model_tools_refuse_a_word2vec_model_and_neighbours_read_it(cbow_run,
                                                                               tiny_corpus):
  config, _ = cbow_run
  trained = load_trained(config.workdir)
  refusal = 'is a word2vec model \\(--model=cbow\\), not a language model'
  with pytest.raises(ConfigError, match=refusal):
    score_sentences(trained, ['the jury said'])
  with pytest.raises(ConfigError, match=refusal):
    generate(trained)
  with pytest.raises(ConfigError, match=refusal):
    mix_report(trained, tiny_corpus)
  with pytest.raises(ConfigError, match=refusal):
    evaluate(trained, ('the',), {'text': np.zeros(3, np.int32)})
  word = trained.vocab.words[5]
  near = nearest(feature_vectors(trained), trained.vocab, word, 3)
  assert near[0] == (word, pytest.approx(1.0)) and len(near) == 3


@pytest.mark.slow
def test_a_program_refuses_a_word2vec_model_in_one_line(cbow_run):
  config, _ = cbow_run
  child = cli.run(f'--workdir={config.workdir}', module='experiments.evaluate')
  assert child.returncode == 2
  (line,) = child.stderr.strip().splitlines()
  assert line.startswith('error: ') and 'not a language model' in line

