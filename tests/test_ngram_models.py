"""N-gram models as models: saved by `nplm ngram`, read back by every tool, written as ARPA
(read back by a reader written here, and by KenLM), and mixed with any other model."""

import collections
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nplm import trainer
from nplm.cli import mix as mix_program
from nplm.cli import ngram as ngram_program
from nplm.config import Config, ConfigError
from nplm.data.datasets import load_dataset
from nplm.use.ngram_run import NgramRun, save_ngram_run
from nplm.use.trained import load_trained
from tests.conftest import write_text_corpus
from nplm.data.config_checks import validated_data
from tests import cli

MODELS = {'KN3': ('kn', 3), 'KN5': ('kn', 5), 'DelInt3': ('delint', 3)}


def nplm(*args: str) -> subprocess.CompletedProcess:
  return cli.run(*args)


def succeeded(result: subprocess.CompletedProcess) -> str:
  assert result.returncode == 0 and 'Traceback' not in result.stderr, result.stderr
  return result.stdout


@pytest.fixture(scope='module')
def fitted(tmp_path_factory):
  """(corpus, {name: (the fitted model, its DIR)}): each model fitted on a text:DIR corpus
  and saved as `nplm ngram` saves it."""
  root = tmp_path_factory.mktemp('ngram_models')
  config = validated_data(Config(workdir='', dataset=f'text:{write_text_corpus(root / "toy")}',
                  data_dir=str(root / 'tfds')).resolved())
  corpus = load_dataset(config)
  models = {}
  for name, (kind, order) in MODELS.items():
    model, spelt, summary = ngram_program.results(corpus, config, kind, order)
    save_ngram_run(root / name, model, spelt, corpus, summary)
    models[name] = (model, root / name)
  return corpus, models


@pytest.mark.parametrize('name', list(MODELS))
def test_a_saved_model_reads_back_with_identical_log_probs(fitted, name):
  corpus, models = fitted
  model, where = models[name]
  run = load_trained(where)
  assert isinstance(run, NgramRun) and run.name == name
  assert run.context_length == model.order - 1
  assert run.vocab.words == corpus.vocab.words and run.boundary_id == corpus.boundary_id
  assert run.data_fingerprint == corpus.fingerprint
  for split, ids in corpus.splits.items():
    assert np.array_equal(run.split_log_probs(ids), model.log_prob_split(ids)), split


def read_arpa(path: Path) -> tuple[int, dict, dict]:
  """(order, log10 p and log10 backoff per n-gram tuple) of an ARPA file."""
  probs, backoffs, counts, order = {}, {}, {}, 0
  section = None
  for line in path.read_text().splitlines():
    if not line.strip() or line == '\\end\\':
      continue
    if line == '\\data\\':
      section = 'data'
    elif line.startswith('\\') and line.endswith('-grams:'):
      section = int(line[1:-len('-grams:')])
      order = max(order, section)
    elif section == 'data':
      k, count = line.removeprefix('ngram ').split('=')
      counts[int(k)] = int(count)
    else:
      fields = line.split('\t')
      gram = tuple(fields[1].split(' '))
      assert len(gram) == section
      probs[gram] = float(fields[0])
      if len(fields) == 3:
        backoffs[gram] = float(fields[2])
  assert counts == dict(collections.Counter(len(g) for g in probs))
  return order, probs, backoffs


def arpa_log10(order, probs, backoffs, history: tuple, word: str) -> float:
  """The backoff rule: p(w | h) = p(h w) if listed, else bo(h) · p(w | h'), in log10."""
  history = history[max(len(history) - (order - 1), 0):] if order > 1 else ()
  if (*history, word) in probs:
    return probs[(*history, word)]
  return backoffs.get(history, 0.0) + arpa_log10(order, probs, backoffs, history[1:], word)


def tokens_after_boundary(corpus, order, split):
  boundary = corpus.vocab.words[corpus.boundary_id]
  return [boundary] * (order - 1), corpus.vocab.decode(corpus.splits[split])


