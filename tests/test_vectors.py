"""Word vectors as gensim users expect them: analogies against a brute-force cosine over the
whole vocabulary (and gensim's own most_similar), C as gensim KeyedVectors, and the
neighbours program skipping unknown words with a note, on one tiny NNLM."""

import subprocess
import types
from pathlib import Path

import numpy as np
import pytest

from nplm.cli import neighbours as neighbours_program
from nplm.config import Config
from nplm.data.datasets import load_dataset
from nplm.data.vocab import Vocabulary
from nplm.errors import ConfigError
from nplm.run_files.saved_params import saved_params
from nplm.trainer import run
from nplm.use import embeddings, neighbours
from nplm.use.trained import load_trained
from nplm.training.config_checks import validated
from tests import cli

WORDS = ('man woman king queen boy girl father mother brother sister son daughter he she the '
         'and of').split()
ANALOGIES = [('king', 'man', 'woman'), ('father', 'man', 'woman'), ('she', 'he', 'boy')]


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """A tiny NNLM on random sentences of a few words, read back as the tools read it."""
  root = tmp_path_factory.mktemp('vectors')
  rng = np.random.default_rng(1)
  (root / 'text').mkdir()
  for split, lines in (('train', 80), ('valid', 8), ('test', 8)):
    (root / 'text' / f'{split}.txt').write_text(
        ''.join(' '.join(rng.choice(WORDS, 8)) + '\n' for _ in range(lines)))
  config = Config(workdir=str(root / 'run'), dataset=f'text:{root / "text"}',
                  data_dir=str(root / 'tfds'), order=3, feature_size=6, hidden_size=8,
                  batch_size=16, eval_batch_size=16, epochs=1, log_every=100).resolved()
  run(validated(config), load_dataset(config))
  return load_trained(root / 'run')


def saved_C(workdir) -> tuple[list[str], np.ndarray]:
  """The vocabulary and C read from the workdir's files, not through the tools."""
  words = list(Vocabulary.load(Path(workdir) / 'vocab.txt').words)
  return words, np.asarray(saved_params(Path(workdir))['model']['C']['embedding'], np.float64)


def brute_force_analogy(words, C, positive, negative, added, k) -> list[tuple[str, float]]:
  """positive - negative + added over unit rows; every other word's cosine, one at a time."""
  unit = {w: C[i] / np.linalg.norm(C[i]) for i, w in enumerate(words)}
  target = unit[positive] - unit[negative] + unit[added]
  cosines = [(w, float(unit[w] @ target / np.linalg.norm(target))) for w in words
             if w not in (positive, negative, added)]
  return sorted(cosines, key=lambda pair: -pair[1])[:k]


@pytest.mark.slow
def test_analogies_are_the_brute_force_3cosadd_and_gensims_answers(trained):
  words, C = saved_C(trained.config.workdir)
  vectors = neighbours.feature_vectors(trained)
  keyed = embeddings.keyed_vectors(trained)
  for triple in ANALOGIES:
    got = neighbours.analogy(vectors, trained.vocab, *triple, 5)
    want = brute_force_analogy(words, C, *triple, 5)
    assert [w for w, _ in got] == [w for w, _ in want]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-12)
    # gensim: king - man + woman is positive=[king, woman], negative=[man].
    gensim_answers = keyed.most_similar(positive=[triple[0], triple[2]], negative=[triple[1]],
                                        topn=5)
    assert [w for w, _ in gensim_answers] == [w for w, _ in want]
    np.testing.assert_allclose([s for _, s in gensim_answers], [s for _, s in want], atol=1e-5)
  with pytest.raises(ConfigError, match='zebra'):
    neighbours.analogy(vectors, trained.vocab, 'king', 'zebra', 'woman', 3)


@pytest.mark.slow
def test_keyed_vectors_are_c_keyed_by_the_vocabulary(trained):
  words, C = saved_C(trained.config.workdir)
  keyed = embeddings.keyed_vectors(trained)
  assert keyed.index_to_key == words
  np.testing.assert_array_equal(keyed.vectors, C.astype(np.float32))
  assert keyed.key_to_index['king'] == words.index('king')


