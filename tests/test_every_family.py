"""The commands that read a model, on the families the other files leave out: a character
model (score and predict, each checked against the feed's own scoring pass of the same text,
another path through the model) and a word2vec model (refused in one line by every command
that needs a language model, its vectors read)."""

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nplm.use.prediction import predict
from nplm.use.sentences import score_sentences
from tests import cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope='module')
def runs(quick_runs):
  """A character model of the tiny corpus's text and a word2vec model (the session's quick
  runs)."""
  return {'chars': quick_runs('chars'), 'word2vec': quick_runs('word2vec')}


def start_of_text(model, text: str) -> np.ndarray:
  """The ids of `text` after order-1 boundary tokens, as a split starts."""
  ids = model.vocab.encode(model.tokenizer.tokens(text))
  return np.concatenate([np.full(model.context_length, model.boundary_id), ids])


def test_a_character_models_sentence_scores_are_its_split_scores(runs):
  model = runs['chars']
  text = 'the jury said'
  (score,) = score_sentences(model, [text])
  assert [t.token for t in score.tokens] == [*text, '<eos>']
  # The same characters as a split of their own: the feed's scoring pass, then the end.
  ids = np.append(start_of_text(model, text), model.vocab.id_of('<eos>'))
  expected = model.split_log_probs(ids)[model.context_length:]
  np.testing.assert_allclose([t.log_prob for t in score.tokens], expected, rtol=1e-5, atol=1e-5)
  assert score.log_prob == pytest.approx(math.fsum(expected), abs=1e-4)


def test_a_character_models_predictions_are_its_split_scores_of_each_next_character(runs):
  model = runs['chars']
  prefix = 'the ju'
  predictions = predict(model, prefix, k=5)
  assert [p.probability for p in predictions] == sorted((p.probability for p in predictions),
                                                        reverse=True)
  for prediction in predictions:  # The prefix and that character, scored as a split.
    ids = np.append(start_of_text(model, prefix), model.vocab.id_of(prediction.token))
    assert prediction.log_prob == pytest.approx(model.split_log_probs(ids)[-1], abs=1e-5)
  # Every character's probability: the k best are the best of all, and they sum to 1.
  every = [np.append(start_of_text(model, prefix), i) for i in range(model.vocab.size)]
  exact = np.array([model.split_log_probs(ids)[-1] for ids in every])
  assert math.fsum(np.exp(exact)) == pytest.approx(1, abs=1e-5)
  np.testing.assert_allclose([p.log_prob for p in predictions], np.sort(exact)[::-1][:5],
                             atol=1e-5)


def nplm(*args: str, cwd: Path) -> subprocess.CompletedProcess:
  return cli.run(*args, cwd=cwd)


@pytest.mark.parametrize('command', [
    ['score', 'the jury said'], ['rank', 'the jury said', 'said the jury'],
    ['predict', 'the jury'], ['generate', '--length=5'], ['evaluate']])
def test_a_word2vec_model_is_refused_by_what_needs_a_language_model(runs, command):
  workdir = Path(runs['word2vec'].config.workdir)
  done = nplm(command[0], f'--workdir={workdir.name}', *command[1:], cwd=workdir.parent)
  assert done.returncode == 2, done.stderr
  assert 'is a word2vec model' in done.stderr and len(done.stderr.strip().splitlines()) == 1
  assert 'Traceback' not in done.stderr


def test_a_word2vec_models_vectors_are_read(runs):
  workdir = Path(runs['word2vec'].config.workdir)
  done = nplm('neighbours', f'--workdir={workdir.name}', '--words=the,zebra', '--k=3',
              cwd=workdir.parent)
  assert done.returncode == 0, done.stderr
  assert done.stdout.splitlines()[0] == 'the' and 'skipped: zebra' in done.stderr
