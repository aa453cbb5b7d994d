"""nplm complete: a wide beam gives the brute-force top k of every continuation, for a window,
a recurrent and an n-gram model; ends, whole last words of characters and subwords, refusals,
the Python call and the program."""

import json
import heapq
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import nplm
from nplm.data.vocab import UNK
from nplm.errors import ConfigError
from nplm.use import answers, completion
from nplm.use.completion import MAX_WORDS, SENTENCE_END, Completer, complete
from nplm.use.prompts import read_prompt
from nplm.use.trained import load_trained
from tests import cli
from tests.conftest import write_text_corpus
from tests.test_spelling_channel import distance, slips

END_MARKS = ('<eos>', '</p>', '</text>')
SENTENCE_MARKS = ('.', '!', '?')
NGRAMS = {'kn3': [], 'kn3_chars': ['--tokens=chars'],
          'kn3_bpe': ['--tokenizer=bpe', '--subword_vocab_size=80']}


def nplm_program(*args: str, cwd: Path) -> subprocess.Popen:
  return cli.start(*args, cwd=cwd)


@pytest.fixture(scope='module')
def models(quick_runs, tmp_path_factory):
  """A window and a recurrent model on the tiny Brown corpus (|V| = 51) and a word2vec model
  (the session's quick runs), and KN3 runs of its text as text:DIR (words, characters,
  subwords) written by `nplm ngram --out`, as the tools read them."""
  root = tmp_path_factory.mktemp('complete')
  text = write_text_corpus(root / 'text')
  fits = [nplm_program('ngram', f'--dataset=text:{text}', f'--data_dir={root / "tfds"}',
                       f'--out={root / name}', '--order=3', *flags, cwd=root)
          for name, flags in NGRAMS.items()]  # Fitted while the networks train.
  networks = {name: quick_runs(name) for name in ('nnlm', 'lstm', 'word2vec')}
  for fit in fits:
    status, _, stderr = cli.finish(fit)
    assert status == 0, stderr
  return {**networks, **{name: load_trained(root / name) for name in NGRAMS}}


def brute_force(model, prefix: str, max_words: int,
                first=lambda word: True) -> dict[tuple[int, ...], float]:
  """Every continuation of a word-level model, to max_words words or a sentence's end (an
  end mark, '.', '!', '?'), <unk> never, an end mark never first, its first word one that
  `first` takes: ln p by next_words, one batch per length."""
  vocab, reader = model.vocab, model.next_words()
  prompt = list(read_prompt(model, prefix).ids)
  ends = {vocab.id_of(w) for w in END_MARKS + SENTENCE_MARKS if w in vocab.words}
  live, done = {(): 0.0}, {}
  for length in range(max_words):
    sequences = list(live)
    rows = np.array([prompt + list(s) for s in sequences]).reshape(len(sequences), -1)
    log_probs = reader.next(reader.start(rows))[0].astype(np.float64)
    following = {}
    for sequence, row in zip(sequences, log_probs):
      for token in range(vocab.size):
        if token == vocab.unk_id or (not sequence and (vocab.words[token] in END_MARKS
                                                       or not first(vocab.words[token]))):
          continue
        extended = (*sequence, token)
        ending = token in ends or length + 1 == max_words
        (done if ending else following)[extended] = live[sequence] + row[token]
    live = following
  return done


def best(scored: dict[tuple[int, ...], float], k: int) -> list[tuple[tuple[int, ...], float]]:
  return sorted(scored.items(), key=lambda item: (-item[1], item[0]))[:k]


# A space after the last word: it is whole (without one it is read as still being typed).
@pytest.mark.parametrize('name,prefix', [('nnlm', 'The jury said '), ('nnlm', ''),
                                         ('lstm', 'the election '), ('kn3', 'The jury said ')])
