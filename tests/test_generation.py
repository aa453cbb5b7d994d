"""nplm generate: greedy, top-k and top-p draws, sentence ends, text out, the program."""

import dataclasses
import re
import subprocess
import types
from pathlib import Path

import jax
import numpy as np
import pytest

from nplm.data import tokenizers
from nplm.data.vocab import END_OF_SENTENCE, PARAGRAPH_END, TEXT_END, UNK, Vocabulary
from nplm.ngram import spelling
from nplm.use.correction import Corrector
from nplm.use.generation import (Sampling, as_text, generate, generate_text, sampling_logits,
                                  shown_unknowns, text_pieces)
from tests import cli
from tests.test_complete import prefix_channel
from tests.test_prediction import numpy_next_log_probs


@pytest.fixture(scope='module')
def runs(quick_runs):
  """A word model on the tiny Brown corpus and a character model on its text as text:DIR (the
  session's quick runs)."""
  return {'words': quick_runs('nnlm'), 'chars': quick_runs('chars')}


# --- the draw reshaped: a numpy reading of temperature, top-k and top-p -------------------

def numpy_draw_probabilities(log_p, temperature, top_k=0, top_p=1.0, banned=None):
  """p(w)^(1/T) (T = 0: the first best word), then the k best kept, then the smallest
  most-probable set of mass >= p; ties with the last word kept are kept; renormalized."""
  allowed = np.asarray(log_p, np.float64).copy()
  if banned is not None:
    allowed[banned] = -np.inf
  if temperature == 0:
    p = np.zeros_like(allowed)
    p[int(np.argmax(allowed))] = 1.0
  else:
    p = np.exp((allowed - allowed.max()) / temperature)
    p /= p.sum()
  if top_k:
    p[p < np.sort(p)[::-1][min(top_k, len(p)) - 1]] = 0.0
    p /= p.sum()
  if top_p < 1:
    descending = np.sort(p)[::-1]
    size = int(np.argmax(np.cumsum(descending) >= top_p)) + 1
    p[p < descending[size - 1]] = 0.0
    p /= p.sum()
  return p


@pytest.mark.parametrize('temperature,top_k,top_p,banned', [
    (1.0, 0, 0.5, None), (1.0, 0, 0.9, 3), (0.7, 5, 0.8, None), (2.0, 12, 0.95, None),
    (1.3, 0, 0.03, None), (0.0, 0, 1.0, None), (0.0, 3, 0.5, 7), (1.0, 0, 1.0, None)])
def test_top_k_and_top_p_keep_what_the_numpy_reading_keeps(temperature, top_k, top_p, banned):
  log_p = np.log(np.random.default_rng(1).dirichlet(np.full(40, 0.5)))
  log_p[[5, 9]] = log_p[2]  # Ties: kept or cut together.
  log_p -= np.log(np.exp(log_p).sum())
  want = numpy_draw_probabilities(log_p, temperature, top_k, top_p, banned)
  got = jax.nn.softmax(sampling_logits(log_p.astype(np.float32), temperature, top_k, banned,
                                       top_p))
  np.testing.assert_allclose(got, want, atol=2e-6)
  if 0 < top_p < 1:  # The nucleus: mass >= p, and without its least words (ties) < p.
    before = numpy_draw_probabilities(log_p, temperature, top_k, 1.0, banned)
    kept = before[want > 0]
    assert kept.sum() >= top_p and kept[kept > kept.min()].sum() < top_p


def test_greedy_takes_the_first_of_tied_best_words():
  logits = np.log(np.array([0.1, 0.3, 0.3, 0.2, 0.1]))
  got = jax.nn.softmax(sampling_logits(logits.astype(np.float32), 0.0))
  np.testing.assert_array_equal(got, [0, 1, 0, 0, 0])
  got = jax.nn.softmax(sampling_logits(logits.astype(np.float32), 0.0, banned=1))
  np.testing.assert_array_equal(got, [0, 0, 1, 0, 0])


