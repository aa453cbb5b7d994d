"""nplm predict: the k most probable next tokens, against each model written out in numpy."""

import json
import math
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from nplm.data.vocab import TEXT_END, UNK
from nplm.errors import ConfigError
from nplm.use.correction import Corrector
from nplm.use.prediction import next_log_probs, predict
from nplm.use.prompts import read_prompt, unknown_note
from tests.test_complete import prefix_channel
from tests.test_heads import numpy_tree_log_probs
from tests.test_model import numpy_eq1
from tests.test_rnn import numpy_model
from tests.test_transformer import HEADS, numpy_log_probs
from tests import cli

pytestmark = pytest.mark.slow

KINDS = ('nnlm', 'nnlm_nce', 'nnlm_tree', 'lstm', 'transformer')
PREFIXES = ('', 'The jury said', 'the election zebra of')  # 'zebra' is not in the vocabulary.


@pytest.fixture(scope='module')
def runs(quick_runs):
  """One tiny run per kind of model and head, read back as the tools read them (the
  session's quick runs, which other modules read too)."""
  return {kind: quick_runs(kind) for kind in KINDS}


def log_softmax(y):
  y = y - y.max(axis=-1, keepdims=True)
  return y - np.log(np.exp(y).sum(axis=-1, keepdims=True))


def numpy_next_log_probs(trained, history: list[int]) -> np.ndarray:
  """log p(· | history) [|V|] in float64, from the start-of-split context, in numpy."""
  config = trained.config
  params = jax.tree.map(lambda a: np.asarray(a, np.float64),
                        trained.lm.variables_of(trained.params)['params'])
  boundary = trained.vocab.id_of(TEXT_END)
  if config.model == 'lstm':  # From h_0 = 0, `</text>` the first input.
    hidden, _ = numpy_model('lstm', params['model'], np.array([[boundary, *history]]),
                            np.zeros(trained.lm.model.initial_state(1).shape))
    output = params['head']['output']
    return log_softmax(hidden[0, -1] @ output['embedding'].T + output['bias'])
  padded = [boundary] * (config.order - 1) + history
  context = np.array([[padded[-1 - j] for j in range(config.order - 1)]])  # w_{t-1} first
  if config.model == 'transformer':
    return numpy_log_probs(params, context, HEADS)[0, -1]
  if config.head == 'tree':  # Eq. 1's hidden: x beside tanh(d + H x), then the tree.
    x = np.concatenate([params['model']['C']['embedding'][context[:, j]]
                        for j in range(context.shape[1])], axis=1)
    hidden = np.concatenate([x, np.tanh(params['model']['H']['bias']
                                        + x @ params['model']['H']['kernel'])], axis=1)
    return numpy_tree_log_probs(params['head'], trained.lm.head.tree, hidden)[0]
  # Softmax, and NCE's exact distribution: the softmax of its output layer.
  return numpy_eq1(params, context, config.hidden_size, config.direct)[0]


@pytest.mark.parametrize('kind', KINDS)
def test_predictions_are_the_top_k_of_the_full_numpy_distribution(runs, kind):
  trained = runs[kind]
  vocab = trained.vocab
  for prefix in PREFIXES:
    ids = vocab.encode(prefix.split()).tolist()
    want = numpy_next_log_probs(trained, ids)
    got = next_log_probs(trained, read_prompt(trained, prefix))
    assert got.shape == (vocab.size,) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=2e-5)
    assert math.fsum(np.exp(want)) == pytest.approx(1.0, abs=1e-9)  # Over all |V| tokens.
    assert math.fsum(np.exp(got.astype(np.float64))) == pytest.approx(1.0, abs=1e-4)
    best = predict(trained, prefix, k=7)
    order = sorted(range(vocab.size), key=lambda i: -want[i])[:7]
    assert [p.token for p in best] == vocab.decode(order), prefix
    np.testing.assert_allclose([p.log_prob for p in best], want[order], atol=2e-5)
    np.testing.assert_allclose([p.probability for p in best], np.exp(want[order]), atol=2e-6)


def test_k_beyond_the_vocabulary_lists_it_all_and_below_one_is_refused(runs):
  trained = runs['nnlm']
  every = predict(trained, 'the', k=trained.vocab.size + 5)
  assert sorted(p.token for p in every) == sorted(trained.vocab.words)
  assert math.fsum(p.probability for p in every) == pytest.approx(1.0, abs=1e-5)
  with pytest.raises(ConfigError, match='--k'):
    predict(trained, 'the', k=0)


