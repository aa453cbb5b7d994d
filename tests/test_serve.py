"""`nplm serve` as a client meets it: a server started as a user starts it (another directory,
a relative --workdir, port 0), real HTTP requests, every endpoint against the command that
answers the same question, every refusal one line of JSON, 16 clients at once, a client that
never finishes its body, and SIGTERM in the middle of a request."""

import concurrent.futures
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from nplm.use.misspelling_lists import FORMS
from tests import cli
from tests.conftest import write_text_corpus

STARTUP_SECONDS = 120
SERVING_PAGE = Path(__file__).parent.parent / 'docs' / 'serving.md'


class Server:
  """`nplm serve --workdir=WORKDIR --port=0` run from `cwd`; its URL from its first line."""

  def __init__(self, cwd: Path, workdir: str, *flags: str):
    self.process = cli.start('serve', f'--workdir={workdir}', '--port=0', *flags, cwd=cwd)
    lines = []
    reader = threading.Thread(target=lambda: lines.append(self.process.stdout.readline()))
    reader.start()
    reader.join(STARTUP_SECONDS)
    assert lines and lines[0].startswith('serving '), (lines, self.process.poll())
    self.url = lines[0].split(' at ')[1].split(' ')[0]
    self.first_line = lines[0]

  def ask(self, path: str, body=None, raw: bytes | None = None, timeout: float = 60):
    """(status, JSON answer) of GET path (no body) or POST path with `body` as JSON."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(self.url + path.lstrip('/'), data=data)
    try:
      with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
      return refused.code, json.loads(refused.read())

  def stop(self) -> tuple[int, str]:
    if self.process.poll() is None:
      self.process.send_signal(signal.SIGTERM)
    _, err = self.process.communicate(timeout=60)
    return self.process.returncode, err


@pytest.fixture(scope='module')
def served(quick_runs, tmp_path_factory):
  """The quick NNLM run, copied beside a user's directory and served from it."""
  model = quick_runs('nnlm')
  home = tmp_path_factory.mktemp('user')
  shutil.copytree(model.config.workdir, home / 'runs' / 'nnlm')
  server = Server(home, 'runs/nnlm')
  yield server, home
  status, err = server.stop()
  assert status == 0, err


def command_json(home: Path, *args: str):
  """The command's --json output, run as a user types it in the same directory."""
  result = cli.run(*args, cwd=home)
  assert result.returncode == 0, result.stderr
  return result.stdout


def test_it_says_where_it_listens_and_what_it_serves(served, quick_runs):
  server, _ = served
  assert server.first_line.startswith('serving nnlm order ') and '127.0.0.1' in server.url
  assert server.ask('/health') == (200, {'status': 'ok'})
  status, info = server.ask('/info')
  assert status == 200 and info['workdir'] == 'runs/nnlm' and info['vocab_size'] > 10
  model = quick_runs('nnlm')
  assert info['context_length'] == model.context_length and info['model'] == model.name
  assert {'valid', 'test'} <= set(info['perplexities'])