@pytest.mark.slow
def test_top_p_draws_follow_the_nucleus_of_the_model(runs):
  trained, draws = runs['words'], 4000
  prompt = trained.vocab.encode('the jury'.split())
  want = numpy_draw_probabilities(numpy_next_log_probs(trained, prompt.tolist()), 1.5,
                                  top_p=0.6)
  first = [s[0] for s in generate(trained, prompt, Sampling(1, 1.5, top_p=0.6, samples=draws))]
  frequency = np.bincount(first, minlength=len(want)) / draws
  assert np.all(np.abs(frequency - want) <= 5 * np.sqrt(want * (1 - want) / draws) + 1e-3)
  assert 1 < (want > 0).sum() < trained.vocab.size


@pytest.mark.slow
def test_a_word_being_typed_is_drawn_from_the_words_it_begins(runs):
  """A prompt ending in a word the vocabulary lacks but begins words of, no space after it:
  the first word drawn is one of those, as often as the model's numpy p renormalized over
  them says; the program prints what was typed completed, with no <unk> warning."""
  trained, draws = runs['words'], 2000
  words = trained.vocab.words
  typed = next(start for start in sorted({w[:2] for w in words if len(w) > 2 and w.isalpha()})
               if start not in words and sum(w.startswith(start) for w in words) >= 2)
  log_p = numpy_next_log_probs(trained, trained.vocab.encode(['the', 'jury']).tolist())
  want = np.where([w.startswith(typed) for w in words], np.exp(log_p), 0.0)
  want /= want.sum()
  texts = generate_text(trained, f'the jury {typed}', Sampling(1, samples=draws))
  assert all(text.startswith(f'the jury {typed}') for text in texts)
  drawn = [text.split()[2] for text in texts]
  frequency = np.array([drawn.count(word) for word in words]) / draws
  assert np.all(np.abs(frequency - want) <= 5 * np.sqrt(want * (1 - want) / draws) + 1e-3)
  workdir = Path(trained.config.workdir)
  done = cli.run('generate', f'--workdir={workdir.name}', f'--prompt=the jury {typed}',
                 '--length=1', '--temperature=0', cwd=workdir.parent)
  assert done.returncode == 0 and done.stderr == '', done.stderr
  assert done.stdout == f'the jury {words[int(np.argmax(want))]}\n'


# --- a model of known behaviour: a bigram table behind the reading protocol ----------------

class BigramReader:
  """The next_words protocol over a table: the next word depends on the last one only."""

  def __init__(self, log_table, boundary):
    self.log_table, self.boundary = log_table, boundary

  def start(self, prompts):
    prompts = np.asarray(prompts)
    return prompts[:, -1] if prompts.shape[1] else np.full(len(prompts), self.boundary)

  def next(self, state):
    return self.log_table[state].astype(np.float32), state

  def push(self, state, words):
    return np.asarray(words)


def bigram_model(successor: dict[str, str], sentence_end=None):
  """Each word followed by its successor with p = 0.6, the rest spread evenly."""
  words = (UNK, 'the', 'jury', 'said', PARAGRAPH_END, TEXT_END, END_OF_SENTENCE)
  vocab = Vocabulary(words, np.ones(len(words), np.int64), 0)
  table = np.full((len(words), len(words)), 0.4 / (len(words) - 1))
  for word, following in successor.items():
    table[vocab.id_of(word), vocab.id_of(following)] = 0.6
  boundary = vocab.id_of(END_OF_SENTENCE if sentence_end else TEXT_END)
  return types.SimpleNamespace(
      vocab=vocab, boundary_id=boundary, sentence_end=sentence_end,
      config=types.SimpleNamespace(tokens='words'), tokenizer=tokenizers.Tokenizer(),
      next_words=lambda: BigramReader(np.log(table), boundary))


BROWN_LIKE = {TEXT_END: 'the', 'the': 'jury', 'jury': PARAGRAPH_END, PARAGRAPH_END: TEXT_END}


