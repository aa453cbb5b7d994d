"""Typed text as a model reads it: the word being typed at a prefix's end, for words,
characters and learned subwords, and the tokens that spell it out, against brute force."""

import types

import numpy as np
import pytest

from nplm.data.tokenizers import Tokenization
from nplm.data.vocab import UNK, Vocabulary
from nplm.use.prompts import Spelling, read_typing

WORDS = (UNK, 'the', 'jury', 'just', 'justice', 'said', '.')
LINES = ['the church and the churchyard were near the church .',
         'the jury said the church was just .'] * 20


def model_of(tokenization: Tokenization, words=None):
  """What read_typing reads of a model: its config, tokenizer and vocabulary (a subword
  model's: every piece its tokenizer has)."""
  tokenizer = tokenization.tokenizer_of(tokenization.learn(LINES) if tokenization.learned
                                        else None)
  words = words or (UNK, *tokenizer.pieces)
  config = types.SimpleNamespace(tokens=tokenization.tokens, tokenizer=tokenization.tokenizer,
                                 lowercase=False, subword_vocab_size=40)
  vocab = Vocabulary(tuple(words), np.ones(len(words), np.int64), 0)
  return types.SimpleNamespace(config=config, tokenizer=tokenizer, vocab=vocab)


@pytest.mark.parametrize('text,prompt,typed,unknown', [
    ('the ju', ['the'], ['ju'], []),  # Begins 'jury', 'just', 'justice'.
    ('the ju ', ['the', 'ju'], [], ['ju']),  # A space after it: a word, read as <unk>.
    ('the jury', ['the', 'jury'], [], []),  # A word of the vocabulary.
    ('the zq', ['the', 'zq'], [], ['zq']),  # Begins no word.
    ('ju', [], ['ju'], []),
    ('the <unk>', ['the', UNK], [], []),  # A literal <unk>: the class, no word typed.
    ('   ', [], [], []),
    ('', [], [], [])])
def test_a_word_model_reads_an_unknown_last_word_that_begins_words_as_being_typed(
    text, prompt, typed, unknown):
  model = model_of(Tokenization('words'), WORDS)
  typing = read_typing(model, text)
  assert (typing.prompt.tokens, typing.tokens, typing.prompt.unknown) == (prompt, typed, unknown)
  assert typing.prompt.text == text


def test_a_word_model_spells_a_typed_word_with_the_words_it_begins():
  spelling = Spelling(model_of(Tokenization('words'), WORDS))
  for rest in ('ju', 'just', 'j', 'zq'):
    want = [word != UNK and word.startswith(rest) for word in WORDS]
    np.testing.assert_array_equal(spelling.allowed(rest), want)
  assert spelling.rest_after('ju', WORDS.index('justice')) == ''


def test_characters_read_nothing_back():
  model = model_of(Tokenization('chars'), (UNK, *sorted(set(''.join(LINES)))))
  typing = read_typing(model, 'the chur')
  assert typing.tokens == [] and typing.prompt.tokens == list('the chur')


def test_subwords_read_the_last_word_back_and_spell_it_in_any_pieces():
  model = model_of(Tokenization('words', 'bpe', subword_vocab_size=40))
  detokenize, pieces = model.tokenizer.detokenize, model.vocab.words
  for text, read_as, word in [('the chur', 'the', 'chur'), ('near the ch', 'near the', 'ch'),
                              ('church', '', 'church')]:
    typing = read_typing(model, text)
    assert detokenize(typing.tokens) == word and detokenize(typing.prompt.tokens) == read_as
    assert typing.prompt.tokens + typing.tokens == model.tokenizer.tokens(text)
    assert read_typing(model, text + ' ').tokens == []
    assert read_typing(model, f'{text} <unk>').tokens == []  # No pieces spell <unk>.
  spelling = Spelling(model)
  rest = read_typing(model, 'the chur').spelling
  assert rest == '▁chur'
  want = [piece != UNK and (piece.startswith(rest) or (rest.startswith(piece) and piece != ''))
          for piece in pieces]
  np.testing.assert_array_equal(spelling.allowed(rest), want)
  for token in np.flatnonzero(want):  # Each allowed piece leaves what it did not spell.
    left = spelling.rest_after(rest, token)
    assert pieces[token] + left == rest or (left == '' and pieces[token].startswith(rest))