def test_unknown_words_are_read_as_unk_and_named(runs):
  trained = runs['nnlm']
  prompt = read_prompt(trained, 'the zebra and the quagga zebra')
  assert prompt.unknown == ['zebra', 'quagga'] and not prompt.only_unknown
  assert prompt.ids.tolist() == [trained.vocab.id_of(w) for w in
                                 ('the', UNK, 'and', 'the', UNK, UNK)]
  assert 'zebra quagga' in unknown_note(prompt)
  assert read_prompt(trained, 'zebra quagga').only_unknown
  assert unknown_note(read_prompt(trained, 'the jury')) is None


def test_a_word_being_typed_lists_the_words_it_begins(runs):
  """A last word with no space after it that the vocabulary lacks but begins words of: the
  words it begins, by their numpy probability after the prefix before it, fewer than k if
  it begins fewer, no <unk> note; with a space after it, <unk> as any unknown word."""
  trained = runs['nnlm']
  words = trained.vocab.words
  typed = next(w[:2] for w in words if len(w) > 2 and w.isalpha() and w[:2] not in words)
  begun = [i for i, w in enumerate(words) if w.startswith(typed)]
  want = numpy_next_log_probs(trained, trained.vocab.encode(['The', 'jury']).tolist())
  order = sorted(begun, key=lambda i: -want[i])
  best = predict(trained, f'The jury {typed}', k=len(begun) + 3)
  assert [p.token for p in best] == trained.vocab.decode(order)
  np.testing.assert_allclose([p.log_prob for p in best], want[order], atol=2e-5)
  cwd = os.path.dirname(trained.config.workdir)
  workdir = os.path.basename(trained.config.workdir)
  typing, spaced = (program(f'--workdir={workdir}', '--k=1', '--json', text, cwd=cwd)
                    for text in (f'The jury {typed}', f'The jury {typed} '))
  assert typing.returncode == spaced.returncode == 0, typing.stderr + spaced.stderr
  assert typing.stderr == '' and f'{UNK} (not in the vocabulary): {typed}' in spaced.stderr
  assert json.loads(typing.stdout)[0]['predictions'][0]['token'] == words[order[0]]


def test_typos_predict_after_the_prefix_as_nplm_correct_corrects_its_beginning(runs):
  """--typos: the prefix's words before the one being typed are corrected as nplm correct
  corrects the beginning of a sentence (its tests check that search against an exhaustive
  one), and the predictions are numpy's after the corrected words; the text as read and
  the changes are said (a last word with no space after it would be one being typed: the
  next test's). Without --typos, the unknown word's warning names the flag, and a
  channel flag is refused."""
  trained = runs['nnlm']
  begun = Corrector(trained).correct('Teh jury sayd', ended=False)
  assert begun.tokens == ('The', 'jury', 'said'), begun  # Else this test tests nothing.
  want = numpy_next_log_probs(trained, trained.vocab.encode(list(begun.tokens)).tolist())
  order = np.argsort(-want, kind='stable')[:3]
  cwd = os.path.dirname(trained.config.workdir)
  workdir = f'--workdir={os.path.basename(trained.config.workdir)}'
  done = program(workdir, '--k=3', '--typos', '--json', 'Teh jury sayd ', cwd=cwd)
  assert done.returncode == 0 and done.stderr == '', done.stderr
  [entry] = json.loads(done.stdout)
  assert entry['read_as'] == 'The jury said ' and 'warning' not in entry
  assert entry['changes'] == [{'position': 0, 'typed': 'Teh', 'corrected': 'The'},
                              {'position': 2, 'typed': 'sayd', 'corrected': 'said'}]
  assert [p['token'] for p in entry['predictions']] == trained.vocab.decode(order)
  np.testing.assert_allclose([p['log_prob'] for p in entry['predictions']], want[order],
                             atol=2e-5)
  text = program(workdir, '--k=3', '--typos', 'Teh jury sayd ', cwd=cwd)
  assert text.stdout.splitlines()[:2] == ['Teh jury sayd ', '(read as: The jury said )']
  # A word being typed stays as typed: the words it begins, after the corrected words.
  words = trained.vocab.words
  typed = next(w[:2] for w in words if len(w) > 2 and w.isalpha() and w[:2] not in words)
  want = numpy_next_log_probs(trained, trained.vocab.encode(['The', 'jury']).tolist())
  begun = [i for i, w in enumerate(words) if w.startswith(typed)]
  best = predict(trained, f'Teh jury {typed}', k=2, corrector=Corrector(trained))
  assert [p.token for p in best] == trained.vocab.decode(sorted(begun, key=lambda i: -want[i])[:2])
  as_typed = program(workdir, '--k=1', 'Teh jury sayd', cwd=cwd)
  assert as_typed.returncode == 0 and 'Teh sayd (--typos reads a misspelt word' in as_typed.stderr
  refused = program(workdir, '--alpha=0.9', 'Teh jury', cwd=cwd)
  assert refused.returncode == 2 and refused.stderr == (
      'error: --alpha weighs typos, which only --typos reads: add it, or leave them out\n')
  # Typed in capitals: read in the vocabulary's case, the text as read the tokens read.
  begun = Corrector(trained).correct('THE JURY SAYD', ended=False)
  assert begun.tokens[1:] == ('jury', 'said') and begun.tokens[0] in ('The', 'the')
  want = numpy_next_log_probs(trained, trained.vocab.encode(list(begun.tokens)).tolist())
  order = np.argsort(-want, kind='stable')[:3]
  [entry] = json.loads(program(workdir, '--k=3', '--typos', '--json', 'THE JURY SAYD ',
                               cwd=cwd).stdout)
  assert entry['read_as'] == ' '.join(begun.tokens) and 'warning' not in entry
  assert entry['changes'] == [{'position': 2, 'typed': 'SAYD', 'corrected': 'said'}]
  assert [p['token'] for p in entry['predictions']] == trained.vocab.decode(order)
  np.testing.assert_allclose([p['log_prob'] for p in entry['predictions']], want[order],
                             atol=2e-5)
  as_typed = program(workdir, '--k=1', 'THE JURY SAYD', cwd=cwd)
  assert '(--typos reads a misspelt word, and text in capitals, as the words meant)' in (
      as_typed.stderr)