@pytest.mark.slow
def test_every_endpoint_answers_as_its_command_does(served):
  server, home = served
  texts = ['the jury said it .', 'it said the jury .', 'the zyzzyva said']
  workdir = '--workdir=runs/nnlm'
  want = [json.loads(line) for line in command_json(
      home, 'score', workdir, '--json', '--details', *texts).splitlines()]
  assert server.ask('/score', {'texts': texts, 'tokens': True}) == (200, {'scores': want})
  want = [json.loads(line) for line in command_json(home, 'rank', workdir, '--json',
                                                    *texts).splitlines()]
  assert server.ask('/rank', {'texts': texts}) == (200, {'ranked': want})
  [want] = json.loads(command_json(home, 'predict', workdir, '--json', '--k=4', 'the jury'))
  assert server.ask('/predict', {'prefix': 'the jury', 'k': 4}) == (200, want)
  want = json.loads(command_json(home, 'complete', workdir, '--json', '--k=3',
                                 '--max_words=2', 'the jury'))
  assert server.ask('/complete', {'prefix': 'the jury', 'k': 3, 'max_words': 2}) == (200, want)
  want = command_json(home, 'generate', workdir, '--prompt=the jury', '--length=12',
                      '--seed=5', '--temperature=0.7')
  status, got = server.ask('/generate', {'prompt': 'the jury', 'length': 12, 'seed': 5,
                                         'temperature': 0.7})
  assert status == 200 and got == {'prompt': 'the jury', 'samples': [want[:-1]]}
  # An unknown word: the commands' warning comes with the answer.
  status, got = server.ask('/predict', {'prefix': 'the zyzzyva', 'k': 1})
  assert status == 200 and 'zyzzyva' in got['warning']
  # A word being typed, as the page sends it: completed, no warning, as the command does.
  want = json.loads(command_json(home, 'complete', workdir, '--json', '--k=3',
                                 '--max_words=2', 'the ju'))
  assert server.ask('/complete', {'prefix': 'the ju', 'k': 3, 'max_words': 2}) == (200, want)
  assert 'warning' not in want and len(want['completions']) == 3
  assert all(c['tokens'][0].startswith('ju') and c['text'].startswith(f'the {c["tokens"][0]}')
             for c in want['completions'])
  # A misspelt one ('wth': no word begins it), as the command reads it, with typos or not.
  for typos, flags in ((True, []), (False, ['--notypos'])):
    want = json.loads(command_json(home, 'complete', workdir, '--json', '--k=3',
                                   '--max_words=2', *flags, 'the jury wth'))
    status, got = server.ask('/complete', {'prefix': 'the jury wth', 'k': 3, 'max_words': 2,
                                           'typos': typos})
    warning = got.pop('warning', '')  # The command's is on stderr.
    assert status == 200 and got == want and len(want['completions']) == 3
    assert ('wth' in warning) != typos and all(
        (c['tokens'][0] in ('the', 'that', 'which', 'with')) == typos for c in got['completions'])
  typed = ['teh jury said it .', 'The jury sayd, "it was fine".', 'the jury said it .']
  for settings, flags in (({}, []), ({'alpha': 0.9, 'max_changes': 1, 'second_edit': 0.5},
                                     ['--alpha=0.9', '--max_changes=1', '--second_edit=0.5'])):
    want = [json.loads(line) for line in command_json(
        home, 'correct', workdir, '--json', *flags, *typed).splitlines()]
    assert server.ask('/correct', {'texts': typed, **settings}) == (200, {'corrections': want})
  assert [c['typed'] for c in want[0]['changes']] == ['teh']
  # Typos read in a prefix and a prompt (default corrector's), as the commands read them.
  [want] = json.loads(command_json(home, 'predict', workdir, '--json', '--k=3', '--typos',
                                   'teh jury sayd that'))
  assert want['read_as'] == 'the jury said that'
  assert server.ask('/predict', {'prefix': 'teh jury sayd that', 'k': 3, 'typos': True}) == (
      200, want)
  want = command_json(home, 'generate', workdir, '--prompt=teh jury', '--typos', '--length=6',
                      '--temperature=0')
  status, got = server.ask('/generate', {'prompt': 'teh jury', 'length': 6, 'temperature': 0,
                                         'typos': True})
  assert status == 200 and got['samples'] == [want[:-1]] and want.startswith('the jury ')
  assert got['changes'] == [{'position': 0, 'typed': 'teh', 'corrected': 'the'}]


def serving_page_curls() -> list[str]:
  """docs/serving.md's curl lines (its ```sh blocks)."""
  blocks = re.findall(r'^```sh\n(.*?)^```', SERVING_PAGE.read_text(), re.S | re.M)
  return [line.strip() for block in blocks for line in block.splitlines()
          if line.strip().startswith('curl ')]