def test_greedy_runs_on_across_text_ends_to_the_length():
  model = bigram_model(BROWN_LIKE)
  (ids,) = generate(model, [], Sampling(9, temperature=0))
  assert model.vocab.decode(ids) == ['the', 'jury', PARAGRAPH_END, TEXT_END] * 2 + ['the']
  (text,) = generate_text(model, 'the jury', Sampling(5, temperature=0, top_p=0.3))
  assert text == 'the jury\n\nthe jury'  # </p> a line end; </text> after it a blank line.


TEXT_LIKE = {END_OF_SENTENCE: 'the', 'the': 'said', 'said': END_OF_SENTENCE}


def test_greedy_runs_on_across_sentence_ends_of_a_text_dataset():
  model = bigram_model(TEXT_LIKE, sentence_end=END_OF_SENTENCE)
  (text,) = generate_text(model, 'the', Sampling(7, temperature=0))
  assert text == 'the said\nthe said\nthe said'


UNKNOWN_AFTER_THE = {TEXT_END: 'the', 'the': UNK, UNK: 'jury', 'jury': TEXT_END}


def test_a_drawn_unk_prints_as_a_word_drawn_from_q_the_same_for_a_seed():
  """Each <unk> drawn becomes a word outside the vocabulary, drawn from the model's q with the
  generator of (seed, sample, place): the other tokens as drawn, a sample the same drawn
  alone or beside others, and <unk> kept where asked, at temperature 0, and where q learned
  from no word that fell to <unk> (a text's own <unk>)."""
  model = bigram_model(UNKNOWN_AFTER_THE)
  model.spelling = spelling.fit({'zebra': 3, 'gnus': 2, 'zeal': 1}, model.vocab.words,
                                model.vocab.counts, order=3)
  draw = Sampling(30, samples=3)
  kept = [text.split() for text in generate_text(model, '', dataclasses.replace(
      draw, spell_unk=False), seed=5)]
  spelt = [text.split() for text in generate_text(model, '', draw, seed=5)]
  assert sum(words.count(UNK) for words in kept) >= 5
  for i, (before, after) in enumerate(zip(kept, spelt)):
    assert len(before) == len(after)
    places = [t for t, word in enumerate(before) if word == UNK]
    for t, (word, shown) in enumerate(zip(before, after)):
      assert shown == word if word != UNK else shown not in model.vocab.words, (word, shown)
    tokens = model.vocab.decode(generate(model, [], draw, seed=5)[i])  # Ends included.
    rngs = [np.random.default_rng([5, i, t]) for t, token in enumerate(tokens) if token == UNK]
    assert [after[t] for t in places] == [
        model.spelling.draw(rng, set(model.vocab.words)) for rng in rngs]
    alone = ''.join(text_pieces(model, '', draw, seed=5, sample=i))
    assert alone.split() == after
  (greedy,) = generate_text(model, 'the', Sampling(4, temperature=0))
  assert greedy.split() == ['the', UNK, 'jury', 'the']  # </text> prints a blank line.
  model.spelling = spelling.fit({}, model.vocab.words, model.vocab.counts, order=3)
  assert UNK in generate_text(model, '', draw, seed=5)[0].split()


def test_a_spelt_word_that_ends_a_sentence_ends_it_for_the_counter_too():
  """--sentences counts the text that prints: a spelt word ending in '.' ends a sentence."""
  model = bigram_model({TEXT_END: 'the', 'the': UNK, UNK: 'jury', 'jury': 'the'})
  model.spelling = spelling.fit({'hom.': 3, 'sa.': 2}, model.vocab.words, model.vocab.counts,
                                order=3)
  texts = generate_text(model, '', Sampling(60, samples=12, sentences=1), seed=3)
  assert all(reader_count(text, closed=True) == 1 for text in texts), texts
  assert sum(text.endswith('.') for text in texts) >= 2, texts  # Others end at </text>.
  unspelt = generate_text(model, '', Sampling(60, samples=4, sentences=1, spell_unk=False),
                          seed=3)
  assert all('.' not in text for text in unspelt)  # No end: each runs to the length.


