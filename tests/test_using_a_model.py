"""Using a trained model: typed sentences scored, text sampled, nearest feature vectors, each
against an independent computation; and the three programs, run once each on a tiny run."""

import dataclasses
import json
import math
import os
import subprocess

import jax
import numpy as np
import pytest

from nplm.cli import score as score_program
from nplm.use import neighbours
from nplm.data.vocab import TEXT_END, UNK
from nplm.errors import ConfigError
from nplm.use.generation import Sampling, generate, generate_text, sampling_logits
from nplm.use.sentences import score_sentences
from tests import cli
from tests.test_model import numpy_eq1
from tests.test_rnn import numpy_model, numpy_split_log_probs

SENTENCE = 'The jury said zebra , and the election'  # 'zebra' is not in the tiny vocabulary.
KINDS = ('nnlm', 'lstm')


@pytest.fixture(scope='module')
def runs(quick_runs):
  """A feed-forward and a recurrent run, trained briefly and read back as the tools read them
  (the session's quick runs)."""
  return {kind: quick_runs(kind) for kind in KINDS}


def numpy_params(trained) -> dict:
  return jax.tree.map(np.asarray, trained.lm.variables_of(trained.params)['params'])


def numpy_next_log_probs(trained, history: list[int]) -> np.ndarray:
  """log p(· | history) [|V|], the history re-read in numpy from the start-of-split context."""
  config, params = trained.config, numpy_params(trained)
  boundary = trained.vocab.id_of(TEXT_END)
  if trained.lm.model.family == 'streams':  # From h_0 = 0, `</text>` the first input.
    hidden, _ = numpy_model(config.model, params['model'], np.array([[boundary, *history]]),
                            np.zeros(trained.lm.model.initial_state(1).shape))
    output = params['head']['output']
    logits = hidden[0, -1] @ output['embedding'].T + output['bias']
    logits = logits - logits.max()
    return logits - np.log(np.exp(logits).sum())
  padded = [boundary] * (config.order - 1) + history
  context = np.array([[padded[-1 - j] for j in range(config.order - 1)]])  # w_{t-1} first
  return numpy_eq1(params, context, config.hidden_size, config.direct)[0]


# --- scoring -------------------------------------------------------------------------------

@pytest.mark.slow
def test_feed_forward_scores_are_the_log_probs_of_explicit_windows(runs):
  trained = runs['nnlm']
  lm, vocab, n = trained.lm, trained.vocab, trained.config.order
  (score,) = score_sentences(trained, [SENTENCE])
  words, ids = SENTENCE.split(), vocab.encode(SENTENCE.split())
  assert [t.word for t in score.tokens] == words
  assert [t.token for t in score.tokens] == [w if w in vocab.words else UNK for w in words]
  assert UNK in [t.token for t in score.tokens] and 'jury' in vocab.words
  padded = [vocab.id_of(TEXT_END)] * (n - 1) + ids.tolist()
  context = np.array([[padded[t + n - 2 - j] for j in range(n - 1)] for t in range(len(ids))])
  got = np.array([t.log_prob - t.spelling_log_prob for t in score.tokens])  # Closed.
  np.testing.assert_allclose(got, lm.apply(lm.variables_of(trained.params), context, ids,
                                           method=lm.log_prob), rtol=1e-6)
  eq1 = numpy_eq1(numpy_params(trained), context, trained.config.hidden_size,
                  trained.config.direct)
  np.testing.assert_allclose(got, eq1[np.arange(len(ids)), ids], rtol=1e-5)
  # Open: the unknown word's spelling, ln q(zebra), added to its <unk>.
  spelt = [float(trained.spelling.log_prob([t.word])[0]) if t.oov else 0.0 for t in score.tokens]
  assert score.closed_log_prob == pytest.approx(got.sum())
  assert score.log_prob == pytest.approx(got.sum() + sum(spelt))
  assert score.perplexity == pytest.approx(math.exp(-(got.sum() + sum(spelt)) / len(ids)))


@pytest.mark.slow
def test_recurrent_scores_follow_the_numpy_recurrence_and_each_sentence_starts_afresh(runs):
  trained = runs['lstm']
  scores = score_sentences(trained, ['the jury', SENTENCE])
  ids = trained.vocab.encode(SENTENCE.split())
  want = numpy_split_log_probs(trained.lm, trained.params, ids, trained.vocab.id_of(TEXT_END))
  closed = [t.log_prob - t.spelling_log_prob for t in scores[1].tokens]
  np.testing.assert_allclose(closed, want, atol=2e-5)
  assert trained.sentence_end is None  # Brown's sentences end with no token to score.
  document = json.loads(json.dumps(scores[1].as_dict()))
  zebra = float(trained.spelling.log_prob(['zebra'])[0])
  assert document['closed_log_prob'] == pytest.approx(want.sum(), abs=1e-4)
  assert document['log_prob'] == pytest.approx(want.sum() + zebra, abs=1e-4)
  assert document['tokens'][3] == {'word': 'zebra', 'token': UNK, 'oov': True,
                                   'log_prob': pytest.approx(want[3] + zebra, abs=2e-5),
                                   'spelling_log_prob': pytest.approx(zebra, abs=1e-12)}
  with pytest.raises(ConfigError, match='sentence 2 has no words'):
    score_sentences(trained, ['the', '  '])