@pytest.mark.slow
def test_a_wide_beam_gives_the_brute_force_top_k_and_the_default_beam_exact_ones(
    models, name, prefix):
  model, k, max_words = models[name], 10, 3
  every = brute_force(model, prefix, max_words)
  wide = complete(model, prefix, k, max_words, beam_width=model.vocab.size ** 2)
  want = best(every, k)
  assert [model.vocab.decode(ids) for ids, _ in want] == [c.tokens for c in wide]
  np.testing.assert_allclose([c.log_prob for c in wide], [p for _, p in want], atol=1e-5)
  for c in complete(model, prefix, k, max_words):  # A narrower beam: exact where it reaches.
    assert c.log_prob == pytest.approx(every[tuple(model.vocab.encode(c.tokens))], abs=1e-5)
  for c in wide:
    ended_at_end = c.tokens[-1] in END_MARKS + SENTENCE_MARKS
    assert c.ended == (SENTENCE_END if ended_at_end else MAX_WORDS), c
    shown = [token for token in c.tokens if token not in END_MARKS]
    assert c.words == len(shown) <= max_words and c.text == ' '.join([*prefix.split(), *shown])
    assert c.probability == pytest.approx(math.exp(c.log_prob))


@pytest.mark.parametrize('known', [False, True], ids=['unknown', 'a_word_too'])
@pytest.mark.parametrize('name', ['nnlm', 'kn3'])
@pytest.mark.slow
def test_a_word_being_typed_is_completed_by_the_words_it_begins(models, name, known):
  """A prefix that ends inside a word, as a search box's does while the word is typed: the
  brute-force top k of the continuations of the prefix before it whose first word begins
  with what was typed, and no note of <unk>. What was typed may be a word of the vocabulary
  itself ("the off" on its way to "office"): it is one of them. With a space after it, the
  word is whole: one the vocabulary lacks is read as <unk>."""
  model, k, max_words = models[name], 5, 2
  words = model.vocab.words
  if known:  # Read as typed (typos would weigh the words one slip away too, and correct it).
    typos = False
    typed = min((w for w in words if w.isalpha() and any(
        v != w and v.startswith(w) for v in words)), key=len)
  else:
    typos = True
    typed = next(w[:2] for w in words if len(w) > 2 and w.isalpha() and w[:2] not in words)
  typing = f'The jury {typed}'
  every = brute_force(model, 'The jury', max_words, first=lambda word: word.startswith(typed))
  found = complete(model, typing, k, max_words, beam_width=model.vocab.size ** 2, typos=typos)
  want = best(every, k)
  assert len(want) == k
  assert [model.vocab.decode(ids) for ids, _ in want] == [c.tokens for c in found]
  np.testing.assert_allclose([c.log_prob for c in found], [p for _, p in want], atol=1e-5)
  assert all(c.text.startswith(f'The jury {c.tokens[0]}') for c in found)
  completer = Completer(model, typos=typos)
  assert 'warning' not in answers.complete(completer, typing, k, max_words)
  spaced = answers.complete(completer, f'{typing} ', k, max_words)
  every = brute_force(model, f'{typing} ', max_words)
  if known:  # A whole word: what follows it (the default beam: exact where it reaches).
    assert 'warning' not in spaced
    for c in spaced['completions']:
      assert c['log_prob'] == pytest.approx(every[tuple(model.vocab.encode(c['tokens']))],
                                            abs=1e-5)
  else:
    assert spaced['warning'].endswith(f'read as {UNK} (not in the vocabulary): {typed}')
    assert [model.vocab.decode(ids) for ids, _ in best(every, k)] == [
        c['tokens'] for c in spaced['completions']]


def prefix_channel(model, typed: str) -> dict[str, float]:
  """ln P(typed | w) of each typable word w: the max over its prefixes u of P(typed | u) (α
  0.99, γ 0.1), summed over every path of slips (tests/test_spelling_channel.py's count),
  for u as many edits from typed as its length allows (3 to 5 letters one, 6 on two)."""
  words = [w for w in model.vocab.words if w != UNK and w not in END_MARKS]
  alphabet = ''.join(sorted({c for w in model.vocab.words if w not in (UNK, '</p>', '</text>')
                             for c in w}))
  edits = 1 if len(typed) < 6 else 2
  found = {}
  for u in {w[:end] for w in words for end in range(1, len(w) + 1)}:
    # Two edits in any order are 3 at most in the distance of adjacent swaps (one inside a
    # swap): those further are not counted.
    near = distance(typed, u) <= 1 if edits == 1 else distance(typed, u) <= 3
    p = slips(u, 0.99, 0.1, alphabet).get(typed) if near else None
    for w in (w for w in words if w.startswith(u) and p):
      found[w] = max(found.get(w, -math.inf), math.log(p))
  return found