@pytest.mark.parametrize('sentences,length,brown,text', [
    (1, 20, 'the jury </p>', 'the said <eos>'),
    (2, 20, 'the jury </p> </text> the jury </p>', 'the said <eos> the said <eos>'),
    (3, 8, 'the jury </p> </text> the jury </p> </text>',
     'the said <eos> the said <eos> the said'),
    (1, 2, 'the jury', 'the said')])
def test_sentences_stop_a_sample_after_its_nth_end_unless_the_length_comes_first(
    sentences, length, brown, text):
  sampling = Sampling(length, temperature=0, sentences=sentences)
  for model, want in [(bigram_model(BROWN_LIKE), brown),  # </text> after </p>: no new end.
                      (bigram_model(TEXT_LIKE, sentence_end=END_OF_SENTENCE), text)]:
    (ids,) = generate(model, [], sampling)
    assert ' '.join(model.vocab.decode(ids)) == want


def reader_count(text: str, closed: bool) -> int:
  """Sentences in a text as a reader counts them: each '.', '!' or '?' (closers after it)
  followed by a space or a line's end, and each non-empty line that no mark ends, ended
  (the last line only where the text was `closed`, not cut off by the length)."""
  lines, count = text.split('\n'), 0
  for number, line in enumerate(lines, 1):
    count += len(re.findall(r'[.!?]["\'”’»)\]}]*(?=\s|$)', line))
    ended = number < len(lines) or closed
    count += ended and bool(line.strip()) and not re.search(r'[.!?]["\'”’»)\]}]*\s*$', line)
  return count


@pytest.mark.slow
def test_sampled_sentences_count_every_end_and_stop_where_the_unbounded_sample_would(runs):
  """Brown's tokens: '.' and its closing quotes '' apart, paragraphs ending </p>."""
  trained = runs['words']
  prompt = trained.vocab.encode(['The', 'jury'])
  free = generate(trained, prompt, Sampling(300, temperature=1.5, samples=6), seed=4)
  assert all(len(ids) == 300 for ids in free)
  stopped = generate(trained, prompt, Sampling(300, temperature=1.5, samples=6, sentences=2),
                     seed=4)
  def text(ids, sample):  # As it prints: an <unk> spelt.
    shown = shown_unknowns(trained, trained.vocab.decode(ids), Sampling(), 4, sample)
    return as_text(trained, ['The', 'jury', *shown])
  assert sum(reader_count(text(ids, i), False) for i, ids in enumerate(free)) > 12
  for i, (short, long) in enumerate(zip(stopped, free)):
    assert short.tolist() == long[:len(short)].tolist()
    if len(short) < 300:
      assert reader_count(text(short, i), closed=True) == 2
    else:
      assert reader_count(text(short, i), closed=False) < 2


# --- text out ----------------------------------------------------------------------------

@pytest.mark.slow
def test_characters_print_joined_one_line_per_sentence(runs):
  trained = runs['chars']
  texts = generate_text(trained, 'the ju', Sampling(80, samples=3, sentences=2), seed=1)
  drawn = generate(trained, trained.vocab.encode(list('the ju')),
                   Sampling(80, samples=3, sentences=2), seed=1)
  for i, (text, ids) in enumerate(zip(texts, drawn)):
    shown = shown_unknowns(trained, trained.vocab.decode(ids), Sampling(), 1, i)
    chars = ''.join('\n' if t == END_OF_SENTENCE else t for t in shown)
    assert text == ('the ju' + chars).removesuffix('\n')
    assert text.count('\n') <= 1


def program(*args: str, cwd) -> subprocess.Popen:
  return cli.start('generate', *args, cwd=cwd)