def test_typos_read_a_word_being_typed_as_the_misspelt_beginning_of_words(runs):
  """--typos: a last word that begins no word but may be a misspelt beginning of several
  ('edecti': one edit from 'election's, two from 'decision's and 'executive's) lists the
  brute-force top k of p(w | the prefix before it) · P(typed | w) (tests/test_complete.py's
  channel, summed over every path of slips), each with both figures, the model's from numpy;
  the text report adds the channel's column. As typed it is <unk>, and so is a last word no
  prefix is within reach of."""
  trained, typed = runs['nnlm'], 'edecti'
  channel = prefix_channel(trained, typed)
  assert len(channel) >= 3 and not any(w.startswith(typed) for w in trained.vocab.words)
  want = numpy_next_log_probs(trained, trained.vocab.encode(['The', 'jury']).tolist())
  ranked = sorted(channel, key=lambda w: -(want[trained.vocab.id_of(w)] + channel[w]))
  # Else the channel reorders nothing and this test could not tell a sum from the model's.
  assert ranked != sorted(channel, key=lambda w: -want[trained.vocab.id_of(w)])
  cwd = os.path.dirname(trained.config.workdir)
  workdir = f'--workdir={os.path.basename(trained.config.workdir)}'
  done = program(workdir, '--k=3', '--typos', '--json', f'The jury {typed}', cwd=cwd)
  assert done.returncode == 0 and done.stderr == '', done.stderr
  [entry] = json.loads(done.stdout)
  assert [p['token'] for p in entry['predictions']] == ranked[:3]
  assert 'warning' not in entry and 'read_as' not in entry
  np.testing.assert_allclose([p['log_prob'] for p in entry['predictions']],
                             [want[trained.vocab.id_of(w)] for w in ranked[:3]], atol=2e-5)
  np.testing.assert_allclose([p['channel_log_prob'] for p in entry['predictions']],
                             [channel[w] for w in ranked[:3]], rtol=1e-9)
  text = program(workdir, '--k=3', '--typos', f'The jury {typed}', cwd=cwd).stdout
  rows = [line.split() for line in text.splitlines()[1:]]
  assert [row[0] for row in rows] == ranked[:3]
  assert [row[3:7] for row in rows] == [['ln', 'P(typed', '|', 'word)']] * 3
  np.testing.assert_allclose([float(row[7]) for row in rows],
                             [channel[w] for w in ranked[:3]], atol=1e-4)
  for flags, last in (([], typed), (['--typos'], 'xqzvk')):
    as_unk = program(workdir, '--k=1', '--json', *flags, f'The jury {last}', cwd=cwd)
    [entry] = json.loads(as_unk.stdout)
    assert f'{UNK} (not in the vocabulary): {last}' in as_unk.stderr, as_unk.stderr
    assert entry['predictions'][0]['channel_log_prob'] == 0