@pytest.mark.slow
def test_known_and_unknown_words_keep_their_order(trained):
  assert neighbours.known_and_unknown(trained.vocab, ['Monday', 'the', '<unk>', 'gnu', 'he']) \
      == (['the', '<unk>', 'he'], ['Monday', 'gnu'])


def test_a_word_outside_the_vocabulary_is_named_with_the_likeliest_word_near_it():
  vocab = Vocabulary(('<unk>', 'the', 'they', 'then', 'president', 'resident', '.'),
                     np.array([0, 50, 9, 7, 3, 4, 20]), 1)
  assert neighbours.with_suggestion(vocab, 'thy') == 'thy (did you mean the?)'  # Not they.
  assert neighbours.with_suggestion(vocab, 'presidnet') == 'presidnet (did you mean president?)'
  assert neighbours.with_suggestion(vocab, 'prezidant') == 'prezidant (did you mean president?)'
  assert neighbours.with_suggestion(vocab, 'zqxj') == 'zqxj'
  assert neighbours.with_suggestion(vocab, 'theyxx') == 'theyxx'  # Two edits: too short.
  assert neighbours.with_suggestion(vocab, 'th') == 'th'  # One: too short.
  assert neighbours.with_suggestion(vocab, '<unx>') == '<unx>'  # No special token.
  with pytest.raises(ConfigError, match=r'\): thy \(did you mean the\?\), zqxj$'):
    neighbours.ids_of(vocab, ['the', 'thy', 'zqxj'])


def start(*args: str) -> subprocess.Popen:
  return cli.start(*args, module='experiments.neighbours')


@pytest.mark.slow
def test_the_program_skips_unknown_words_with_a_note(trained):
  workdir = trained.config.workdir
  children = [start(f'--workdir={workdir}', '--words=the,Monday,king', '--k=3',
                    '--analogy=king,man,woman;king,gnu,woman', '--analogy=she,he,boy'),
              start(f'--workdir={workdir}', '--words=Monday,Tuesday', '--analogy=a,b,c'),
              start(f'--workdir={workdir}', '--analogy=king,man')]
  (code, stdout, stderr), *failures = map(cli.finish, children)
  assert code == 0, stderr
  assert 'not in the vocabulary, skipped: Monday' in stderr
  assert 'not in the vocabulary, skipped king - gnu + woman: gnu' in stderr
  words, C = saved_C(workdir)
  blocks = stdout.strip().split('\n')
  queries = [line for line in blocks if not line.startswith(' ')]
  assert queries == ['the', 'king', 'king - man + woman', 'she - he + boy']
  for (positive, negative, added) in (('king', 'man', 'woman'), ('she', 'he', 'boy')):
    answers = brute_force_analogy(words, C, positive, negative, added, 3)
    start_line = blocks.index(f'{positive} - {negative} + {added}')
    assert blocks[start_line + 1:start_line + 4] == [
        f'  {rank:3d}  {w:20} {s:7.4f}' for rank, (w, s) in enumerate(answers, 1)]
  unit = C / np.linalg.norm(C, axis=1, keepdims=True)
  cosines = unit @ unit[words.index('king')]
  second = words[int(np.argsort(-cosines)[1])]  # The nearest word other than king itself.
  assert blocks[blocks.index('king') + 2].split()[1] == second

  for (code, stdout, stderr), phrase in zip(failures, ['Monday, Tuesday, a, b, c',
                                                       "'king,man' does not name three"]):
    assert code == 2 and stdout == '', stderr
    assert stderr.startswith('error: ') and phrase in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


def test_analogy_flags_read_semicolons_and_repeats():
  assert neighbours_program.analogies_of(['king,man,woman; Paris, France ,Italy;', 'a,b,c']) \
      == [('king', 'man', 'woman'), ('Paris', 'France', 'Italy'), ('a', 'b', 'c')]
  with pytest.raises(ConfigError, match="'a,,c' does not name three"):
    neighbours_program.analogies_of(['a,,c'])


@pytest.mark.slow
def test_a_count_model_has_no_vectors_to_give(trained):
  counts_only = types.SimpleNamespace(config=trained.config, vocab=trained.vocab)  # No params.
  for read in (neighbours.feature_vectors, embeddings.keyed_vectors):
    with pytest.raises(ConfigError, match='is a count model, not a network'):
      read(counts_only)