@pytest.mark.parametrize('name', ['KN3', 'KN5'])
def test_the_arpa_file_gives_nplms_log_probs_to_an_independent_reader(fitted, name):
  corpus, models = fitted
  model, where = models[name]
  order, probs, backoffs = read_arpa(where / 'model.arpa')
  assert order == model.order
  assert set(corpus.vocab.words) <= {g[0] for g in probs if len(g) == 1}
  padding, tokens = tokens_after_boundary(corpus, order, 'test')
  stream = padding + tokens
  ours = [math.log(10) * arpa_log10(order, probs, backoffs, tuple(stream[t:t + order - 1]),
                                    stream[t + order - 1]) for t in range(len(tokens))]
  np.testing.assert_allclose(ours, model.log_prob_split(corpus.splits['test']), atol=1e-4)
  # Normalized over the vocabulary after a seen and an unseen context.
  for history in (tuple(stream[:order - 1]), ('of',) * (order - 1)):
    total = sum(10 ** arpa_log10(order, probs, backoffs, history, w) for w in corpus.vocab.words)
    assert total == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize('name', ['KN3', 'KN5'])
def test_kenlm_reads_the_arpa_file_and_gives_nplms_log_probs(fitted, name):
  kenlm = pytest.importorskip('kenlm')
  corpus, models = fitted
  model, where = models[name]
  lm = kenlm.Model(str(where / 'model.arpa'))
  padding, tokens = tokens_after_boundary(corpus, model.order, 'test')
  state, out = kenlm.State(), kenlm.State()
  lm.NullContextWrite(state)
  scores = []
  for token in padding + tokens:
    scores.append(lm.BaseScore(state, token, out))
    state, out = out, state
  np.testing.assert_allclose(np.array(scores[len(padding):]) * math.log(10),
                             model.log_prob_split(corpus.splits['test']), atol=1e-4)


def test_delint3_writes_no_arpa_file_and_says_why(fitted):
  _, models = fitted
  where = models['DelInt3'][1]
  record = json.loads((where / 'ngram.json').read_text())['arpa']
  assert not (where / 'model.arpa').exists() and record['file'] is None
  assert 'Kneser-Ney' in record['why_not']


@pytest.mark.parametrize('name', list(MODELS))
def test_next_words_sum_to_one_and_match_split_log_probs(fitted, name):
  corpus, models = fitted
  run = load_trained(models[name][1])
  ids = corpus.splits['test'][:40]
  expected = run.split_log_probs(corpus.splits['test'])[:40]
  reader = run.next_words()
  # Row 0 reads the split from its start; row 1 starts after a 5-token prompt of it.
  state = reader.start(np.stack([ids[:0], ids[:0]]).astype(np.int32))
  late = reader.start(ids[None, :5].astype(np.int32))
  for t in range(len(ids)):
    log_probs, state = reader.next(state)
    assert log_probs.shape == (2, corpus.vocab.size) and log_probs.dtype == np.float32
    np.testing.assert_allclose(np.exp(log_probs.astype(np.float64)).sum(axis=1), 1.0,
                               atol=1e-5)
    assert log_probs[0, ids[t]] == pytest.approx(expected[t], abs=1e-5)
    if t >= 5:
      log_late, late = reader.next(late)
      assert log_late[0, ids[t]] == pytest.approx(expected[t], abs=1e-5)
      late = reader.push(late, ids[t:t + 1])
    state = reader.push(state, np.array([ids[t], ids[t]]))


def numpy_em(log_probs_a, log_probs_b, iterations=20_000):
  """λ of p = λ p_a + (1 - λ) p_b maximizing the likelihood, by plain EM."""
  p_a, p_b, weight = np.exp(log_probs_a), np.exp(log_probs_b), 0.5
  for _ in range(iterations):
    updated = np.mean(weight * p_a / (weight * p_a + (1 - weight) * p_b))
    if abs(updated - weight) < 1e-12:
      break
    weight = updated
  return weight


def numpy_perplexity(log_probs_a, log_probs_b, weights):
  return float(np.exp(-np.mean(np.log(weights * np.exp(log_probs_a)
                                      + (1 - weights) * np.exp(log_probs_b)))))


def context_bins_by_hand(corpus, split):
  """Each token's bin: 0 for a context (w_{t-2}, w_{t-1}) never followed in training, else
  1 + ⌊log2 count⌋, at most 15."""
  boundary = corpus.boundary_id
  train = [boundary, boundary, *corpus.splits['train'].tolist()]
  counts = collections.Counter(zip(train[:-2], train[1:-1]))
  stream = [boundary, boundary, *corpus.splits[split].tolist()]
  return np.array([min(1 + int(math.log2(counts[c])), 15) if counts[c] else 0
                   for c in zip(stream[:-2], stream[1:-1])])


