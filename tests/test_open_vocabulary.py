"""The open vocabulary: unknown words spelt (nplm.ngram.spelling), checked against brute-force
sums over every string, hand counts, and the closed scores it adds to."""

import collections
import itertools
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nplm.config import Config
from nplm.data.datasets import load_dataset
from nplm.errors import ConfigError
from nplm.ngram import KneserNey, spelling
from nplm.run_files.checkpoint import IncompatibleCheckpointError
from nplm.trainer import run
from nplm.use.sentences import rank_sentences
from nplm.use.trained import load_trained
from tests import cli

ALPHABET_WORDS = {'ab': 3, 'ba': 2, 'abc': 1, 'cab': 2, 'b': 1, 'ca': 1}
VOCAB = ('<unk>', 'a', 'c', 'bab', '</p>')
OTHER = 'ж'  # Stands for every code point outside the alphabet: each weighs (unseen count).


def spelt_strings(length: int, alphabet: str) -> list[str]:
  return [''.join(t) for t in itertools.product([*alphabet, OTHER], repeat=length)]


def multiplicity(words: list[str], alphabet: str) -> np.ndarray:
  """How many code points each string stands for: OTHER is any unseen one."""
  unseen = spelling.CODE_POINTS - len(alphabet)
  return np.array([float(unseen) ** w.count(OTHER) for w in words])


def prefix_mass(model: spelling.Spelling, words: list[str]) -> np.ndarray:
  """q_c of each string's characters without its end: the mass of all longer strings that
  start with it (the model ends every string with probability 1)."""
  stream, real, starts = spelling.spelt(words, model.alphabet, model.order)
  windows = np.lib.stride_tricks.sliding_window_view(stream, model.order)[real[model.order - 1:]]
  log_p = model.chars.log_prob_windows(windows)
  log_p += np.where(stream[real] == spelling.UNSEEN,
                    -math.log(spelling.CODE_POINTS - len(model.alphabet)), 0.0)
  ends = np.append(starts[1:], len(log_p)) - 1
  log_p[ends] = 0.0
  return np.exp(np.add.reduceat(log_p, starts))


@pytest.mark.slow
def test_q_sums_to_one_over_the_strings_outside_the_vocabulary():
  model = spelling.fit(ALPHABET_WORDS, VOCAB, np.array([9, 5, 4, 3, 2]), order=3)
  assert set(model.alphabet) == set('abc<>/pnku')
  longest, total = 5, 0.0
  for length in range(longest + 1):
    words = [w for w in spelt_strings(length, 'abc') if w not in VOCAB and w]
    total += math.fsum(np.exp(model.log_prob(words)) * multiplicity(words, model.alphabet))
  # Every longer string, by its first longest + 1 characters, and the vocabulary's letters
  # none of those strings hold ('<', 'p', ...) in strings of any length: their mass is
  # 1 - (what the enumeration covers); checked to add up exactly with the tail below.
  tail_words = spelt_strings(longest + 1, 'abc')
  tail = math.fsum(prefix_mass(model, tail_words) * multiplicity(tail_words, model.alphabet))
  other_letters = [c for c in model.alphabet if c not in 'abc']
  assert other_letters  # The strings that use them are the rest of the mass.
  rest = _mass_with_letters(model, other_letters, longest)
  assert total + (tail + rest) / math.exp(model.log_z) == pytest.approx(1.0, abs=1e-9)


def _mass_with_letters(model, letters, longest) -> float:
  """q_c mass of the strings up to `longest` that hold one of `letters` and are not in the
  vocabulary, plus every longer string that does (its first longest + 1 characters)."""
  alphabet = [*'abc', *letters, OTHER]
  mass = 0.0
  for length in range(1, longest + 2):
    words = [''.join(t) for t in itertools.product(alphabet, repeat=length)
             if any(c in letters for c in t)]
    if length <= longest:
      kept = [w for w in words if w not in VOCAB]
      mass += math.fsum(np.exp(spelling.char_log_probs(model.chars, model.alphabet, kept))
                        * multiplicity(kept, model.alphabet))
    else:
      mass += math.fsum(prefix_mass(model, words) * multiplicity(words, model.alphabet))
  return mass