@pytest.mark.slow
def test_the_program_prints_text_and_refuses_bad_settings_in_one_line(runs, tmp_path):
  chars, words = (Path(runs[k].config.workdir) for k in ('chars', 'words'))
  cwd = chars.parent  # Workdirs typed relative to it.
  good = [program(f'--workdir={chars.name}', 'the ju', '--length=40', '--seed=2',  # predict's
                  '--samples=2', '--top_p=0.9', cwd=cwd),  # habit: the prompt an argument.
          program(f'--workdir={words.name}', '--prompt=zebra quagga', '--length=5',
                  '--temperature=0', cwd=cwd)]
  bad = {('--length=0',): '--length must be at least 1',
         ('--top_p=0',): '--top_p must be in (0, 1]', ('--top_p=1.5',): '--top_p must be in (0, 1]',
         ('--temperature=-1',): '--temperature must',
         ('the', 'jury'): 'one prompt, quoted, not 2 arguments',
         ('--prompt=the', 'jury'): 'the prompt twice'}
  refused = [program(f'--workdir={words.name}', *args, cwd=cwd) for args in bad]
  (rc, out, err), (rc2, out2, err2) = map(cli.finish, good)
  assert rc == rc2 == 0, err + err2
  texts = generate_text(runs['chars'], 'the ju', Sampling(40, samples=2, top_p=0.9), seed=2)
  assert out == f'--- sample 1 ---\n{texts[0]}\n--- sample 2 ---\n{texts[1]}\n'
  assert 'warning:' in err2 and 'zebra quagga' in err2  # All unknown: allowed, warned.
  greedy = generate_text(runs['words'], 'zebra quagga', Sampling(5, temperature=0))
  assert out2 == greedy[0] + '\n' and greedy[0].startswith('zebra quagga')
  for child, phrase in zip(refused, bad.values()):
    returncode, _, stderr = cli.finish(child)
    assert returncode == 2, stderr
    assert stderr.startswith('error: ') and phrase in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1 and 'Traceback' not in stderr, stderr


@pytest.mark.slow
def test_typos_draw_a_word_being_typed_from_the_words_it_may_be_a_misspelt_beginning_of(runs):
  """--typos: 'edecti' begins no word; the first word drawn is one it may be the misspelt
  beginning of, weighed by p(w | the prompt before it) · P(typed | w) (tests/test_complete.py's
  brute-force channel): greedily, the best of that product (not of p alone), then the greedy
  text after it."""
  trained = runs['words']
  channel = prefix_channel(trained, 'edecti')
  want = numpy_next_log_probs(trained, trained.vocab.encode(['The', 'jury']).tolist())
  score = {w: want[trained.vocab.id_of(w)] + channel[w] for w in channel}
  best, likeliest = max(score, key=score.get), max(channel, key=lambda w: score[w] - channel[w])
  assert best != likeliest  # Else the channel's weight would go untested.
  words = Path(trained.config.workdir)
  rc, out, err = cli.finish(program(f'--workdir={words.name}', '--typos', '--temperature=0',
                                    '--length=6', 'The jury edecti', cwd=words.parent))
  greedy = generate_text(trained, f'The jury {best}', Sampling(5, temperature=0))
  assert rc == 0 and err == '' and out == greedy[0] + '\n', err


@pytest.mark.slow
def test_typos_continue_the_prompt_as_corrected_and_a_character_model_refuses_them(runs):
  """--typos: the sample is the one drawn after the prompt typed right (nplm correct's
  correction of a sentence's beginning), printed with it; a note says how it was read. A
  character model has no words to correct: one line, status 2."""
  words, chars = (Path(runs[k].config.workdir) for k in ('words', 'chars'))
  corrected = Corrector(runs['words']).correct('Teh jury sayd', ended=False)
  assert corrected.corrected == 'The jury said', corrected  # Else this tests nothing.
  typos = program(f'--workdir={words.name}', '--typos', '--temperature=0', '--length=6',
                  'Teh jury sayd ', cwd=words.parent)
  refused = program(f'--workdir={chars.name}', '--typos', 'the jury', cwd=chars.parent)
  (rc, out, err), (rc2, _, err2) = cli.finish(typos), cli.finish(refused)
  greedy = generate_text(runs['words'], 'The jury said', Sampling(6, temperature=0))
  assert rc == 0 and out == greedy[0] + '\n' and out.startswith('The jury said '), err
  assert err == ("note: 'Teh jury sayd ': read as 'The jury said ' (Teh -> The, sayd -> "
                 "said)\n"), err
  assert rc2 == 2 and err2.startswith('error: spelling correction reads words') and (
      len(err2.splitlines()) == 1), err2