@pytest.mark.parametrize('pair', [('KN3', 'KN5'), ('KN5', 'DelInt3')])
def test_mixing_two_ngram_models_matches_numpy(fitted, pair):
  corpus, models = fitted
  a, b = (load_trained(models[name][1]) for name in pair)
  (log_probs_a, log_probs_b), mixed = mix_program.mixes([a, b], corpus)
  for split in ('valid', 'test'):
    lp_a, lp_b = (models[name][0].log_prob_split(corpus.splits[split]) for name in pair)
    np.testing.assert_array_equal(log_probs_a[split], lp_a)
    assert mixed['fixed']['ppl'][split] == pytest.approx(numpy_perplexity(lp_a, lp_b, 0.5),
                                                         rel=1e-12)
  valid_a, valid_b = log_probs_a['valid'], log_probs_b['valid']
  weight = numpy_em(valid_a, valid_b)
  assert mixed['learned']['weights'][0, 0] == pytest.approx(weight, abs=2e-3)
  for split in ('valid', 'test'):
    assert mixed['learned']['ppl'][split] == pytest.approx(
        numpy_perplexity(log_probs_a[split], log_probs_b[split], weight), rel=1e-4)
  bins = {split: context_bins_by_hand(corpus, split) for split in ('valid', 'test')}
  per_bin = np.full(16, 0.5)
  for q in np.unique(bins['valid']):
    chosen = bins['valid'] == q
    per_bin[q] = numpy_em(valid_a[chosen], valid_b[chosen])
  for split in ('valid', 'test'):
    assert mixed['binned']['ppl'][split] == pytest.approx(
        numpy_perplexity(log_probs_a[split], log_probs_b[split], per_bin[bins[split]]),
        rel=1e-4)


@pytest.fixture(scope='module')
def network(fitted, tmp_path_factory):
  """A tiny NNLM trained on the n-gram models' text corpus."""
  corpus, models = fitted
  config = json.loads((models['KN3'][1] / 'ngram.json').read_text())['config']
  workdir = tmp_path_factory.mktemp('network') / 'nnlm'
  trainer.run(Config(workdir=str(workdir), order=3, feature_size=8, hidden_size=8,
                     batch_size=8, eval_batch_size=64, epochs=1, **config))
  return load_trained(workdir)


@pytest.mark.slow
def test_mix_of_a_network_and_an_ngram_dir_from_the_command_line(fitted, network):
  corpus, models = fitted
  kn3 = models['KN3'][0]
  out = succeeded(nplm('mix', f'--workdir={network.config.workdir}',
                       f'--with={models["KN3"][1]}'))
  lines = out.splitlines()
  assert lines[0].startswith(f'{network.config.workdir}: nnlm order 3, --head=softmax')
  assert lines[1] == f'mixed with {models["KN3"][1]}: KN3 (λ weighs the first)'
  numbers = {line[:34].strip(): [float(x) for x in line[34:].split()] for line in lines[3:]}
  network_lp = {s: network.split_log_probs(corpus.splits[s]) for s in ('valid', 'test')}
  kn3_lp = {s: kn3.log_prob_split(corpus.splits[s]) for s in ('valid', 'test')}
  assert numbers['network alone'] == pytest.approx(
      [math.exp(-np.mean(network_lp[s])) for s in ('valid', 'test')], abs=0.01)
  assert numbers['KN3 alone'] == pytest.approx(
      [math.exp(-np.mean(kn3_lp[s])) for s in ('valid', 'test')], abs=0.01)
  assert numbers['mix, λ = 0.5'] == pytest.approx(
      [numpy_perplexity(network_lp[s], kn3_lp[s], 0.5) for s in ('valid', 'test')], abs=0.01)
  weight = numpy_em(network_lp['valid'], kn3_lp['valid'])
  learned = next(value for name, value in numbers.items() if name.startswith('mix, learned'))
  assert learned == pytest.approx(
      [numpy_perplexity(network_lp[s], kn3_lp[s], weight) for s in ('valid', 'test')], abs=0.01)


@pytest.mark.slow
def test_mix_refuses_another_vocabulary_in_one_line(fitted, tmp_path):
  corpus, models = fitted
  config = json.loads((models['KN3'][1] / 'ngram.json').read_text())['config']
  other = nplm('ngram', f'--dataset={config["dataset"]}', f'--data_dir={config["data_dir"]}',
               '--unk_max_count=2', '--order=2', f'--out={tmp_path / "kn2"}')
  succeeded(other)
  refused = nplm('mix', f'--workdir={models["KN3"][1]}', f'--with={tmp_path / "kn2"}')
  assert refused.returncode == 2 and 'Traceback' not in refused.stderr
  assert len(refused.stderr.strip().splitlines()) == 1
  assert 'has another vocabulary than' in refused.stderr


