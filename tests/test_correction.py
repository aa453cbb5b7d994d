"""Spelling correction (nplm.use.correction, nplm correct): the corrections against an
exhaustive search of P(w) · P(typed | w) (the channel, tests/test_spelling_channel.py's), and
the command as a user types it."""

import gc
import json
import math
import weakref

import numpy as np
import pytest

from nplm.errors import ConfigError
from nplm.cli.correct import report_lines
from nplm.use import variants as variants_module
from nplm.use.correction import Corrector, sentence_spans
from nplm.use.spelling_channel import edits
from nplm.use.sentences import score_sentences
from tests import cli


@pytest.fixture(scope='module')
def nnlm(quick_runs):
  return quick_runs('nnlm')


# (typed, meant) pairs for a learned channel: slips the tests' sentences make, and others.
PAIRS = (('teh', 'the'), ('jyry', 'jury'), ('sayd', 'said'), ('recieve', 'receive'),
         ('hte', 'the'), ('dya', 'day'), ('juri', 'jury'), ('untill', 'until'))


def objective(model, channel, typed: list[str], meant: tuple[str, ...],
              ended: bool = True) -> float:
  """ln P(meant) + Σ ln P(typed_i | meant_i); not `ended`, P(meant) of the beginning of a
  sentence: its end mark's ln p left out where the model scores one."""
  score = score_sentences(model, [' '.join(meant)])[0]
  lm = (score.log_prob if ended or model.sentence_end is None
        else math.fsum(score.token_log_probs[:-1]))
  return lm + sum(channel.log_prob(x, w) for x, w in zip(typed, meant))


def reached(typed: str, words, alphabet: str) -> list[str]:
  """The `words` one edit from `typed`; two for a typed word outside them (the strings two
  edits reach, every one built), the writer's non-letters kept."""
  near = edits(typed, alphabet)
  if typed not in words:
    near |= {x for y in near for x in edits(y, alphabet)}
  keeps = lambda w: [c for c in w if not c.isalpha()] == [c for c in typed if not c.isalpha()]
  return sorted(w for w in near & words if w != typed and keeps(w))


@pytest.mark.slow
@pytest.mark.parametrize('kind', ['nnlm', 'lstm', 'text', 'text_lstm', 'text_gru', 'kn3',
                                  'transformer', 'nnlm_tree', 'nnlm_learned', 'text_lower'])