def test_the_character_counts_are_each_word_read_from_its_own_start():
  order = 3
  model = spelling.fit(ALPHABET_WORDS, VOCAB, np.array([9, 5, 4, 3, 2]), order=order)
  index = {c: i + 2 for i, c in enumerate(model.alphabet)}
  want = collections.Counter()
  trained, _ = spelling.training_words(ALPHABET_WORDS, VOCAB, np.array([9, 5, 4, 3, 2]))
  for word, count in trained.items():
    ids = [spelling.END] * (order - 1) + [index[c] for c in word] + [spelling.END]
    for end in range(order - 1, len(ids)):
      want[tuple(ids[end - order + 1:end + 1])] += count
  table, size = model.chars.table, model.chars.vocab_size
  got = {}
  for key, count in zip(table.keys[order - 1].tolist(), table.counts[order - 1].tolist()):
    if count:
      got[_decode(key, table, order, size)] = count
  assert got == dict(want)


def _decode(key: int, table, k: int, size: int) -> tuple[int, ...]:
  """The k ids of a k-gram's code (its prefix's id times |V| plus its word)."""
  if k == 1:
    return (key,)
  prefix, word = divmod(key, size)
  return (*_decode(int(table.keys[k - 2][prefix]), table, k - 1, size), word)


def test_a_word_models_probabilities_of_all_strings_sum_to_one():
  vocab = ('<unk>', '<eos>', 'the', 'cat', 'sat')
  ids = np.array([2, 3, 4, 1, 2, 0, 4, 1, 2, 3, 0, 1])
  words = KneserNey.fit(ids, 2, len(vocab), 1)
  model = spelling.fit({'dog': 2, 'ox': 1}, vocab, np.array([2, 3, 3, 2, 2]), order=2)
  p = np.exp(words.log_probs(np.array([[2]])))[0]  # After 'the'.
  longest, unknown = 4, 0.0
  letters = sorted(set(model.alphabet))
  for length in range(1, longest + 1):
    strings = [''.join(t) for t in itertools.product([*letters, OTHER], repeat=length)]
    strings = [w for w in strings if w not in vocab]
    unknown += math.fsum(np.exp(model.log_prob(strings)) * multiplicity(strings, model.alphabet))
  tail_words = spelt_strings(longest + 1, ''.join(letters))
  longer = [v for v in vocab if len(v) > longest]  # In the tail, but not unknown.
  unknown += (math.fsum(prefix_mass(model, tail_words) * multiplicity(tail_words, model.alphabet))
              - math.fsum(np.exp(spelling.char_log_probs(model.chars, model.alphabet, longer)))
              ) / math.exp(model.log_z)
  total = math.fsum(p[1:]) + p[0] * unknown
  assert total == pytest.approx(1.0, abs=1e-9)


# --- ranking, as the lecture notes' spelling example -----------------------------------------

def write_minutes_corpus(directory: Path) -> Path:
  """'about 15 minutes from' five times, and thirty other words once each in that place: the
  closed vocabulary's <unk> is likelier there than 'minutes'."""
  rare = [f'w{chr(97 + i % 26)}{chr(97 + i // 26)}x' for i in range(30)]
  train = ['it was about 15 minutes from the city'] * 5
  train += [f'it was about 15 {w} from the city' for w in rare]
  train += ['the city was far', 'it was late'] * 3
  directory.mkdir(parents=True, exist_ok=True)
  (directory / 'train.txt').write_text('\n'.join(train) + '\n')
  (directory / 'valid.txt').write_text('it was about 15 minutes from the city\nit was qqq\n')
  (directory / 'test.txt').write_text('the city was about 15 zzz from it\n')
  return directory


def nplm(*args: str, cwd: Path) -> subprocess.CompletedProcess:
  return cli.run(*args, cwd=cwd)


@pytest.fixture(scope='module')
def minutes(tmp_path_factory):
  root = tmp_path_factory.mktemp('minutes')
  write_minutes_corpus(root / 'text')
  result = nplm('ngram', '--dataset=text:text', '--data_dir=tfds', '--order=3', '--out=kn3',
                cwd=root)
  assert result.returncode == 0, result.stderr
  return root