# --- sampling ------------------------------------------------------------------------------

def greedy_path(trained, prompt: list[int], length: int, no_unk: bool = False) -> list[int]:
  """The most probable word at each step, every step re-reading the history in numpy, on
  across the boundary token."""
  path = []
  while len(path) < length:
    log_probs = numpy_next_log_probs(trained, list(prompt) + path)
    if no_unk:
      log_probs[trained.vocab.unk_id] = -np.inf
    path.append(int(np.argmax(log_probs)))
  return path


@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.slow
def test_top_1_and_a_tiny_temperature_follow_the_greedy_path(runs, kind):
  trained = runs[kind]
  prompt = trained.vocab.encode('The jury said'.split()).tolist()
  for sampling in [Sampling(20, top_k=1, samples=2), Sampling(20, temperature=1e-6, samples=2),
                   Sampling(20, top_k=1, no_unk=True, samples=2)]:
    want = greedy_path(trained, prompt, 20, sampling.no_unk)
    got = generate(trained, prompt, sampling, seed=7)
    assert [s.tolist() for s in got] == [want, want], sampling


@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.slow
def test_samples_are_reproducible_per_seed_and_only_vocabulary_words(runs, kind):
  trained = runs[kind]
  sampling, prompt = Sampling(length=40, samples=3), trained.vocab.encode(['The'])
  first = [s.tolist() for s in generate(trained, prompt, sampling, seed=0)]
  assert first == [s.tolist() for s in generate(trained, prompt, sampling, seed=0)]
  assert first != [s.tolist() for s in generate(trained, prompt, sampling, seed=1)]
  alone = generate(trained, prompt, dataclasses.replace(sampling, samples=1), seed=0)
  assert alone[0].tolist() == first[0]  # A sample does not depend on the others.
  for ids in first:  # On across `</text>` to the full length.
    assert len(ids) == 40 and all(0 <= i < trained.vocab.size for i in ids)


@pytest.mark.slow
def test_draws_follow_the_tempered_top_k_distribution_and_no_unk_removes_unk(runs):
  trained, draws, temperature, k = runs['lstm'], 4000, 2.0, 12
  prompt = trained.vocab.encode('the jury'.split())
  log_p = numpy_next_log_probs(trained, prompt.tolist())
  kept = np.argsort(-log_p)[:k]
  want = np.zeros_like(log_p)
  want[kept] = np.exp(log_p[kept] / temperature) / np.exp(log_p[kept] / temperature).sum()
  np.testing.assert_allclose(jax.nn.softmax(sampling_logits(log_p, temperature, k)), want,
                             atol=1e-6)
  first = [s[0] for s in generate(trained, prompt, Sampling(1, temperature, k, samples=draws))]
  frequency = np.bincount(first, minlength=len(want)) / draws
  assert np.all(np.abs(frequency - want) <= 5 * np.sqrt(want * (1 - want) / draws) + 1e-3)
  unk = trained.vocab.unk_id
  free = generate(trained, [], Sampling(30, temperature=2.0, samples=8))
  assert any(unk in ids for ids in free)  # <unk> is the commonest token of the tiny corpus.
  masked = generate(trained, [], Sampling(30, temperature=2.0, samples=8, no_unk=True))
  assert not any(unk in ids for ids in masked)
  tiny = generate(trained, [], Sampling(12, temperature=1e-39, samples=8, no_unk=True))
  assert [ids.tolist() for ids in tiny] == [greedy_path(trained, [], 12, no_unk=True)] * 8


def test_no_unk_holds_at_any_temperature_and_a_tiny_one_is_greedy():
  log_p = np.log(np.random.default_rng(0).dirichlet(np.ones(50))).astype(np.float32)
  unk = 0
  log_p[[unk, np.argmax(log_p)]] = log_p[[np.argmax(log_p), unk]]  # The ban hits the best word.
  allowed = np.where(np.arange(len(log_p)) == unk, -np.inf, log_p.astype(np.float64))
  best = int(np.argmax(allowed))
  for temperature in (1e-39, 1e-30, 1e-6, 0.5, 3.0):
    want = np.exp((allowed - allowed[best]) / temperature)  # In float64: no overflow.
    got = jax.nn.softmax(sampling_logits(jax.numpy.asarray(log_p), temperature, banned=unk))
    np.testing.assert_allclose(got, want / want.sum(), atol=1e-6)
    assert got[unk] == 0 and np.argmax(got) == best


