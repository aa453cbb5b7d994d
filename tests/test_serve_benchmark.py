"""experiments.benchmarks.serve: nplm serve under load, its rows and its keystrokes typed as
a person types them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.benchmarks import serve


@pytest.mark.slow
def test_the_benchmark_reports_rates_and_latencies_from_its_requests(quick_runs, tiny_data_dir,
                                                                    tmp_path):
  config = quick_runs('nnlm').config
  # The keystrokes typed are the tiny Brown's test sentences (tests/readme_substitutions).
  result = subprocess.run([sys.executable, '-m', 'tests.readme_substitutions', '-m',
                           'experiments.benchmarks.serve', f'--workdirs={config.workdir}',
                           '--clients=1,3', '--seconds=0.5', f'--data_dir={tiny_data_dir}',
                           f'--out={tmp_path / "serve"}'],
                          capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).parent.parent)
  assert result.returncode == 0, result.stderr
  report = json.loads((tmp_path / 'serve.json').read_text())
  assert [(r['endpoint'], r['clients']) for r in report['rows']] == [
      ('/score', 1), ('/score', 3), ('/complete', 1), ('/complete', 3),
      ('/complete, typing', 1), ('/complete, typing', 3), ('/complete, keystrokes', 1),
      ('/complete, keystrokes', 3), ('/complete, keystrokes, typos off', 1),
      ('/complete, keystrokes, typos off', 3)]
  for row in report['rows']:
    assert row['requests'] >= 1 and 0 < row['p50_ms'] <= row['p99_ms']
    # No more answered than the clients could have sent one after another.
    assert row['requests_per_second'] <= row['clients'] * 1e3 / row['p50_ms'] * 2 + 1
  sent = sum(r['requests'] for r in report['rows'] if 'keystrokes' in r['endpoint'])
  # The tiny corpus's test split types few keystrokes; the report says when they ran out.
  assert (report['wrapped'] == [config.workdir]) == (sent > report['keystrokes'] > 0)
  text = (tmp_path / 'serve.md').read_text()
  assert '| /complete | 3 |' in text
  assert f'The keystroke rows: {report["keystrokes"]:,} prefixes typed' in text


def test_the_keystrokes_are_each_prefix_as_typed_once():
  typed = serve.keystrokes([['The', 'jury'], ['It', 'was']])
  assert typed == ['T', 'Th', 'The', 'The ', 'The j', 'The ju', 'The jur', 'The jury',
                   'I', 'It', 'It ', 'It w', 'It wa', 'It was']
  sent = serve.Keystrokes(typed)
  assert [sent(turn) for turn in (5, 0, 5)] == ['T', 'Th', 'The'] and not sent.wrapped
  assert [sent(0) for _ in typed][-4:] == ['It was', 'T', 'Th', 'The'] and sent.wrapped
  assert serve.typed_sentences(['a', '.', 'c', 'd', 'e', '.', '</p>']) == [
      ['c', 'd', 'e', '.']]