@pytest.mark.slow
def test_a_misspelling_no_longer_passes_for_the_class_of_rare_words(minutes):
  model = load_trained(minutes / 'kn3')
  right, wrong = 'it was about 15 minutes from the city', 'it was about 15 minuets from the city'
  ranked = rank_sentences(model, [wrong, right])
  assert [s.text for s in ranked] == [right, wrong]
  by_text = {s.text: s for s in ranked}
  # Closed, the misspelling would win: <unk> there is six times likelier than 'minutes'.
  assert by_text[wrong].closed_log_prob > by_text[right].closed_log_prob
  q = float(model.spelling.log_prob(['minuets'])[0])
  assert by_text[wrong].log_prob == pytest.approx(by_text[wrong].closed_log_prob + q)
  assert by_text[right].log_prob == by_text[right].closed_log_prob


@pytest.mark.slow
def test_rank_from_another_directory_says_which_figure_is_which(minutes, tmp_path):
  (tmp_path / 'kn3').symlink_to(minutes / 'kn3')  # A relative --workdir from elsewhere.
  result = nplm('rank', '--workdir=kn3', 'it was about 15 minuets from the city',
                'it was about 15 minutes from the city', cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  first, second = result.stdout.splitlines()
  assert first.endswith('minutes from the city') and 'closed' in first
  assert 'ranked by ln, the open vocabulary' in result.stderr


# --- workdirs: saved, older, damaged ----------------------------------------------------------

@pytest.mark.slow
def test_an_older_dir_learns_its_spelling_from_its_data_once(minutes, tmp_path):
  saved = load_trained(minutes / 'kn3').spelling
  older = tmp_path / 'older'
  shutil.copytree(minutes / 'kn3', older)
  for name in (spelling.RECORD_FILE, spelling.MODEL_FILE):
    (older / name).unlink()
  model = load_trained(older)
  assert 'predates the open vocabulary' in model.spelling_note
  assert (older / spelling.RECORD_FILE).is_file()
  words = ['minuets', 'zzz', 'Quagga']
  np.testing.assert_allclose(model.spelling.log_prob(words), saved.log_prob(words), rtol=1e-12)
  assert load_trained(older).spelling_note is None  # Saved: learned once.


@pytest.mark.slow
def test_an_older_dir_whose_data_is_gone_is_read_closed_with_a_note(minutes, tmp_path):
  shutil.copytree(minutes / 'text', tmp_path / 'text')
  result = nplm('ngram', '--dataset=text:text', '--data_dir=tfds', '--order=2', '--out=kn2',
                cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  for name in (spelling.RECORD_FILE, spelling.MODEL_FILE):
    (tmp_path / 'kn2' / name).unlink()
  shutil.rmtree(tmp_path / 'text')
  shutil.rmtree(tmp_path / 'tfds')
  model = load_trained(tmp_path / 'kn2')
  assert model.spelling is None and 'scored as <unk> alone' in model.spelling_note
  scored = nplm('score', '--workdir=kn2', 'it was about 15 minuets', cwd=tmp_path)
  assert scored.returncode == 0 and 'closed' not in scored.stdout
  assert scored.stderr.count('\n') == 1 and 'closed vocabulary' in scored.stderr


@pytest.mark.slow
def test_a_damaged_spelling_model_is_refused_in_one_line(minutes, tmp_path):
  damaged = tmp_path / 'damaged'
  shutil.copytree(minutes / 'kn3', damaged)
  data = bytearray((damaged / spelling.MODEL_FILE).read_bytes())
  data[len(data) // 2] ^= 0xFF
  (damaged / spelling.MODEL_FILE).write_bytes(bytes(data))
  result = nplm('score', f'--workdir={damaged}', 'it was', cwd=tmp_path)
  assert result.returncode == 2 and 'Traceback' not in result.stderr
  assert len(result.stderr.strip().splitlines()) == 1 and 'damaged' in result.stderr
  with pytest.raises(ConfigError, match='spelling model of unknown words is damaged'):
    load_trained(damaged)


# --- <unk> trained; the summary's open figures ------------------------------------------------

@pytest.mark.slow
def test_unk_is_trained_unless_the_text_ships_its_own(minutes, tmp_path):
  config = Config(workdir='', dataset=f'text:{minutes / "text"}', data_dir=str(tmp_path))
  corpus = load_dataset(config.resolved())
  counts = collections.Counter((minutes / 'text' / 'train.txt').read_text().split())
  assert corpus.vocab.unk_max_count == 1
  assert corpus.vocab.counts[corpus.vocab.unk_id] == sum(n for n in counts.values() if n == 1)
  assert corpus.unknown_words['train'] == {w: 1 for w, n in counts.items() if n == 1}
  shipped = tmp_path / 'shipped'
  shutil.copytree(minutes / 'text', shipped)
  (shipped / 'train.txt').write_text('the <unk> said\n' + (shipped / 'train.txt').read_text())
  kept = load_dataset(config.replace(dataset=f'text:{shipped}').resolved())
  assert kept.vocab.unk_max_count == 0 and set(counts) <= set(kept.vocab.words)


@pytest.mark.slow
def test_a_runs_summary_gives_the_open_perplexity_beside_the_closed(minutes, tmp_path):
  config = Config(workdir=str(tmp_path / 'run'), dataset=f'text:{minutes / "text"}',
                  data_dir=str(tmp_path / 'tfds'), order=3, feature_size=8, hidden_size=8,
                  batch_size=16, eval_batch_size=32, epochs=1, log_every=100,
                  checkpoint_every=1000)
  summary = run(config)
  model = load_trained(config.workdir)
  vocab = set(model.vocab.words)
  for split in ('valid', 'test'):
    words = (minutes / 'text' / f'{split}.txt').read_text().split()
    unknown = [w for w in words if w not in vocab]
    assert unknown
    cost = -math.fsum(model.spelling.log_prob(unknown).tolist())
    tokens = summary['tokens'][split]
    assert summary[f'{split}_open_ppl'] == pytest.approx(
        math.exp((summary['nll'][split] + cost) / tokens), rel=1e-9)
    assert summary['spelling_share'][split] == pytest.approx(
        cost / (summary['nll'][split] + cost), rel=1e-9)
  recorded = json.loads((tmp_path / 'run' / spelling.RECORD_FILE).read_text())
  assert recorded['trained_on']['what'].startswith('the training tokens that fell to <unk>')


@pytest.mark.slow
def test_a_text_run_recorded_with_every_type_kept_resumes_where_its_vocabulary_is_kept(
    minutes, tmp_path):
  shipped = tmp_path / 'shipped'
  shutil.copytree(minutes / 'text', shipped)
  (shipped / 'train.txt').write_text('the <unk> said\n' + (shipped / 'train.txt').read_text())
  tiny = dict(data_dir=str(tmp_path / 'tfds'), order=3, feature_size=8, hidden_size=8,
              batch_size=16, eval_batch_size=32, log_every=100, checkpoint_every=1000)
  # As nplm recorded text runs before: --unk_max_count resolved to 0 in run.json.
  run(Config(workdir=str(tmp_path / 'ptb'), dataset=f'text:{shipped}', epochs=1,
             unk_max_count=0, **tiny))
  resumed = run(Config(workdir=str(tmp_path / 'ptb'), dataset=f'text:{shipped}', epochs=2,
                       **tiny))
  assert resumed['epochs'] == 2  # Its own <unk>: every type kept today too.
  run(Config(workdir=str(tmp_path / 'raw'), dataset=f'text:{minutes / "text"}', epochs=1,
             unk_max_count=0, **tiny))
  with pytest.raises(IncompatibleCheckpointError, match='gives a different vocabulary'):
    run(Config(workdir=str(tmp_path / 'raw'), dataset=f'text:{minutes / "text"}', epochs=2,
               **tiny))


def test_a_drawn_spelling_follows_q_and_is_never_a_vocabulary_word():
  """Spelling.draw against q's own scores (which the brute-force sums above check): the
  likeliest strings come as often as q says, within 4 standard errors."""
  model = spelling.fit(ALPHABET_WORDS, VOCAB, np.array([9, 5, 4, 3, 2]), order=3)
  rng, draws = np.random.default_rng(0), 4000
  counts = collections.Counter(model.draw(rng, set(VOCAB)) for _ in range(draws))
  assert not set(counts) & {*VOCAB, ''}
  for word, count in counts.most_common(5):
    q = math.exp(model.log_prob([word])[0])
    assert abs(count / draws - q) < 4 * math.sqrt(q * (1 - q) / draws), (word, count, q)
