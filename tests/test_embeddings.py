"""Word features in word2vec's text and binary formats and their benchmark scores: the files
read back by gensim (and the binary one by a reader of its own) equal C; the scores of
hand-made vectors against scipy and a numpy 3CosAdd; the program end to end on a tiny NNLM
trained on words the benchmarks use."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from gensim.models import KeyedVectors
from gensim.test.utils import datapath
from scipy.stats import spearmanr

from nplm.cli.embeddings import report_lines
from nplm.use import embeddings
from nplm.run_files.saved_params import saved_params
from nplm.config import Config
from nplm.data.datasets import load_dataset
from nplm.data.vocab import Vocabulary
from nplm.errors import ConfigError
from nplm.trainer import run
from nplm.training.config_checks import validated
from tests import cli

FAMILY = ('man woman king queen boy girl father mother brother sister son daughter husband '
          'wife he she').split()
# Words with pairs in WordSim-353 (tiger cat, bank money, ...) or SimLex-999 (dog cat).
RATED = 'tiger cat love sex bank money car automobile dog'.split()


def unit(rows: np.ndarray) -> np.ndarray:
  rows = np.asarray(rows, np.float64)
  return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def folded_ids(words) -> dict:
  """Upper-cased word -> the id of its first (most frequent) spelling."""
  ids = {}
  for i, word in enumerate(words):
    ids.setdefault(word.upper(), i)
  return ids


def read_word2vec_binary(path) -> tuple[list[str], np.ndarray]:
  """word2vec's binary format read as its C tool writes it: "count dim\\n", then per word its
  UTF-8 bytes, a space, dim little-endian float32s and "\\n"; every byte accounted for."""
  data = Path(path).read_bytes()
  at = data.index(b'\n') + 1
  count, dim = map(int, data[:at - 1].split(b' '))
  words, rows = [], []
  for _ in range(count):
    space = data.index(b' ', at)
    words.append(data[at:space].decode('utf-8'))
    end = space + 1 + 4 * dim
    rows.append(np.frombuffer(data[space + 1:end], '<f4'))
    assert data[end:end + 1] == b'\n'
    at = end + 1
  assert at == len(data)
  return words, np.array(rows, np.float32).reshape(count, dim)


# --- the files -----------------------------------------------------------------------------

def test_the_written_file_reads_back_as_every_word_and_value(tmp_path):
  rng = np.random.default_rng(0)
  vectors = (rng.standard_normal((6, 5)) * 10.0 ** rng.integers(-8, 5, (6, 5))).astype(
      np.float32)
  vectors[0, 0], vectors[1, 1] = -0.0, np.finfo(np.float32).tiny
  words = ('<unk>', 'the', 'The', '</p>', 'naïve', "don't")
  word_vectors = embeddings.WordVectors(words, vectors)
  text = embeddings.word2vec_text(word_vectors)
  assert text.splitlines()[0] == '6 5' and text.splitlines()[3].startswith('The ')
  assert text.endswith('\n') and len(text.splitlines()) == 7

  (tmp_path / 'vectors.txt').write_text(text, encoding='utf-8')
  keyed = KeyedVectors.load_word2vec_format(str(tmp_path / 'vectors.txt'))
  assert keyed.index_to_key == list(words)
  np.testing.assert_array_equal(keyed.vectors, vectors)  # Bit for bit, -0.0 included.
  assert np.signbit(keyed.vectors[0, 0])


def test_the_binary_file_reads_back_as_every_word_and_value(tmp_path):
  rng = np.random.default_rng(1)
  vectors = (rng.standard_normal((5, 3)) * 10.0 ** rng.integers(-8, 5, (5, 3))).astype(
      np.float32)
  vectors[0, 0], vectors[1, 1], vectors[2, 2] = -0.0, np.finfo(np.float32).tiny, np.inf
  words = ('<unk>', 'the', 'naïve', '東京', "don't")
  path = tmp_path / 'vectors.bin'
  embeddings.write_word2vec_binary(embeddings.WordVectors(words, vectors), path)
  assert path.read_bytes().startswith(b'5 3\n<unk> ')
  assert path.stat().st_size == len(b'5 3\n') + sum(
      len(word.encode()) + 1 + 4 * 3 + 1 for word in words)

  read_words, read_vectors = read_word2vec_binary(path)
  assert read_words == list(words)
  np.testing.assert_array_equal(read_vectors, vectors)  # Bit for bit, -0.0 included.
  assert np.signbit(read_vectors[0, 0])
  keyed = KeyedVectors.load_word2vec_format(str(path), binary=True)
  assert keyed.index_to_key == list(words)
  np.testing.assert_array_equal(keyed.vectors, vectors)


WRITERS = {'text': embeddings.write_word2vec_text, 'binary': embeddings.write_word2vec_binary}


@pytest.mark.parametrize('writer', WRITERS)
@pytest.mark.parametrize('word', ['a b', ' ', 'tab\there', 'line\nbreak', ''])
def test_a_word_that_word2vecs_formats_cannot_hold_is_refused_by_name(word, writer, tmp_path):
  vectors = embeddings.WordVectors(('the', word), np.zeros((2, 3), np.float32))
  with pytest.raises(ConfigError, match=r"word 1 .*whitespace.*word2vec's text and binary"):
    WRITERS[writer](vectors, tmp_path / 'vectors')
  assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize('writer', WRITERS)
def test_a_write_failing_midway_leaves_the_old_file_and_nothing_else(writer, tmp_path):
  # A lone surrogate passes the whitespace check but has no UTF-8 bytes: the binary writer
  # fails at the fourth word, after three were written, the text one at its one write.
  vectors = embeddings.WordVectors(('a', 'b', 'c', '\ud800', 'e'), np.ones((5, 2), np.float32))
  path = tmp_path / 'vectors'
  path.write_bytes(b'old')
  with pytest.raises(UnicodeEncodeError):
    WRITERS[writer](vectors, path)
  assert list(tmp_path.iterdir()) == [path] and path.read_bytes() == b'old'


# --- the scores ----------------------------------------------------------------------------

def test_pair_scores_are_scipys_spearman_over_the_covered_pairs(tmp_path):
  # Unit vectors at these angles: cos(a, b) = cos(θa - θb), so the pairs below rank
  # (tiger cat) > (car automobile) > (bank money) > (love sex) > (dog cat) by cosine.
  angles = {'cat': 0.0, 'tiger': 0.1, 'dog': 2.5, 'car': 1.0, 'automobile': 1.3,
            'bank': 2.0, 'money': 2.6, 'love': 0.0, 'sex': 0.9}
  words = list(angles)
  keyed = KeyedVectors(2)
  keyed.add_vectors(words, np.array([[np.cos(a), np.sin(a)] for a in angles.values()]))
  # The human ratings swap two neighbours of that order: ρ = 1 - 6·2 / (5·24) = 0.9.
  rated = [('Tiger', 'cat', 9.0), ('car', 'automobile', 7.0), ('bank', 'money', 8.0),
           ('love', 'sex', 5.0), ('dog', 'CAT', 1.0), ('zebra', 'horse', 6.0)]
  path = tmp_path / 'pairs.tsv'
  path.write_text('# Word 1\tWord 2\tHuman (mean)\n' +
                  ''.join(f'{a}\t{b}\t{r}\n' for a, b, r in rated))
  score = embeddings.pair_score(keyed, path)

  covered = rated[:5]  # zebra and horse are not in the vocabulary.
  cosines = [np.cos(angles[a.lower()] - angles[b.lower()]) for a, b, _ in covered]
  want = spearmanr([r for _, _, r in covered], cosines).statistic
  assert want == pytest.approx(0.9)
  assert score == {'spearman': pytest.approx(want), 'coverage': pytest.approx(5 / 6),
                   'covered': 5, 'pairs': 6, 'low_coverage': False}

  path.write_text('zebra\thorse\t6.0\ngnu\tyak\t2.0\n')
  assert embeddings.pair_score(keyed, path) == {'spearman': None, 'coverage': 0.0,
                                                'covered': 0, 'pairs': 2, 'low_coverage': True}
  # One pair of two is half: comparable; one of three is not.
  path.write_text('tiger\tcat\t9.0\nzebra\thorse\t6.0\n')
  assert embeddings.pair_score(keyed, path)['low_coverage'] is False
  path.write_text('tiger\tcat\t9.0\nzebra\thorse\t6.0\ngnu\tyak\t2.0\n')
  assert embeddings.pair_score(keyed, path)['low_coverage'] is True


def numpy_3cosadd(words, vectors, question) -> str:
  """The answer to a : b = c : ?, the word nearest to unit(b) - unit(a) + unit(c) by
  cosine, a, b and c excluded; words case-folded, the first spelling standing for each."""
  ids, rows = folded_ids(words), unit(vectors)
  a, b, c = (ids[w.upper()] for w in question[:3])
  target = rows[b] - rows[a] + rows[c]
  cosines = rows @ target / np.linalg.norm(target)
  cosines[[a, b, c]] = -np.inf
  return words[int(np.argmax(cosines))].upper()


def test_analogy_scores_count_the_right_answers_among_the_answerable(tmp_path):
  e = np.eye(4)
  vectors = {'man': e[0], 'woman': e[1], 'king': e[0] + e[2], 'queen': e[1] + e[2],
             'boy': e[0] + e[3], 'girl': e[1] + e[3], 'paris': e[2] + e[3]}
  words, rows = list(vectors), np.array(list(vectors.values()))
  keyed = KeyedVectors(4)
  keyed.add_vectors(words, rows)
  questions = [('Man', 'Woman', 'King', 'Queen'),  # Right: queen - king = woman - man.
               ('boy', 'girl', 'man', 'woman'),    # Right.
               ('king', 'queen', 'boy', 'man'),    # Wrong: girl is b - a + c exactly.
               ('Paris', 'France', 'Rome', 'Italy')]  # Not answerable: 3 words unknown.
  path = tmp_path / 'questions.txt'
  path.write_text(': family\n' + ''.join(' '.join(q) + '\n' for q in questions[:3]) +
                  ': capital-common-countries\n' + ' '.join(questions[3]) + '\n')

  answers = [numpy_3cosadd(words, rows, q) for q in questions[:3]]
  assert answers == ['QUEEN', 'WOMAN', 'GIRL']
  right = sum(answer == q[3].upper() for answer, q in zip(answers, questions))
  assert embeddings.analogy_score(keyed, path) == {
      'accuracy': pytest.approx(right / 3), 'coverage': pytest.approx(3 / 4),
      'correct': right, 'answered': 3, 'questions': 4, 'low_coverage': False}
  assert right == 2


def test_the_benchmarks_are_gensims_files_counted_in_full():
  keyed = KeyedVectors(2)
  keyed.add_vectors(['cat', 'dog'], np.eye(2))
  scores = embeddings.benchmark_scores(keyed)
  # The published sizes: 353 and 999 pairs; 8,869 semantic + 10,675 syntactic questions.
  assert scores['wordsim353']['pairs'] == 353 and scores['simlex999']['pairs'] == 999
  assert scores['analogies']['questions'] == 19544
  assert scores['wordsim353'] == {'spearman': None, 'coverage': 0.0, 'covered': 0,
                                  'pairs': 353, 'low_coverage': True}
  assert scores['simlex999']['coverage'] == pytest.approx(1 / 999)  # Only dog-cat is rated.
  assert scores['analogies']['answered'] == 0 and scores['analogies']['accuracy'] is None


# --- the program ---------------------------------------------------------------------------

@pytest.fixture(scope='module')
def family_run(tmp_path_factory):
  """A tiny NNLM trained on random sentences of words the benchmarks rate and ask about."""
  root = tmp_path_factory.mktemp('family')
  rng = np.random.default_rng(0)
  words = FAMILY + RATED + ['the', 'and', 'of']
  texts = {split: ''.join(' '.join(rng.choice(words, 8)) + '\n' for _ in range(lines))
           for split, lines in (('train', 120), ('valid', 10), ('test', 10))}
  (root / 'text').mkdir()
  for split, text in texts.items():
    (root / 'text' / f'{split}.txt').write_text(text)
  config = Config(workdir=str(root / 'run'), dataset=f'text:{root / "text"}',
                  data_dir=str(root / 'tfds'), order=3, feature_size=6, hidden_size=8,
                  batch_size=16, eval_batch_size=16, epochs=1, log_every=100).resolved()
  run(validated(config), load_dataset(config))
  return root / 'run'


def run_program(*flags: str) -> subprocess.Popen:
  return cli.start(*flags, module='experiments.embeddings')


@pytest.mark.slow
def test_the_program_writes_c_and_its_scores(family_run, tmp_path):
  children = [run_program(f'--workdir={family_run}', f'--out={tmp_path / "out"}'),
              run_program(f'--workdir={tmp_path}', f'--out={tmp_path / "never"}'),
              run_program(f'--workdir={family_run}', f'--out={family_run / "run.json"}/x')]
  (code, stdout, stderr), *failures = map(cli.finish, children)
  assert code == 0, stderr
  for (code, _, stderr), phrase in zip(failures, ['holds no training run',
                                                  'cannot write into --out=']):
    assert code == 2 and stderr.startswith('error: ') and phrase in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr

  words = Vocabulary.load(family_run / 'vocab.txt').words
  C = np.asarray(saved_params(family_run)['model']['C']['embedding'], np.float32)
  for name, binary in (('embeddings.txt', False), ('embeddings.bin', True)):
    keyed = KeyedVectors.load_word2vec_format(str(tmp_path / 'out' / name), binary=binary)
    assert keyed.index_to_key == list(words)
    np.testing.assert_array_equal(keyed.vectors, C)
  read_words, read_vectors = read_word2vec_binary(tmp_path / 'out' / 'embeddings.bin')
  assert read_words == list(words)
  np.testing.assert_array_equal(read_vectors, C)
  assert f'{tmp_path / "out" / "embeddings.txt"}, .bin, .json, .md' in stdout

  report = json.loads((tmp_path / 'out' / 'embeddings.json').read_text())
  assert (report['words'], report['dim']) == (len(words), 6)
  ids, rows = folded_ids(words), unit(C)
  for name, file in embeddings.PAIR_BENCHMARKS.items():
    rated = [line.split('\t') for line in Path(datapath(file)).read_text().splitlines()
             if not line.startswith('#')]
    covered = [(a, b, float(r)) for a, b, r in rated
               if a.upper() in ids and b.upper() in ids]
    assert len(covered) >= 5
    cosines = [rows[ids[a.upper()]] @ rows[ids[b.upper()]] for a, b, _ in covered]
    want = spearmanr([r for _, _, r in covered], cosines).statistic
    assert report['scores'][name]['spearman'] == pytest.approx(want, abs=1e-6)
    assert report['scores'][name]['coverage'] == pytest.approx(len(covered) / len(rated))
    assert report['scores'][name]['covered'] == len(covered)
  questions = [line.split() for line in Path(datapath('questions-words.txt')).read_text()
               .splitlines() if not line.startswith(': ')]
  answerable = [q for q in questions if all(w.upper() in ids for w in q)]
  right = sum(numpy_3cosadd(list(words), C, q) == q[3].upper() for q in answerable)
  assert len(answerable) == 56
  assert report['scores']['analogies'] == {
      'accuracy': pytest.approx(right / 56), 'coverage': pytest.approx(56 / len(questions)),
      'correct': right, 'answered': 56, 'questions': len(questions), 'low_coverage': True}
  assert f'accuracy {100 * right / 56:.1f}%' in stdout and '56 of 19,544 questions' in stdout
  # Every benchmark covers a sliver of its pairs or questions here: each is flagged.
  assert all(report['scores'][name]['low_coverage'] for name in report['scores'])
  flagged = [line for line in stdout.splitlines() if line.endswith(
      'under half, not comparable')]
  assert len(flagged) == 3, stdout
  assert '| WordSim-353 |' in (tmp_path / 'out' / 'embeddings.md').read_text()


def test_only_scores_under_half_coverage_are_flagged_as_not_comparable():
  scores = {'wordsim353': {'spearman': 0.5, 'coverage': 200 / 353, 'covered': 200,
                           'pairs': 353, 'low_coverage': False},
            'simlex999': {'spearman': -1.0, 'coverage': 3 / 999, 'covered': 3, 'pairs': 999,
                          'low_coverage': True},
            'analogies': {'accuracy': None, 'coverage': 0.0, 'correct': 0, 'answered': 0,
                          'questions': 19544, 'low_coverage': True}}
  lines = report_lines({'model': 'nnlm under softmax', 'words': 10, 'dim': 4, 'scores': scores})
  wordsim, simlex, analogies = lines[1:]
  assert 'not comparable' not in wordsim and '200 of 353 pairs (56.7%)' in wordsim
  assert simlex.endswith('Spearman ρ -1.000  coverage 3 of 999 pairs (0.3%): under half, '
                         'not comparable')
  assert analogies.endswith('0 of 19,544 questions (0.0%): under half, not comparable')