# --- the program -------------------------------------------------------------------------

def program(*args: str, cwd, stdin: str | None = None) -> subprocess.CompletedProcess:
  return cli.run('predict', *args, cwd=cwd, stdin=stdin or '')


def test_the_program_prints_the_top_k_per_prefix_from_a_relative_workdir(runs):
  trained = runs['lstm']
  workdir = os.path.relpath(trained.config.workdir, os.path.dirname(trained.config.workdir))
  cwd = os.path.dirname(trained.config.workdir)
  text = program(f'--workdir={workdir}', '--k=4', 'The jury said zebra', '', cwd=cwd)
  assert text.returncode == 0, text.stderr
  assert 'zebra' in text.stderr and UNK in text.stderr
  blocks = text.stdout.rstrip('\n').split('\n\n')
  assert [b.splitlines()[0] for b in blocks] == ['The jury said zebra', '(the start of a text)']
  for block, prefix in zip(blocks, ['The jury said zebra', '']):
    want = numpy_next_log_probs(trained, trained.vocab.encode(prefix.split()).tolist())
    # <unk> shows as the mass of every unknown word: its label has spaces.
    rows = [line.replace(f'{UNK} (every unknown word)', UNK).split()
            for line in block.splitlines()[1:]]
    order = sorted(range(trained.vocab.size), key=lambda i: -want[i])[:4]
    assert [row[0] for row in rows] == trained.vocab.decode(order)
    np.testing.assert_allclose([float(row[1]) for row in rows], np.exp(want[order]), atol=1e-5)
    np.testing.assert_allclose([float(row[2]) for row in rows], want[order], atol=1e-4)
  piped = program(f'--workdir={workdir}', '--k=3', '--json', cwd=cwd,
                  stdin='The jury said zebra\nof the\n')
  assert piped.returncode == 0, piped.stderr
  document = json.loads(piped.stdout)
  assert [entry['prefix'] for entry in document] == ['The jury said zebra', 'of the']
  for entry in document:
    want = numpy_next_log_probs(trained, trained.vocab.encode(entry['prefix'].split()).tolist())
    order = sorted(range(trained.vocab.size), key=lambda i: -want[i])[:3]
    assert [p['token'] for p in entry['predictions']] == trained.vocab.decode(order)
    np.testing.assert_allclose([p['log_prob'] for p in entry['predictions']], want[order],
                               atol=2e-5)


@pytest.mark.parametrize('args,phrase', [(('--k=0', 'the'), '--k must be at least 1'),
                                         ((), 'give one or more prefixes'),
                                         (('--workdir=nowhere', 'the'), 'no such directory')])
def test_the_program_refuses_bad_input_in_one_line(runs, tmp_path, args, phrase):
  workdir = ('--workdir=' + os.path.relpath(runs['nnlm'].config.workdir, tmp_path),)
  done = program(*(args if args and args[0].startswith('--workdir') else workdir + args),
                 cwd=tmp_path)
  assert done.returncode == 2, done.stderr
  assert done.stderr.startswith('error: ') and phrase in done.stderr, done.stderr
  assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_binary_stdin_is_refused_in_one_line(runs, tmp_path):
  """Prefixes are read as score reads sentences: bytes that are not text are one line."""
  workdir = os.path.relpath(runs['nnlm'].config.workdir, tmp_path)
  done = subprocess.run([sys.executable, '-m', 'nplm.cli', 'predict', f'--workdir={workdir}'],
                        cwd=tmp_path, input=b'\x89PNG\r\n\x1a\n\xff\xfe', capture_output=True,
                        timeout=300)
  stderr = done.stderr.decode()
  assert done.returncode == 2, stderr
  assert stderr.startswith('error: stdin is not UTF-8 text') and 'prefixes' in stderr, stderr
  assert len(stderr.strip().splitlines()) == 1, stderr