def test_one_change_is_the_best_of_every_sentence_one_word_away(word_models, kind):
  """max_changes=1: the correction is the exhaustive argmax over the sentence as typed and
  every sentence that replaces one word by a vocabulary word one edit from it (two for a
  word outside the vocabulary), each scored whole (a finite context's corrector rescores
  only the tokens a change reaches); 'nnlm_learned': with a channel learned from PAIRS."""
  model = word_models(kind.removesuffix('_learned'))
  assert (model.context_length is None) == kind.endswith(('lstm', 'gru'))
  assert (model.sentence_end is not None) == kind.startswith('text')
  misspellings = PAIRS if kind.endswith('_learned') else ()
  corrector = Corrector(model, alpha=0.9, max_changes=1, second_edit=0.3,
                        misspellings=misspellings)
  for text in ('teh jury said', 'the jyry sad it', 'the grand jury', 'it was teh end of the dya',
               'the jyri said'):
    typed = text.split()
    options = [tuple(typed)] + [
        (*typed[:i], w, *typed[i + 1:]) for i, x in enumerate(typed)
        for w in reached(x, corrector.words, corrector.channel.alphabet)]
    values = [objective(model, corrector.channel, typed, option) for option in options]
    assert text != 'the jyri said' or ('the', 'jury', 'said') in options  # Two edits.
    correction = corrector.correct(text)
    best = options[int(np.argmax(values))]
    assert correction.tokens == best, (text, values)
    # Every option's ln P, its changed tokens (and end mark) rescored alone, as whole.
    variants = [(i, w) for i, x in enumerate(typed) for w in corrector.candidates(x)]
    typed_log_probs, scored = variants_module.variant_log_probs(model, tuple(typed), None,
                                                                variants, True)
    lm = [score_sentences(model, [' '.join(option)])[0].log_prob for option in options]
    assert [typed_log_probs.sum(), *[s.sum() for s in scored]] == pytest.approx(lm, abs=1e-6)
    assert correction.log_prob == pytest.approx(max(values), abs=1e-6)
    assert correction.typed_log_prob == pytest.approx(values[0], abs=1e-6)
    # The beginning of a sentence (nplm complete's prefix): no end mark after it.
    begun = [objective(model, corrector.channel, typed, option, ended=False)
             for option in options]
    prefix = corrector.correct(text, ended=False)
    assert prefix.tokens == options[int(np.argmax(begun))], (text, begun)
    assert prefix.log_prob == pytest.approx(max(begun), abs=1e-6)
    assert (begun == values) == (model.sentence_end is None)
  # A second round with nothing left to change: the one word changed in the first.
  alone = Corrector(model, alpha=0.9, max_changes=2, second_edit=0.3,
                    misspellings=misspellings).correct('teh')
  assert alone.tokens == ('the',) and alone.log_prob == pytest.approx(
      objective(model, corrector.channel, ['teh'], ('the',)), abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize('kind', ['text', 'lstm'])
def test_each_sentence_of_a_text_is_corrected_alone_with_changes_of_its_own(word_models, kind):
  """A text of three sentences, one slip each, under max_changes=1: each sentence corrected
  as if typed alone, the last one only ended where the text is, ln P the sum of theirs."""
  model = word_models(kind)
  corrector = Corrector(model, alpha=0.9, max_changes=1, second_edit=0.3)
  texts = ['teh jury said .', 'it was teh end of the day !', 'the jyry said it']
  offsets = np.cumsum([0] + [len(text.split()) for text in texts])
  for ended in (True, False):
    whole = corrector.correct(' '.join(texts), ended)
    ends = [ended or i < len(texts) - 1 for i in range(len(texts))]
    alone = [corrector.correct(text, end) for text, end in zip(texts, ends)]
    assert all(len(a.changes) == 1 for a in alone)
    assert whole.tokens == sum((a.tokens for a in alone), ())
    assert [(c.position, c.typed, c.corrected) for c in whole.changes] == [
        (offset + c.position, c.typed, c.corrected) for a, offset in zip(alone, offsets)
        for c in a.changes]
    assert whole.corrected == ' '.join(a.corrected for a in alone)
    meant = [objective(model, corrector.channel, text.split(), a.tokens, end)
             for text, a, end in zip(texts, alone, ends)]
    typed = [objective(model, corrector.channel, text.split(), tuple(text.split()), end)
             for text, end in zip(texts, ends)]
    assert whole.log_prob == pytest.approx(math.fsum(meant), abs=1e-5)
    assert whole.typed_log_prob == pytest.approx(math.fsum(typed), abs=1e-5)


def greedy(model, corrector: Corrector, typed: list[str], rounds: int):
  """The greedy search by brute force: each round, every sentence that changes one more word
  to one `reached` from it, scored whole (objective's sum, batched), the best kept while it
  gains (the first of equals, as the corrector takes them)."""
  channel, words = corrector.channel, corrector.words
  meant, changed = tuple(typed), set()
  best = objective(model, channel, typed, meant)
  for _ in range(rounds):
    options = [(i, (*meant[:i], w, *meant[i + 1:])) for i, x in enumerate(typed)
               if i not in changed for w in reached(x, words, channel.alphabet)]
    scores = score_sentences(model, [' '.join(option) for _, option in options])
    values = [score.log_prob + sum(channel.log_prob(x, w) for x, w in zip(typed, option))
              for score, (_, option) in zip(scores, options)]
    if not values or max(values) <= best:
      break
    top = int(np.argmax(values))
    changed.add(options[top][0])
    meant, best = options[top][1], values[top]
  return meant, best


@pytest.mark.slow
@pytest.mark.parametrize('kind', ['nnlm', 'lstm'])
def test_a_long_sentence_has_max_changes_for_each_twenty_tokens_begun(word_models, kind):
  """A sentence of 41 to 60 tokens, no end mark in it (a transcript, a chat), has three
  times max_changes: the correction is the brute-force greedy's of three rounds (a window model's
  variants that a change did not reach are not scored again; the two slips side by side
  check that those it reached are), and one sentence of at most 20 tokens keeps
  max_changes."""
  model = word_models(kind)
  corrector = Corrector(model, alpha=0.9, max_changes=1, second_edit=0.3)
  typed = ('teh jyry said it was the end of the day and the grand jury said that it was '
           'the end of the election and the jury said it was the end of the day and the '
           'grand jury said that it was the end').split()
  assert 40 < len(typed) <= 60
  correction = corrector.correct(' '.join(typed))
  meant, best = greedy(model, corrector, typed, rounds=3)
  assert len(correction.changes) >= 2, correction  # More than max_changes, else it tests nothing.
  assert correction.tokens == meant
  assert correction.log_prob == pytest.approx(best, abs=1e-5)
  assert len(corrector.correct(' '.join(typed[:20])).changes) == 1


@pytest.mark.slow
@pytest.mark.parametrize('kind', ['lstm', 'text_gru'])
def test_a_recurrent_search_screens_variants_read_a_few_tokens_on(word_models, kind,
                                                                   monkeypatch):
  """A recurrent model reads each variant READ_ON tokens past its change, then to the end
  only those the screen lets through: most rows read are short, the rounds' variants more
  than READ_ON before a change are not read again, and the correction is still the
  brute-force greedy's, every sentence scored whole."""
  model = word_models(kind)
  corrector = Corrector(model, alpha=0.9, max_changes=1, second_edit=0.3)  # Two rounds.
  typed = ('the jury said it was the end of the day and the grand jury said that it was '
           'the end of the election and teh jyry said it was teh end').split()
  reach = variants_module.READ_ON
  read, offered = [], []  # Each call's rows' lengths; each screening call's variants.
  rows_log_probs, search = variants_module.rows_log_probs, variants_module.variant_log_probs
  monkeypatch.setattr(variants_module, 'rows_log_probs', lambda model, inputs, *rest: (
      read.extend(map(len, inputs)) or rows_log_probs(model, inputs, *rest)))
  monkeypatch.setattr(variants_module, 'variant_log_probs', lambda *args, **named: (
      named.get('read_on') and offered.append({i for i, _ in args[3]})) or search(*args, **named))
  correction = corrector.correct(' '.join(typed))
  meant, best = greedy(model, corrector, typed, rounds=2)
  assert correction.tokens == meant
  assert correction.log_prob == pytest.approx(best, abs=1e-5)
  first = min(change.position for change in correction.changes)  # Each a slip.
  assert len(correction.changes) == 2 and first >= 2 * reach, correction
  assert min(offered[0]) < first - reach <= min(offered[1])
  short = sum(length <= reach + 1 for length in read)
  assert short > 4 * (len(read) - short), read


@pytest.mark.slow
def test_a_sentence_corrected_once_is_not_searched_again(nnlm, monkeypatch):
  """A search box's finished sentences: each keystroke after them corrects only the last."""
  corrector = Corrector(nnlm, alpha=0.9)
  searched = []
  search = variants_module.variant_log_probs
  monkeypatch.setattr(variants_module, 'variant_log_probs', lambda model, tokens, *rest, **named: (
      searched.append(tokens) or search(model, tokens, *rest, **named)))
  first = corrector.correct('teh jury said .', ended=False)
  searched.clear()
  both = corrector.correct('teh jury said . it was teh', ended=False)
  assert {tokens[0] for tokens in searched} == {'it'}  # Only the new sentence's variants.
  assert both.tokens[:4] == first.tokens and both.changes[0] == first.changes[0]


@pytest.mark.slow
def test_a_corrector_no_longer_used_is_freed_with_what_it_kept(nnlm):
  """nplm serve builds a corrector for each /correct request of other settings: what one
  keeps (each word's candidates, each sentence's correction) goes with it."""
  corrector = Corrector(nnlm, alpha=0.9)
  corrector.correct('teh jury said . it was teh end')
  freed = weakref.ref(corrector)
  del corrector
  gc.collect()
  assert freed() is None


def test_a_text_is_cut_into_sentences_after_marks_alone_and_the_closers_after_them():
  tokens = ['He', 'said', '.', "''", 'Mr.', 'Smith', 'paid', '3.5', '?!', 'Yes', '...', 'no',
            '.']
  assert sentence_spans(tokens) == [(0, 4), (4, 9), (9, 11), (11, 13)]
  assert sentence_spans(['It', 'was', '(', 'he', 'said', '.', ')']) == [(0, 7)]
  assert sentence_spans(['Why', '?', '?', "''", 'No', '!']) == [(0, 4), (4, 6)]
  assert sentence_spans(['one', 'sentence']) == [(0, 2)] and sentence_spans([]) == [(0, 0)]


@pytest.mark.slow
def test_more_changes_only_gain_and_a_likely_sentence_stays(nnlm):
  corrector = Corrector(nnlm, alpha=0.9, max_changes=3)
  typed = 'teh jyry said'.split()
  correction = corrector.correct('teh jyry said')
  assert len(correction.changes) >= 2
  assert correction.log_prob == pytest.approx(
      objective(nnlm, corrector.channel, typed, correction.tokens), abs=1e-6)
  assert correction.log_prob > correction.typed_log_prob
  kept = Corrector(nnlm, alpha=0.999999).correct('the jury said')
  assert kept.changes == () and kept.corrected == 'the jury said'


@pytest.mark.slow
def test_the_text_keeps_its_spacing_quotes_and_case_and_a_sentence_of_unknown_words_stays(
    nnlm):
  """Only the changed words are replaced in the text as typed (Brown's tokenizer rewrote
  its quotes as `` and '' and cut off its punctuation); one capitalized stays so."""
  corrector = Corrector(nnlm, alpha=0.9, max_changes=3)
  correction = corrector.correct('Teh jury sayd, "it was fine".')
  assert [(c.typed, c.corrected) for c in correction.changes] == [('Teh', 'The'),
                                                                  ('sayd', 'said')]
  assert correction.corrected == 'The jury said, "it was fine".'
  assert correction.tokens[-3:] == ('fine', "''", '.')
  unknown = corrector.correct('Qxzv wkjq')  # No word of it in the vocabulary: not refused.
  assert unknown.changes == () and unknown.corrected == 'Qxzv wkjq'
  capitals = corrector.correct('THE JURY SAYD.')  # Read as 'the jury sayd', written in capitals.
  assert [(c.typed, c.corrected) for c in capitals.changes] == [('SAYD', 'said')]
  assert capitals.corrected == 'THE JURY SAID.'


@pytest.mark.slow
def test_the_command_corrects_each_line_and_refuses_what_it_cannot(quick_runs, tmp_path):
  nnlm = quick_runs('nnlm')
  workdir = nnlm.config.workdir
  (tmp_path / 'typed.txt').write_text('teh jury said\n\nthe jury said\n')
  done = cli.run('correct', f'--workdir={workdir}', '--file=typed.txt', '--alpha=0.9',
                 cwd=tmp_path)
  assert done.returncode == 0, done.stderr
  corrector = Corrector(nnlm, alpha=0.9)
  want = [corrector.correct(text).corrected for text in ('teh jury said', 'the jury said')]
  assert done.stdout.splitlines() == want
  as_json = cli.run('correct', f'--workdir={workdir}', '--json', '--alpha=0.9', '-',
                    cwd=tmp_path, stdin='teh jury said\n')
  record = json.loads(as_json.stdout)
  assert record['text'] == 'teh jury said' and record['corrected'] == want[0]
  assert [c['typed'] for c in record['changes']] == ['teh']
  # A list of misspellings as a user writes one, read from where the command runs.
  (tmp_path / 'pairs.txt').write_text('# typed meant\n' + ''.join(
      f'{typed} {meant}\n' for typed, meant in PAIRS[:4]) + 'dya->day, dye\n')
  learned = cli.run('correct', f'--workdir={workdir}', '--file=typed.txt', '--alpha=0.9',
                    '--misspellings=pairs.txt', '--details', cwd=tmp_path)
  assert learned.returncode == 0, learned.stderr
  corrector = Corrector(nnlm, alpha=0.9,
                        misspellings=[*PAIRS[:4], ('dya', 'day'), ('dya', 'dye')])
  assert corrector.channel.log_prob('teh', 'the') != Corrector(nnlm).channel.log_prob(
      'teh', 'the')
  want = [line for text in ('teh jury said', 'the jury said')
          for line in report_lines(corrector.correct(text), details=True)]
  assert learned.stdout.splitlines() == want
  assert 'from 6 misspellings' in learned.stderr  # Learned, or read from the cache.
  (tmp_path / 'bad.txt').write_text('teh the\nrecieve\n')
  chars = quick_runs('chars').config.workdir
  for args, phrase in (([f'--workdir={workdir}', '--misspellings=bad.txt'],
                        'bad.txt:2 is not a pair'),
                       ([f'--workdir={workdir}', '--misspellings=none.txt'],
                        'cannot read --misspellings=none.txt'),
                       ([f'--workdir={workdir}', '--alpha=1'], '--alpha must be in (0, 1)'),
                       ([f'--workdir={workdir}', '--second_edit=1'],
                        '--second_edit must be in [0, 1)'),
                       ([f'--workdir={chars}'], 'reads words')):
    refused = cli.run('correct', *args, 'teh jury', cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.startswith('error: '), refused.stderr
    assert phrase in refused.stderr and len(refused.stderr.splitlines()) == 1, refused.stderr


def test_only_letters_are_edited_the_writers_punctuation_stays():
  class Words:  # A text cut at spaces: its quotes and stops stay on the words.
    config = type('Config', (), {'tokens': 'words'})
    tokenizer = type('Tokenizer', (), {'name': 'words'})
    vocab = type('Vocab', (), {'words': ('<unk>', 'it', 'fine', 'fine.', 'the', '"it', 'hat',
                                         '.', 'I.', 'acquiring', 'Southeast', 'southeast',
                                         'mystery')})
  corrector = Corrector(Words)
  assert corrector.candidates('"it') == ()  # Not 'it': the quote is the writer's.
  assert corrector.candidates('"iy') == ('"it',)
  assert corrector.candidates('"iz') == ()  # No word has a z: no slip typed one.
  assert corrector.candidates('fine".') == ()  # Not 'fine.'.
  assert corrector.candidates('fime.') == ('fine.',)
  assert corrector.candidates('teh') == ('the',) and corrector.candidates('...') == ()
  assert corrector.candidates('a.') == ('I.',)  # Not '.': a word stays a word.
  # A capital first letter is the writer's; a lower-case one may be corrected.
  assert corrector.candidates('Acquiring') == () and corrector.candidates('Southeast') == ()
  assert corrector.candidates('southeast') == ('Southeast',)
  assert corrector.candidates('acquirng') == ('acquiring',)  # A letter left out, mended.


def test_settings_that_cannot_work_are_refused_by_name():
  class Words:
    config = type('Config', (), {'tokens': 'words'})
    tokenizer = type('Tokenizer', (), {'name': 'words'})
    vocab = type('Vocab', (), {'words': ('<unk>', 'the')})
  # α where none is given: the uniform channel's, or the learned one's.
  assert Corrector(Words).channel.alpha == 0.99
  assert Corrector(Words, misspellings=[('teh', 'the')]).channel.alpha == 0.999
  assert Corrector(Words, alpha=0.9, misspellings=[('teh', 'the')]).channel.alpha == 0.9
  with pytest.raises(ConfigError, match='--max_changes must be at least 1'):
    Corrector(Words, max_changes=0)
  with pytest.raises(ConfigError, match=r'--alpha must be in \(0, 1\)'):
    Corrector(Words, alpha=0)
  with pytest.raises(ConfigError, match=r'--second_edit must be in \[0, 1\)'):
    Corrector(Words, second_edit=1)