# 'wth': one edit from prefixes of 'that', 'the', 'which'; 'edecti': one from 'election's,
# two from 'decision's and 'executive's.
@pytest.mark.parametrize('name,typed', [('nnlm', 'wth'), ('kn3', 'wth'), ('nnlm', 'edecti')])
@pytest.mark.slow
def test_a_misspelt_word_being_typed_is_completed_by_the_words_it_may_begin(models, name,
                                                                            typed):
  """A last word that begins no word but may be a misspelt beginning of several: the
  brute-force top k of p(continuation | the prefix before it) ·
  P(typed | its first word), with both figures; no note of <unk>. --notypos reads it as
  <unk>."""
  model, k, max_words = models[name], 5, 2
  assert not any(word.startswith(typed) for word in model.vocab.words)
  channel = prefix_channel(model, typed)
  every = brute_force(model, 'The jury', max_words, first=lambda word: word in channel)
  scored = {ids: p + channel[model.vocab.words[ids[0]]] for ids, p in every.items()}
  found = complete(model, f'The jury {typed}', k, max_words, beam_width=model.vocab.size ** 2)
  want = best(scored, k)
  assert len(want) == k and len(channel) >= 3
  assert [model.vocab.decode(ids) for ids, _ in want] == [c.tokens for c in found]
  np.testing.assert_allclose([c.log_prob for c in found], [every[ids] for ids, _ in want],
                             atol=1e-5)
  np.testing.assert_allclose([c.channel_log_prob for c in found],
                             [channel[c.tokens[0]] for c in found], rtol=1e-9)
  assert all(c.text.startswith(f'The jury {c.tokens[0]}') for c in found)
  assert 'warning' not in answers.complete(Completer(model), f'The jury {typed}', k, max_words)
  as_typed = answers.complete(Completer(model, typos=False), f'The jury {typed}', k, max_words)
  assert as_typed['warning'].endswith(f'read as {UNK} (not in the vocabulary): {typed}')


@pytest.mark.parametrize('name', ['nnlm', 'kn3'])
@pytest.mark.slow
def test_misspelt_words_before_the_one_typed_are_corrected_as_a_sentence_begins(models,
                                                                                name):
  """With typos, the words before the word being typed are nplm correct's correction of
  the beginning of a sentence (its tests check that search), then completed; --notypos
  reads them as typed."""
  model = models[name]
  typed = 'Teh jury wth'
  begun = Completer(model).corrector.correct('Teh jury', ended=False)
  assert begun.tokens == ('The', 'jury')
  found = complete(model, typed, 4, 2)
  assert [c.as_dict() for c in found] == [
      c.as_dict() for c in complete(model, 'The jury wth', 4, 2)]
  as_typed = complete(model, typed, 4, 2, typos=False)
  assert all(c.text.startswith('Teh jury wth ') for c in as_typed)
  assert answers.complete(Completer(model, typos=False), typed, 4, 2)['warning'].endswith(
      'Teh wth')


@pytest.mark.slow
def test_a_prefix_typed_in_capitals_is_completed_as_it_is_read(models):
  """Caps lock on: the words before the one being typed are read as nplm correct reads
  words in capitals ('The jury' or 'the jury'), and the word being typed is compared in its letters: the
  completions of the prefix as read, with the same channel's figures; --notypos reads the
  words as typed (<unk>)."""
  model = models['nnlm']
  read = Completer(model).corrector.correct('THE JURY', ended=False)
  assert read.tokens in {('The', 'jury'), ('the', 'jury')} and read.changes == ()
  found = complete(model, 'THE JURY WTH', 4, 2)
  assert len(found) == 4 and [c.as_dict() for c in found] == [
      c.as_dict() for c in complete(model, ' '.join(read.tokens) + ' wth', 4, 2)]
  assert 'warning' not in answers.complete(Completer(model), 'THE JURY WTH', 4, 2)
  # One letter of the word being typed, caps lock on: the words it begins in any case.
  begun = {c.tokens[0] for c in complete(model, 'THE JURY W', 20, 1)}
  assert {w[0] for w in begun} == {'w'} or {w[0] for w in begun} == {'w', 'W'}, begun
  assert answers.complete(Completer(model, typos=False), 'THE JURY WTH', 4, 2)[
      'warning'].endswith('THE JURY WTH -- every token of it: the model sees no more than '
                          '"rare words"')