@pytest.mark.parametrize('changes,message', [({'length': 0}, '--length'),
                                             ({'temperature': -0.5}, '--temperature'),
                                             ({'top_p': 0.0}, '--top_p'),
                                             ({'top_p': 1.5}, '--top_p'),
                                             ({'sentences': -1}, '--sentences'),
                                             ({'top_k': -1}, '--top_k'),
                                             ({'samples': 0}, '--samples')])
def test_impossible_sampling_settings_are_refused_by_name(changes, message):
  with pytest.raises(ConfigError, match=message):
    Sampling(**changes).validate()


# --- feature vectors -----------------------------------------------------------------------

@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.slow
def test_nearest_words_are_the_most_cosine_similar_the_word_itself_first(runs, kind, tmp_path):
  trained = runs[kind]
  vocab, C = trained.vocab, np.asarray(trained.params['model']['C']['embedding'], np.float64)
  vectors = neighbours.feature_vectors(trained)
  for word in ('the', 'jury', UNK):
    near = neighbours.nearest(vectors, vocab, word, 6)
    assert near[0][0] == word and near[0][1] == pytest.approx(1.0, abs=1e-6)
    similarities = [s for _, s in near]
    assert len(near) == 6 and similarities == sorted(similarities, reverse=True)
    i = vocab.id_of(word)
    cosine = np.array([C[i] @ c / (np.linalg.norm(C[i]) * np.linalg.norm(c)) for c in C])
    np.testing.assert_allclose(similarities, [cosine[vocab.id_of(w)] for w, _ in near])
    np.testing.assert_allclose(similarities[1:], np.sort(np.delete(cosine, i))[::-1][:5])
  with pytest.raises(ConfigError, match='zebra'):
    neighbours.nearest(vectors, vocab, 'zebra', 3)
  neighbours.plot_words(vectors, vocab, ['the', 'jury', 'of', ','], tmp_path / 'c.png')
  assert (tmp_path / 'c.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
  assert os.listdir(tmp_path) == ['c.png']  # No temporary file left beside it.


# --- the programs --------------------------------------------------------------------------

def start(program: str, *args: str) -> subprocess.Popen:
  """The program started in a child (all children run side by side: each pays jax start-up)."""
  return cli.start(*args, module=f'experiments.{program}')


@pytest.mark.slow
def test_programs_print_scores_samples_and_neighbours(runs, tmp_path):
  nnlm, lstm = (runs[k].config.workdir for k in KINDS)
  # 'about 15 minutes from' alone would be all <unk> in the tiny vocabulary, and refused.
  sentences = ['the jury met about 15 minutes from', 'the jury met about 15 minuets from']
  children = [start('score', f'--workdir={nnlm}', '--details', *sentences),
              start('generate', f'--workdir={lstm}', '--length=12', '--seed=3', '--samples=2',
                    '--prompt=The jury'),
              start('neighbours', f'--workdir={nnlm}', '--words=the,jury', '--k=3',
                    f'--plot={tmp_path}/c.png')]
  (rc, score_out, err), (rc2, generate_out, err2), (rc3, neighbours_out, err3) = map(
      cli.finish, children)
  assert rc == rc2 == rc3 == 0, err + err2 + err3
  want = score_program.report_lines(score_sentences(runs['nnlm'], sentences), details=True)
  assert score_out == '\n'.join(want) + '\n'
  assert '<unk> (minuets)' in score_out and score_out.count(' ppl ') == 2
  samples = generate_text(runs['lstm'], 'The jury', Sampling(12, samples=2), seed=3)
  # Drawn one at a time and printed as they come, the samples are those drawn side by side.
  assert generate_out == ''.join(f'--- sample {number} ---\n{text}\n'
                                 for number, text in enumerate(samples, 1))
  assert generate_out.count('--- sample') == 2 and samples[0].startswith('The jury')
  vectors = neighbours.feature_vectors(runs['nnlm'])
  for word in ('the', 'jury'):
    listed = [f'{w:20} {s:7.4f}' for w, s in neighbours.nearest(vectors, runs['nnlm'].vocab,
                                                                  word, 3)]
    assert all(line in neighbours_out for line in listed)
  assert (tmp_path / 'c.png').read_bytes()[:4] == b'\x89PNG'


@pytest.mark.slow
def test_programs_refuse_bad_input_in_one_line(runs, tmp_path):
  nnlm = runs['nnlm'].config.workdir
  children = [start('score', f'--workdir={tmp_path}', 'a sentence'),
              start('generate', f'--workdir={nnlm}', '--temperature=-1'),
              start('neighbours', f'--workdir={nnlm}', '--words=zebra,gnu')]
  for child, phrase in zip(children, ['holds no training run', '--temperature must be 0',
                                      'zebra']):
    returncode, _, stderr = cli.finish(child)
    assert returncode == 2, stderr
    assert stderr.startswith('error: ') and phrase in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1 and 'Traceback' not in stderr, stderr
