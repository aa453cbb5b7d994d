"""experiments/kenlm_check.py without KenLM: its reading of `query -v word` output, checked on
that output's format (copied from KenLM's query on a 3-token line)."""

import stat

import pytest

from experiments import kenlm_check

QUERY_OUTPUT = ('the=32 1 -2.1358373\tcat=8928 2 -4.227825\t</p>=28 1 -4.0303597\t'
                '</s>=2 1 -5.223121\t\nTotal: -15.6176 OOV: 0\n'
                'Perplexity including OOVs:\t8102.8\nOOVs:\t0\nTokens:\t4\n')


def fake_query(tmp_path, output):
  script = tmp_path / 'query'
  script.write_text(f"#!/bin/sh\ncat > /dev/null\nprintf '%s' '{output}'\n")
  script.chmod(script.stat().st_mode | stat.S_IEXEC)
  return script


def test_query_scores_every_token_but_the_final_sentence_end(tmp_path):
  line = tmp_path / 'split.one.txt'
  line.write_text('the cat </p>\n')
  scores = kenlm_check.kenlm_log10_probs(fake_query(tmp_path, QUERY_OUTPUT), tmp_path / 'x.arpa',
                                         line)
  assert scores == [-2.1358373, -4.227825, -4.0303597]


def test_unexpected_query_output_is_an_error(tmp_path):
  line = tmp_path / 'split.one.txt'
  line.write_text('the\n')
  with pytest.raises(RuntimeError, match='unexpected output'):
    kenlm_check.kenlm_log10_probs(fake_query(tmp_path, 'nothing'), tmp_path / 'x.arpa', line)


def test_export_with_words_outside_its_vocabulary_is_refused(tmp_path, tiny_corpus):
  tiny_corpus.vocab.save(tmp_path / 'vocab.txt')
  for split in ('train', 'valid', 'test'):
    (tmp_path / f'{split}.txt').write_text('the zebra-that-is-not-there\n')
  with pytest.raises(ValueError, match='outside its vocab.txt'):
    kenlm_check.read_export(tmp_path)