@pytest.mark.slow
def test_a_text_dataset_ends_continuations_at_eos(models):
  for name, prefix in [('kn3', 'the'), ('kn3_chars', 'The jury said')]:
    completions = complete(models[name], prefix, k=50, max_words=2)
    at_eos = [c for c in completions if c.tokens[-1] == '<eos>']
    assert at_eos and all(c.ended == SENTENCE_END for c in at_eos), name
    assert all('<eos>' not in c.text for c in completions)


def next_log_probs(model, prefix: str, tokens: list[str]) -> np.ndarray:
  reader = model.next_words()
  ids = [*read_prompt(model, prefix).ids, *model.vocab.encode(tokens)]
  return reader.next(reader.start(np.array([ids]).reshape(1, -1)))[0][0].astype(np.float64)


def goes_on_with_a_subword(token: str) -> bool:
  return not token.startswith('▁') and token not in ('<eos>', UNK)


@pytest.mark.parametrize('name,read_as,typed,word_goes_on', [
    ('kn3_chars', 'the j', '', lambda token: token not in (' ', '<eos>')),
    ('kn3_bpe', 'the', 'j', goes_on_with_a_subword)])
@pytest.mark.slow
def test_characters_and_subwords_end_on_a_whole_word(models, name, read_as, typed,
                                                      word_goes_on):
  """A continuation's ln p is its tokens' and, at max_words, the next token's not going on
  with its last word; words are whitespace words, after the typed word of a prefix that
  subwords read back; a wider beam finds no worse."""
  model, prefix, max_words = models[name], 'the j', 2
  completions = complete(model, prefix, k=8, max_words=max_words)
  assert completions and [c.log_prob for c in completions] == sorted(
      (c.log_prob for c in completions), reverse=True)
  for c in completions:
    shown = [token for token in c.tokens if token != '<eos>']
    text = model.tokenizer.detokenize(shown)
    assert UNK not in c.tokens and text.startswith(typed)
    assert len(text[len(typed):].split()) == c.words <= max_words
    assert c.text == model.tokenizer.detokenize([*model.tokenizer.tokens(read_as), *shown])
    assert c.text.startswith(prefix)
    assert c.ended == (SENTENCE_END if c.tokens[-1] == '<eos>' else MAX_WORDS)
    want = sum(next_log_probs(model, read_as, c.tokens[:i])[model.vocab.id_of(token)]
               for i, token in enumerate(c.tokens))
    if c.ended == MAX_WORDS:
      assert c.words == max_words
      after = next_log_probs(model, read_as, c.tokens)
      want += np.logaddexp.reduce([p for p, token in zip(after, model.vocab.words)
                                   if not word_goes_on(token)])
    assert c.log_prob == pytest.approx(want, abs=1e-5)
  wider = complete(model, prefix, k=8, max_words=max_words, beam_width=64)
  assert all(w.log_prob >= c.log_prob - 1e-9 for w, c in zip(wider, completions))


def best_first(model, read_as: str, typed: str, max_words: int,
               k: int) -> list[tuple[tuple[int, ...], float]]:
  """The exact k most probable subword continuations of `read_as` whose text begins with
  `typed`, to max_words words after it (the rest of the typed word counting as one), their
  last word whole, or to <eos>, found by uniform-cost search: every extension goes on a heap
  by ln p, and since a token added only lowers ln p, the first k finished ones popped are
  the top k."""
  vocab, detokenize = model.vocab, model.tokenizer.detokenize
  goes_on = np.array([goes_on_with_a_subword(token) for token in vocab.words])
  heap, found = [(0.0, (), False)], []
  while len(found) < k:
    cost, ids, finished = heapq.heappop(heap)
    if finished:
      found.append((ids, -cost))
      continue
    log_probs = next_log_probs(model, read_as, vocab.decode(ids))
    text = detokenize(vocab.decode(ids))
    words = len(text[len(typed):].split()) if text.startswith(typed) else None
    if words == max_words:
      heapq.heappush(heap, (cost - np.logaddexp.reduce(log_probs[~goes_on]), ids, True))
    for token, piece in enumerate(vocab.words):
      if piece == '<eos>' and words:
        heapq.heappush(heap, (cost - log_probs[token], (*ids, token), True))
      if piece in ('<eos>', UNK) or (words == max_words and not goes_on[token]):
        continue
      longer = detokenize(vocab.decode((*ids, token)))
      if longer.startswith(typed) or typed.startswith(longer):
        heapq.heappush(heap, (cost - log_probs[token], (*ids, token), False))
  return found