def test_the_serving_pages_curl_lines_answer_as_it_says(served):
  server, home = served
  if not shutil.which('curl'):
    pytest.fail('no curl on PATH: docs/serving.md\'s examples use it (apt-get install curl)')
  lines = serving_page_curls()
  assert len(lines) >= 8
  for line in lines:
    result = subprocess.run(line.replace('localhost:8080', server.url.split('//')[1].rstrip('/')),
                            shell=True, cwd=home, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (line, result.stderr)
    answer = json.loads(result.stdout)
    if '"k": 1000' in line:  # The page's refusal, word for word.
      assert answer == {'error': '"k" is 1,000; the limit is 100 (nplm serve --max_k)'}
      documented = '"\\"k\\" is 1,000; the limit is 100 (nplm serve --max_k)"'
      assert documented in SERVING_PAGE.read_text()
    else:
      assert 'error' not in answer, (line, answer)


@pytest.mark.parametrize('path,body,status,says', [
    ('/predict', b'{"prefix": "a",', 400, 'the body is not JSON'),
    ('/predict', b'[1, 2]', 400, 'a JSON object of fields, not a list'),
    ('/predict', b'{"prefx": "the"}', 400,
     'unknown field "prefx": this endpoint reads prefix, k, typos'),
    ('/predict', b'{"prefix": 3}', 400, '"prefix" must be a string, not a number'),
    ('/predict', b'{"k": 0}', 400, '"k" must be at least 1, not 0'),
    ('/predict', b'{"k": 101}', 400, '"k" is 101; the limit is 100 (nplm serve --max_k)'),
    ('/predict', b'{"k": 2.5}', 400, '"k" must be an integer, not a number'),
    ('/score', b'{}', 400, '"texts" is missing'),
    ('/score', b'{"texts": "one"}', 400, '"texts" must be a non-empty list of strings'),
    ('/score', b'{"texts": ["  "]}', 400, '"texts[0]" is empty: give the text to read'),
    ('/score', json.dumps({'texts': ['a'] * 65}).encode(), 413,
     '"texts" holds 65 texts; the limit is 64 a request (nplm serve --max_texts)'),
    ('/score', json.dumps({'texts': ['a ' * 1001]}).encode(), 413,
     '"texts[0]" holds 2,002 characters; the limit is 2,000 (nplm serve --max_text_chars)'),
    ('/score', b'{"texts": ["' + b'a' * 70_000 + b'"]}', 413,
     'the body is larger than 65,536 bytes, the limit (nplm serve --max_body_bytes)'),
    ('/rank', b'{"texts": ["only one"]}', 400, '"texts" holds 1 text; give 2 or more'),
    ('/complete', b'{"max_words": 51}', 400, '"max_words" is 51; the limit is 50'),
    ('/generate', b'{"temperature": -1}', 400, '"temperature" must be at least 0 (0: greedy)'),
    ('/generate', b'{"top_p": 0}', 400, '"top_p" must be above 0 and at most 1'),
    ('/generate', b'{"samples": 9}', 400, 'the limit is 8 (nplm serve --max_samples)'),
    ('/generate', b'{"no_unk": "yes"}', 400, '"no_unk" must be true or false, not a string'),
    ('/correct', b'{"texts": ["teh jury"], "alpha": 1}', 400,
     '"alpha" must be above 0 and below 1 (P(a word is typed as meant)), not 1'),
    ('/correct', b'{"texts": ["teh jury"], "second_edit": 1}', 400,
     '"second_edit" must be at least 0 and below 1 (P(a misspelt word has a second edit)), '
     'not 1'),
    ('/correct', b'{"texts": ["teh jury"], "max_changes": 5}', 400,
     '"max_changes" is 5; the limit is 4 (nplm serve --max_corrected_words)'),
    ('/translate', b'{}', 404, 'no POST /translate: POST /score, /rank, /predict'),
    ('/score', None, 405, '/score takes POST, not GET'),
])
def test_a_refusal_is_one_line_of_json_naming_the_mistake(served, path, body, status, says):
  server, _ = served
  got_status, answer = server.ask(path, raw=body)
  assert (got_status, list(answer)) == (status, ['error']), answer
  assert says in answer['error'] and '\n' not in answer['error']


def test_sixteen_clients_at_once_get_their_own_answers(served):
  server, _ = served
  prefixes = [f'the {word}' for word in ('jury', 'city', 'man', 'court')] * 4
  alone = {p: server.ask('/predict', {'prefix': p, 'k': 5}) for p in set(prefixes)}
  with concurrent.futures.ThreadPoolExecutor(16) as clients:
    together = list(clients.map(lambda p: server.ask('/predict', {'prefix': p, 'k': 5}),
                                prefixes))
  assert together == [alone[p] for p in prefixes]
  assert len({json.dumps(a) for a in alone.values()}) == 4


def test_a_slow_client_holds_no_one_up(served):
  """A client that sends half its body and waits: the others are answered meanwhile."""
  server, _ = served
  host, port = server.url.split('//')[1].rstrip('/').split(':')
  with socket.create_connection((host, int(port))) as slow:
    slow.sendall(b'POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{"pre')
    started = time.monotonic()
    assert server.ask('/predict', {'prefix': 'the', 'k': 1}, timeout=30)[0] == 200
    assert server.ask('/health', timeout=30)[0] == 200
    assert time.monotonic() - started < 30


@pytest.mark.slow
def test_too_many_waiting_are_refused_and_sigterm_finishes_those_in_flight(quick_runs,
                                                                          tmp_path):
  """--max_pending=2 and 6 clients at once: 503 for those beyond, naming the limit; then
  SIGTERM amid the others: they are answered whole and the server exits 0."""
  shutil.copytree(quick_runs('nnlm').config.workdir, tmp_path / 'run')
  server = Server(tmp_path, 'run', '--max_pending=2')
  assert server.ask('/generate', {'length': 5})[0] == 200  # Compiled before the rush.
  with concurrent.futures.ThreadPoolExecutor(6) as clients:
    asked = [clients.submit(server.ask, '/generate', {'length': 40, 'samples': 8, 'seed': k})
             for k in range(6)]
    time.sleep(0.5)
    stopped = time.monotonic()
    status, err = server.stop()
    answers = [future.result() for future in asked]
  assert status == 0, err
  assert time.monotonic() - stopped < 30 and 'finishing the requests in flight' in err
  refused = [a for code, a in answers if code == 503]
  answered = [a for code, a in answers if code == 200]
  assert len(refused) + len(answered) == 6 and len(refused) >= 3 and answered, answers
  assert all(len(a['samples']) == 8 for a in answered)
  assert all('the limit (nplm serve --max_pending): retry later' in a['error'] for a in refused)


@pytest.mark.slow
def test_any_family_is_served_a_recurrent_model_and_an_ngram_run(quick_runs, tmp_path):
  """The LSTM and a KN3 fitted by nplm ngram (text:, sentences ending in <eos>): each
  predicts, scores and corrects as its commands do; a character model refuses /correct."""
  text = write_text_corpus(tmp_path / 'text')
  fit = cli.run('ngram', f'--dataset=text:{text}', f'--data_dir={tmp_path / "tfds"}',
                '--out=kn3', '--order=3', cwd=tmp_path, timeout=600)
  assert fit.returncode == 0, fit.stderr
  for workdir, name in [(quick_runs('lstm').config.workdir, 'lstm'), ('kn3', 'KN3')]:
    server = Server(tmp_path, workdir)
    try:
      status, info = server.ask('/info')
      assert status == 200 and info['model'].startswith(name) and info['perplexities']['test'] > 1
      want = json.loads(command_json(tmp_path, 'predict', f'--workdir={workdir}', '--json',
                                     '--k=3', 'the'))[0]
      assert server.ask('/predict', {'prefix': 'the', 'k': 3}) == (200, want)
      [want] = [json.loads(line) for line in command_json(
          tmp_path, 'score', f'--workdir={workdir}', '--json', 'the end .').splitlines()]
      assert server.ask('/score', {'texts': ['the end .']}) == (200, {'scores': [want]})
      [want] = [json.loads(line) for line in command_json(
          tmp_path, 'correct', f'--workdir={workdir}', '--json', 'teh end .').splitlines()]
      assert server.ask('/correct', {'texts': ['teh end .']}) == (200, {'corrections': [want]})
    finally:
      assert server.stop()[0] == 0
  server = Server(tmp_path, quick_runs('chars').config.workdir)
  try:
    status, answer = server.ask('/correct', {'texts': ['teh end .']})
    assert (status, list(answer)) == (400, ['error'])
    assert 'spelling correction reads words' in answer['error']
    assert server.ask('/health') == (200, {'status': 'ok'})  # The refusal left it serving.
  finally:
    assert server.stop()[0] == 0


@pytest.mark.slow
def test_correct_learns_its_channel_from_the_misspellings_it_is_given(quick_runs, tmp_path):
  """--misspellings=FILE: /correct answers as nplm correct --misspellings=FILE, at the
  default settings and others; a character model with it is refused at start."""
  (tmp_path / 'pairs.txt').write_text('teh the\nsayd said\nrecieve->receive\n')
  workdir = quick_runs('nnlm').config.workdir
  server = Server(tmp_path, workdir, '--misspellings=pairs.txt')
  try:
    typed = ['teh jury sayd it .', 'the jury said it .']
    for settings, flags in (({}, []), ({'alpha': 0.9, 'second_edit': 0.5},
                                       ['--alpha=0.9', '--second_edit=0.5'])):
      want = [json.loads(line) for line in command_json(
          tmp_path, 'correct', f'--workdir={workdir}', '--misspellings=pairs.txt', '--json',
          *flags, *typed).splitlines()]
      assert server.ask('/correct', {'texts': typed, **settings}) == (200,
                                                                      {'corrections': want})
    uniform = json.loads(command_json(tmp_path, 'correct', f'--workdir={workdir}', '--json',
                                      typed[0]))
    assert uniform['log_prob'] != want[0]['log_prob']  # The channel is not the uniform one.
  finally:
    assert server.stop()[0] == 0
  result = cli.run('serve', f'--workdir={quick_runs("chars").config.workdir}', '--port=0',
                   '--misspellings=pairs.txt', cwd=tmp_path)
  assert result.returncode == 2 and 'spelling correction reads words' in result.stderr
  assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_word2vec_run_or_a_missing_workdir_is_refused_at_start(quick_runs, tmp_path):
  for workdir, says in [(quick_runs('word2vec').config.workdir, 'is a word2vec model'),
                        (str(tmp_path / 'nothing'), 'nothing')]:
    result = cli.run('serve', f'--workdir={workdir}', '--port=0')
    assert result.returncode == 2 and result.stderr.startswith('error: ')
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_port_in_use_is_one_line(quick_runs, tmp_path):
  with socket.socket() as taken:
    taken.bind(('127.0.0.1', 0))
    taken.listen()
    port = taken.getsockname()[1]
    result = subprocess.run([sys.executable, '-m', 'nplm.cli', 'serve',
                             f'--workdir={quick_runs("nnlm").config.workdir}', f'--port={port}'],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
  assert result.returncode == 2 and result.stderr.startswith('error: cannot listen on ')
  assert len(result.stderr.strip().splitlines()) == 1


def chromium_driver():
  """Debian's chromium, headless, driven by Selenium through Debian's chromedriver; the test
  fails (never skips) where they are missing: .ci/run installs them."""
  from selenium import webdriver  # pylint: disable=import-outside-toplevel
  from selenium.webdriver.chrome.service import Service as Chromedriver  # pylint: disable=import-outside-toplevel
  browser, driver = shutil.which('chromium'), shutil.which('chromedriver')
  if not (browser and driver):
    pytest.fail('no chromium or chromedriver on PATH: apt-get install chromium '
                'chromium-driver (.ci/run does)')
  options = webdriver.ChromeOptions()
  options.binary_location = browser
  for argument in ('--headless=new', '--no-sandbox', '--disable-dev-shm-usage',
                   '--window-size=1000,1400'):
    options.add_argument(argument)
  return webdriver.Chrome(service=Chromedriver(driver), options=options)


@pytest.mark.slow
def test_the_page_completes_as_you_type_ranks_and_charts_in_a_browser(served):
  from selenium.webdriver.common.by import By  # pylint: disable=import-outside-toplevel
  from selenium.webdriver.support.ui import WebDriverWait  # pylint: disable=import-outside-toplevel
  server, _ = served
  browser = chromium_driver()
  try:
    wait = WebDriverWait(browser, 60)
    browser.get(server.url)
    wait.until(lambda b: 'nnlm order' in b.find_element(By.ID, 'run').text)
    assert 'runs/nnlm' in browser.find_element(By.ID, 'run').text

    def listed(list_id):
      """Each item's text, without the probability or ln p beside it."""
      return browser.execute_script(
          f'return [...document.querySelectorAll("#{list_id} li")]'
          '.map((li) => li.firstChild.textContent)')

    # Typed a key at a time: the list ends as the server's completions of the whole prefix.
    _, want = server.ask('/complete', {'prefix': 'the jury', 'k': 8, 'max_words': 3})
    shown = [c['text'] for c in want['completions']]
    box = browser.find_element(By.ID, 'prefix')
    for key in 'the jury':
      box.send_keys(key)
    wait.until(lambda b: listed('completions') == shown)

    alternatives = ['the jury said it .', 'jury the said it .', 'it said the jury .']
    _, want = server.ask('/rank', {'texts': alternatives})
    area = browser.find_element(By.ID, 'alternatives')
    area.clear()
    area.send_keys('\n'.join(alternatives))
    browser.find_element(By.ID, 'rank').click()
    wait.until(lambda b: len(listed('ranked')) == 3)
    assert listed('ranked') == [r['text'] for r in want['ranked']]

    browser.find_element(By.ID, 'score').click()
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, '.bar-row'))
    sentence = browser.find_element(By.ID, 'sentence').get_attribute('value')
    _, want = server.ask('/score', {'texts': [sentence], 'tokens': True})
    rows = [row.text.split('\n') for row in browser.find_elements(By.CSS_SELECTOR, '.bar-row')]
    assert rows == [[t['word'], f'{t["log_prob"]:.2f}'] for t in want['scores'][0]['tokens']]

    typed = browser.find_element(By.ID, 'typed')
    typed.clear()
    typed.send_keys('teh jury said it .')
    browser.find_element(By.ID, 'correct').click()
    _, want = server.ask('/correct', {'texts': ['teh jury said it .']})
    [correction] = want['corrections']
    assert correction['changes'], correction  # The quick model corrects "teh".
    wait.until(lambda b: listed('changes') == [f'{c["typed"]} → {c["corrected"]}'
                                               for c in correction['changes']])
    shown = browser.execute_script('const p = document.getElementById("corrected"); return '
                                   '[p.firstChild.textContent, p.lastChild.textContent]')
    gain = correction['log_prob'] - correction['typed_log_prob']
    assert shown == [correction['corrected'], f'ln P(w) P(typed | w) +{gain:.2f}']
    assert not browser.find_element(By.ID, 'correct-error').text
    assert not browser.find_element(By.ID, 'complete-error').text
  finally:
    browser.quit()


@pytest.mark.parametrize('flag,says', [
    ('--max_k=0', '--max_k must be at least 1, not 0'),
    ('--port=70000', '--port must be from 0 (any free port) to 65535, not 70000'),
    ('--misspellings=none.txt', 'cannot read --misspellings=none.txt (No such file or '
     f'directory): give a text file of {FORMS}')])
def test_a_bad_flag_is_one_line_before_the_model_is_read(flag, says, tmp_path):
  result = cli.run('serve', f'--workdir={tmp_path / "never_read"}', flag)
  assert (result.returncode, result.stderr) == (2, f'error: {says}\n')