@pytest.mark.slow
def test_evaluate_score_and_predict_read_an_ngram_dir(fitted, tmp_path):
  corpus, models = fitted
  config = json.loads((models['KN3'][1] / 'ngram.json').read_text())['config']
  where = tmp_path / 'kn3'
  succeeded(nplm('ngram', f'--dataset={config["dataset"]}', f'--data_dir={config["data_dir"]}',
                 '--order=3', f'--out={where}'))
  model = models['KN3'][0]
  evaluated = json.loads(succeeded(nplm('evaluate', f'--workdir={where}', '--json')))
  for split in ('valid', 'test'):
    assert evaluated[split]['ppl'] == pytest.approx(
        math.exp(-np.mean(model.log_prob_split(corpus.splits[split]))), rel=1e-9)
  sentence = 'the jury said'
  scored = json.loads(succeeded(nplm('score', f'--workdir={where}', '--json', sentence)))
  ids = corpus.vocab.encode(sentence.split() + ['<eos>'])
  assert scored['log_prob'] == pytest.approx(float(np.sum(model.log_prob_split(ids))),
                                             rel=1e-9)
  predicted = json.loads(succeeded(nplm('predict', f'--workdir={where}', '--json', '--k=3',
                                        'of the')))
  context = np.array([corpus.vocab.encode(['of', 'the'])])
  distribution = np.exp(model.log_probs(context)[0])
  top = np.argsort(-distribution, kind='stable')[:3]
  assert [p['token'] for p in predicted[0]['predictions']] == corpus.vocab.decode(top)
  assert [p['probability'] for p in predicted[0]['predictions']] == pytest.approx(
      distribution[top].tolist(), rel=1e-6)


def test_a_damaged_or_older_ngram_dir_is_refused_in_one_line(fitted, tmp_path):
  _, models = fitted
  damaged = tmp_path / 'damaged'
  shutil.copytree(models['KN3'][1], damaged)
  data = bytearray((damaged / 'model.npz').read_bytes())
  data[len(data) // 2] ^= 1
  (damaged / 'model.npz').write_bytes(bytes(data))
  with pytest.raises(ConfigError, match='damaged'):
    load_trained(damaged)
  refused = nplm('evaluate', f'--workdir={damaged}')
  assert refused.returncode == 2 and 'Traceback' not in refused.stderr
  assert len(refused.stderr.strip().splitlines()) == 1
  assert 'checksum differs' in refused.stderr and 'rerun nplm ngram' in refused.stderr
  older = tmp_path / 'older'
  older.mkdir()
  summary = json.loads((models['KN3'][1] / 'ngram.json').read_text())
  del summary['saved_model']
  (older / 'ngram.json').write_text(json.dumps(summary))
  with pytest.raises(ConfigError, match='an older nplm wrote it.*rerun nplm ngram'):
    load_trained(older)


@pytest.mark.slow
def test_a_learned_tokenizer_is_saved_beside_the_ngram_model(fitted, tmp_path):
  pytest.importorskip('sentencepiece')
  _, models = fitted
  config = json.loads((models['KN3'][1] / 'ngram.json').read_text())['config']
  where = tmp_path / 'bpe'
  data = dict(dataset=config['dataset'], data_dir=config['data_dir'], tokenizer='bpe',
              subword_vocab_size=120)
  succeeded(nplm('ngram', *[f'--{name}={value}' for name, value in data.items()], '--order=3',
                 f'--out={where}'))
  corpus = load_dataset(Config(workdir='', **data).resolved())
  assert (where / 'tokenizer.model').read_bytes() == corpus.tokenizer_model
  run = load_trained(where)
  tokens = run.tokenizer.tokens('the jury said')
  assert len(tokens) > 3 and all(run.vocab.id_of(t) != run.vocab.unk_id for t in tokens)
  scored = json.loads(succeeded(nplm('score', f'--workdir={where}', '--json', 'the jury said')))
  ids = run.vocab.encode(tokens + ['<eos>'])
  assert scored['log_prob'] == pytest.approx(float(np.sum(run.split_log_probs(ids))), rel=1e-9)
