"""Spelling correction and case (nplm.use.correction): a sentence typed in capitals read in
the vocabulary's case (truecasing) then corrected, against a brute force that scores every
sentence whole; a --lowercase model's corrections; a capital typed kept as the writer's."""

import math
from collections.abc import Sequence

import numpy as np
import pytest

from nplm.use.correction import Corrector
from nplm.use.sentences import score_sentences
from nplm.use.spelling_channel import Channel
from tests import cli
from tests.test_correction import reached


def capitals(x: str) -> bool:
  """Of a sentence typed in capitals: a word, read in its letters."""
  return any(c.isupper() for c in x)


def in_letters(channel, typed: Sequence[str], meant: Sequence[str]) -> float:
  """Σ ln P(x | w) of a sentence typed in capitals, its words compared in their letters."""
  return sum(channel.log_prob(x.lower(), w.lower()) if capitals(x) else channel.log_prob(x, w)
             for x, w in zip(typed, meant))


def lm(model, tokens: Sequence[str]) -> float:
  return score_sentences(model, [' '.join(tokens)])[0].log_prob


def read_in_capitals(model, words, typed: list[str]) -> tuple[str, ...]:
  """Each word typed in capitals as its most frequent form in the vocabulary (in lower case
  where it has none, else capitalized), then from the first on, as whichever of its forms
  makes the sentence, scored whole, likeliest (the form held kept on a tie, else the first
  of equals)."""
  forms = {x: sorted((w for w in words if w.upper() == x), key=model.vocab.id_of)
           or [x.lower(), x.capitalize()] for x in typed if capitals(x)}
  read = [forms[x][0] if x in forms else x for x in typed]
  for i, x in enumerate(typed):
    if len(forms.get(x, ())) >= 2:
      options = [read[i], *(w for w in forms[x] if w != read[i])]
      read[i] = options[int(np.argmax([lm(model, (*read[:i], w, *read[i + 1:]))
                                       for w in options]))]
  return tuple(read)


@pytest.mark.slow
@pytest.mark.parametrize('kind', ['nnlm', 'lstm', 'text'])
def test_a_sentence_in_capitals_is_read_in_the_vocabularys_case_then_corrected(word_models,
                                                                             kind):
  """Typed in capitals, each word is read as the vocabulary's forms of it make the sentence
  likeliest (read_in_capitals), then corrected by the greedy search whose channel compares
  words in their letters: the brute force's; the text stays in capitals. Where the sentence
  has small letters, a word in capitals is read as typed."""
  model = word_models(kind)
  corrector = Corrector(model, alpha=0.9, max_changes=2, second_edit=0.3)
  words, channel = corrector.words, corrector.channel
  lowered = {w.lower() for w in words}
  for text in ('THE JYRY SAID IT WAS TEH END', 'IT WAS THE END OF THE DYA', 'TEH JURY'):
    typed = text.split()
    meant = read = read_in_capitals(model, words, typed)
    best, changed = lm(model, read) + in_letters(channel, typed, read), set()
    for _ in range(2):  # The greedy search, as greedy() but over words in any case.
      options = [(i, (*meant[:i], w, *meant[i + 1:])) for i, x in enumerate(typed)
                 if i not in changed for w in sorted(words)
                 if w.upper() != x and w.lower() in reached(x.lower(), lowered, channel.alphabet)
                 and in_letters(channel, [x], [w]) > -math.inf]
      values = [lm(model, option) + in_letters(channel, typed, option) for _, option in options]
      if not values or max(values) <= best:
        break
      top = int(np.argmax(values))
      changed.add(options[top][0])
      meant, best = options[top][1], values[top]
    correction = corrector.correct(text)
    assert correction.tokens == meant, (text, read)
    assert correction.log_prob == pytest.approx(best, abs=1e-5)
    assert [c.position for c in correction.changes] == sorted(changed)
    assert correction.corrected == ' '.join(
        w.upper() if i in changed else x for i, (x, w) in enumerate(zip(typed, meant)))
    assert read != tuple(typed)  # Read in the vocabulary's case.
  assert correction.changes  # The search changed a word too.
  # A sentence with small letters: its capitals are the writer's, its words read as typed.
  mixed = corrector.correct('the JYRY said')
  assert mixed.tokens == ('the', 'JYRY', 'said') and 'jury' in corrector.candidates('jyry')


@pytest.mark.slow
def test_a_lowercased_model_corrects_typed_text_and_keeps_its_case(word_models, tmp_path):
  """A --lowercase model reads text in lower case: it corrects any text as it corrects the
  text lowercased, and the text keeps its case where a word is replaced (capitalized, in
  capitals); nplm correct and nplm complete run on it as a user types them."""
  model = word_models('text_lower')
  corrector = Corrector(model, alpha=0.9, max_changes=3)
  lowered = corrector.correct('teh jury sayd it .')
  assert [(c.typed, c.corrected) for c in lowered.changes] == [('teh', 'the'), ('sayd', 'said')]
  typed = corrector.correct('Teh JURY SAYD it .')
  assert typed.tokens == lowered.tokens and typed.changes == lowered.changes
  assert typed.corrected == 'The JURY SAID it .'
  assert corrector.correct('TEH JURY SAYD IT .').corrected == 'THE JURY SAID IT .'
  workdir = model.config.workdir
  done = cli.run('correct', f'--workdir={workdir}', '--alpha=0.9', 'Teh jury sayd it .',
                 cwd=tmp_path)
  assert done.returncode == 0 and done.stdout == 'The jury said it .\n', done.stderr
  completed = cli.run('complete', f'--workdir={workdir}', '--k=2', 'Teh jury', cwd=tmp_path)
  assert completed.returncode == 0 and completed.stdout.count('\n') == 3, completed.stderr
  assert "read as 'The jury'" in completed.stderr


@pytest.mark.slow
def test_a_capital_typed_is_not_taken_away_alone(word_models):
  """A word that differs from the typed one in its case alone is no candidate where a capital
  was typed (the writer's: 'The' is not 'the'; 'THE' is read as 'the' or 'The' before the
  search, no change), but is where none was."""
  corrector = Corrector(word_models('nnlm'), alpha=0.9)
  # Capitals the tiny vocabulary lacks are the channel's letters too: else it rules them out.
  corrector.channel = Channel(''.join(sorted({*corrector.channel.alphabet, *'THE'})), 0.9)
  assert {'the', 'The'} <= corrector.words
  assert 'The' in corrector.candidates('Thf')  # Reached where no capital is taken away.
  for typed in ('THE', 'The', 'tHE'):
    assert not {'the', 'The'} & set(corrector.candidates(typed)), typed
  name = next(w for w in sorted(corrector.words)
              if w.istitle() and w.lower() not in corrector.words)
  assert name in corrector.candidates(name.lower())
  assert corrector.correct('THE JURY SAID').changes == ()