@pytest.mark.slow
def test_a_word_being_typed_in_subwords_is_read_back_and_spelt_out(models):
  """Token healing: the pieces of a last word typed without a space after it are read back,
  and the continuations spell it out in any pieces: the exact top k of a uniform-cost
  search; the typed pieces as such ('▁j' 'u') need not be among them."""
  model, k, max_words = models['kn3_bpe'], 5, 1
  typing = 'The jury sa'
  assert model.tokenizer.tokens(typing)[-1] != '▁sa'  # Typed as more than one piece.
  want = best_first(model, 'The jury', 'sa', max_words, k)
  found = complete(model, typing, k, max_words, beam_width=256)
  assert [model.vocab.decode(ids) for ids, _ in want] == [c.tokens for c in found]
  np.testing.assert_allclose([c.log_prob for c in found], [p for _, p in want], atol=1e-5)
  assert all(c.text.startswith(typing) for c in found)


@pytest.mark.slow
def test_the_python_call_takes_one_prefix_or_a_list_and_refuses_bounds_and_word2vec(
    models, tmp_path):
  workdir = models['nnlm'].config.workdir
  model = nplm.load(workdir)
  one = model.complete('The jury said', k=3, max_words=2)
  assert [c.as_dict() for c in one] == [
      c.as_dict() for c in complete(models['nnlm'], 'The jury said', 3, 2)]
  assert [len(each) for each in model.complete(['The jury said', 'the'], k=2)] == [2, 2]
  for settings, phrase in [(dict(k=0), '--k must be from 1 to 1,000, not 0'),
                           (dict(k=1001), 'not 1,001'),
                           (dict(max_words=51), '--max_words must be from 1 to 50, not 51')]:
    with pytest.raises(ConfigError, match=phrase):
      model.complete('the', **settings)
  with pytest.raises(ConfigError, match='is a word2vec model'):
    nplm.load(models['word2vec'].config.workdir).complete('the')
  typed = [c.tokens[0] for c in model.complete('The jury wth', k=3, max_words=1)]
  assert typed and all(token in ('the', 'that', 'which', 'with') for token in typed)
  assert model.complete('The jury wth', k=1, typos=False)[0].channel_log_prob == 0
  pairs = tmp_path / 'pairs.txt'
  pairs.write_text('wth with\nwiht with\n')
  learned = model.complete('The jury wth', k=3, max_words=1, misspellings=pairs)
  assert learned[0].tokens == ['with'] and learned[0].channel_log_prob > max(
      c.channel_log_prob for c in learned[1:])  # Learned: 'w' 't' taking out 'i' is common.
  with pytest.raises(ConfigError, match='--misspellings weighs typos, which --notypos'):
    model.complete('The jury wth', typos=False, misspellings=pairs)


@pytest.mark.slow
def test_the_program_completes_each_prefix_from_a_relative_workdir(models, tmp_path):
  model = models['kn3']
  workdir = os.path.relpath(model.config.workdir, tmp_path)
  # 'zebra' is not in the vocabulary; 'wth' may begin 'the', 'that' or 'which', misspelt;
  # 'the', a word, may be whole or on its way to 'them' or 'there'.
  prefixes = ['The jury zebra', 'the', 'The jury wth']
  children = [nplm_program('complete', f'--workdir={workdir}', '--k=4', '--max_words=2',
                           *flags, *prefixes, cwd=tmp_path)
              for flags in ([], ['--json'], ['--notypos'])]
  (printed, stdout, stderr), (as_json, json_lines, _), (as_typed, _, unread) = map(
      cli.finish, children)
  assert printed == as_json == as_typed == 0, (stderr, unread)
  assert stderr.count(UNK) == 1 and 'zebra' in stderr and 'wth' in unread, (stderr, unread)
  blocks = [block.splitlines() for block in stdout.rstrip('\n').split('\n\n')]
  lines = [json.loads(line) for line in json_lines.splitlines()]
  for prefix, block, line in zip(prefixes, blocks, lines, strict=True):
    want = complete(model, prefix, k=4, max_words=2)
    assert block[0] == prefix == line['prefix']
    typing, channel = prefix.endswith(('wth', 'the')), ' ln P(typed | word) '
    assert all((channel in row) == typing for row in block[1:])
    rows = [row.split(channel)[0].rsplit(None, 4) for row in block[1:]]
    assert [row[0].strip() for row in rows] == [c.text for c in want]
    assert [float(row[2]) for row in rows] == pytest.approx([c.log_prob for c in want],
                                                            abs=1e-4)
    assert [float(row.split(channel)[1]) for row in block[1:] if typing] == pytest.approx(
        [c.channel_log_prob for c in want if typing], abs=1e-4)
    assert line['completions'] == [c.as_dict() for c in want]


@pytest.mark.parametrize('name,args,phrase', [
    ('kn3', ('--k=0', 'the'), '--k must be from 1 to 1,000'),
    ('kn3', ('--max_words=51', 'the'), '--max_words must be'),
    ('kn3', ('--notypos', '--alpha=0.9', '--second_edit=0', 'the'),
     '--alpha and --second_edit weigh typos, which --notypos leaves unread'),
    ('kn3', ('--alpha=1', 'the'), '--alpha must be in (0, 1), not 1.0'),
    ('kn3', ('--misspellings=none.txt', 'the'), 'none.txt'),
    ('kn3_chars', ('--misspellings=pairs.txt', 'the'),
     '--misspellings weighs typos in the word being typed: this model reads characters')])
@pytest.mark.slow
def test_the_program_refuses_bad_input_in_one_line(models, tmp_path, name, args, phrase):
  (tmp_path / 'pairs.txt').write_text('teh the\n')
  workdir = os.path.relpath(models[name].config.workdir, tmp_path)
  status, _, stderr = cli.finish(nplm_program('complete', f'--workdir={workdir}', *args,
                                            cwd=tmp_path))
  assert status == 2 and stderr.startswith('error: ') and phrase in stderr, stderr
  assert len(stderr.strip().splitlines()) == 1, stderr


def test_the_program_names_a_workdir_that_is_not_there_in_one_line(tmp_path):
  """The program's refusal, without a trained run (the fast tier's test of `nplm complete`)."""
  done = cli.run('complete', '--workdir=runs/none', 'the jury', cwd=tmp_path)
  assert done.returncode == 2, done.stderr
  assert done.stderr.splitlines() == [
      'error: runs/none: no such directory (give the --workdir of a run)']


def test_the_top_scores_break_ties_at_the_cut_by_the_lowest_position():
  scores = np.zeros((10, 100))
  scores[3, 7], scores[9, 99] = 1.0, -np.inf
  assert completion._top(scores, 4) == [(3, 7), (0, 0), (0, 1), (0, 2)]
  assert completion._top(scores, 1000)[-1] == (9, 98)  # -inf never.


@pytest.mark.parametrize('name', ['nnlm', 'lstm', 'kn3'])
@pytest.mark.slow
def test_a_states_rows_go_on_as_their_words_read_afresh(models, name):
  """next_words' `rows`, on which the beam search goes on from each parent's state: rows
  picked, repeated and reordered, then a word pushed, give the distributions of those rows'
  words read from the start."""
  model = models[name]
  reader, ids = model.next_words(), model.vocab.encode('The jury said that'.split())
  prompts = np.array([ids[:3], ids[1:4], ids[[0, 0, 2]]], np.int32)
  picked, pushed = [2, 0, 2, 1], ids[[3, 1, 0, 2]]
  state = reader.push(reader.rows(reader.start(prompts), picked), pushed)
  afresh = reader.start(np.concatenate([prompts[picked], pushed[:, None]], axis=1))
  np.testing.assert_allclose(reader.next(state)[0], reader.next(afresh)[0], atol=1e-5)
