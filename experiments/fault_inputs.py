"""The user-input cases of experiments.fault_injection --mode=cases (after fault_cases.CASES):
relative and moved paths, empty and damaged data, huge requests, signals in each phase,
flagfiles and the command line as a user types it. Each row says what came of the case, so
the table of an old checkout and of a new one can be read side by side."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from experiments import fault_cases  # Read at call time: fault_cases imports this module.
from experiments.fault_harness import Child, nplm, run, summary_of

GIB = 2 ** 30
# A huge request is stopped by the harness past these (an old checkout allocates tens of GB).
WATCH_SECONDS, WATCH_BYTES = 40, 6 * GIB


def _rss_peak(pid: int) -> int:
  try:
    status = Path(f'/proc/{pid}/status').read_text()
  except OSError:
    return 0
  line = next((l for l in status.splitlines() if l.startswith('VmHWM:')), 'VmHWM: 0 kB')
  return int(line.split()[1]) * 1024


def watched(argv, checkout, cwd=None, signal_at=None) -> tuple[dict, str]:
  """Runs argv, killing it past WATCH_SECONDS or WATCH_BYTES of resident memory; with
  `signal_at` = (pattern, sig), sends sig once a stderr line matches (pattern a number: that
  many seconds after the start). Returns the result and
  'peak X GB in Y s' (how it ended, and how long a signal took to end it)."""
  child, peak, stopped, sent = Child(argv, checkout, cwd), 0, '', None
  while child.running():
    peak = max(peak, _rss_peak(child.proc.pid))
    pattern = signal_at and signal_at[0]
    due = (child.elapsed() >= pattern if isinstance(pattern, (int, float))
           else pattern is not None and child.line(pattern) is not None)
    if signal_at and sent is None and due:
      child.send(signal_at[1])
      sent = child.elapsed()
    if peak > WATCH_BYTES or child.elapsed() > WATCH_SECONDS:
      stopped = f'; KILLED by the harness past {WATCH_BYTES // GIB} GB or {WATCH_SECONDS} s'
      child.send(signal.SIGKILL)
    time.sleep(0.05)
  result = child.finish()
  ended = (f'; ended {result["seconds"] - sent:.1f} s after the signal' if sent is not None
           else '; the signal was never sent' if signal_at else '')
  return result, f'peak {peak / GIB:.2f} GB, {result["seconds"]} s{ended}{stopped}'


def _files(directory: Path) -> str:
  if not directory.exists():
    return 'not created'
  names = sorted(p.name for p in directory.iterdir())
  return f'{len(names)} files ({", ".join(names[:6])}{" …" if len(names) > 6 else ""})'


def _first(result: dict, text: str) -> str:
  return next((l.strip() for l in result['stdout'].splitlines() if text in l), f'no {text!r}')


def case_paths(c) -> None:
  """9: a run with relative paths, read by every tool from its directory, from another
  directory and after the workdir moved."""
  user, elsewhere = c.out / 'user', c.out / 'elsewhere'
  shutil.copytree(c.corpus, user / 'data' / 'toy')
  elsewhere.mkdir()
  (user / 'letter.txt').write_text('w1 w2 w3 w4\nw5 w0 w1\n')
  common = [f'--data_dir={c.data}', *(f'--{k}={v}' for k, v in fault_cases.CASE_FLAGS.items())]
  argv = nplm('train', '--dataset=text:data/toy', '--workdir=runs/nnlm', *common)
  result = run(argv, c.checkout, cwd=user)
  trained = summary_of(user / 'runs' / 'nnlm') or {}
  c.row('9 train, relative --workdir and text:DIR', argv, result,
        f'valid ppl {trained.get("valid_ppl")} on {trained.get("tokens", {}).get("valid")}')
  readers = {'evaluate': [], 'score': ['w1 w2 w3'], 'generate': ['--length=5'],
             'neighbours': ['--words=w1,w2', '--k=3'], 'embeddings': ['--out=runs/emb'],
             'mix': [], 'evaluate --text_file': ['--text_file=letter.txt']}
  for name, extra in readers.items():
    argv = nplm(name.split()[0], '--workdir=runs/nnlm', *extra)
    result = run(argv, c.checkout, cwd=user)
    c.row(f'9 {name}, relative --workdir', argv, result, '')
  argv = nplm('evaluate', f'--workdir={user / "runs" / "nnlm"}')
  result = run(argv, c.checkout, cwd=elsewhere)
  c.row('9 evaluate from another directory (absolute --workdir; the run recorded a relative '
        'dataset)', argv, result, f'{_first(result, "valid")} (trained: '
        f'{trained.get("valid_ppl")})')
  moved = elsewhere / 'moved_run'
  shutil.copytree(user / 'runs' / 'nnlm', moved)
  argv = nplm('score', f'--workdir={moved}', 'w1 w2 w3')
  c.row('9 score a workdir copied elsewhere', argv, run(argv, c.checkout, cwd=elsewhere), '')
  (user / 'data' / 'toy' / 'valid.txt').write_text('w1 w2\n' * 40)
  argv = nplm('evaluate', '--workdir=runs/nnlm')
  result = run(argv, c.checkout, cwd=user)
  c.row('9 evaluate after its valid.txt was edited', argv, result, _first(result, 'valid'))


def _text_dir(c, name: str, texts: dict) -> Path:
  directory = c.out / name
  shutil.copytree(c.corpus, directory)
  for split, text in texts.items():
    (directory / f'{split}.txt').write_text(text)
  return directory


def case_data(c) -> None:
  """10: empty and damaged data, unusable data dirs, a signal during preparation."""
  for case, texts in (('empty train.txt', {'train': ''}), ('empty valid.txt', {'valid': ''}),
                      ('valid.txt only blank lines', {'valid': '\n\n \n'})):
    directory = _text_dir(c, case.replace(' ', '_').replace('.', '_'), texts)
    argv = c.train_argv(f'run_{directory.name}', dataset=f'text:{directory}',
                        data_dir=c.out / f'data_{directory.name}')
    result = run(argv, c.checkout)
    c.row(f'10 {case}', argv, result, f'data dir: {_files(c.out / f"data_{directory.name}")}')
  swapped = c.out / 'data_swapped'
  shutil.copytree(c.data, swapped)
  for metadata in swapped.rglob('metadata.json'):
    data = json.loads(metadata.read_text())
    types = data['types']
    types[10], types[11] = types[11], types[10]
    metadata.write_text(json.dumps(data))
  argv = c.train_argv('swapped_types', data_dir=swapped)
  result = run(argv, c.checkout)
  c.row('10 prepared dataset: two type names swapped in metadata.json', argv, result,
        f'summary: {(summary_of(c.out / "swapped_types") or {}).get("status", "none")}')
  (c.out / 'data_file').write_text('a file\n')
  for case, data_dir in (('--data_dir is a file', c.out / 'data_file'),
                         ('--data_dir under a file', c.out / 'data_file' / 'tfds')):
    argv = c.train_argv('data_dir_bad', data_dir=data_dir)
    c.row(f'10 {case}', argv, run(argv, c.checkout), '')
  argv = c.train_argv('tfds_typo', dataset='tfds:tiny_shakespear')
  result = run(argv, c.checkout)
  c.row('10 --dataset=tfds:tiny_shakespear (a typo)', argv, result,
        f'{len(result["stderr"])} stderr lines')
  big = c.out / 'big_sigterm'
  fault_cases.write_corpus(big, {'train': 200_000}, 1)
  argv = c.train_argv('prep_sigterm', dataset=f'text:{big / "train.txt"}',
                      data_dir=c.out / 'data_sigterm')
  result, seen = watched(argv, c.checkout, signal_at=('prepar', signal.SIGTERM))
  c.row('10 SIGTERM during data preparation', argv, result, seen)


HUGE = (('--order=100000', {'order': 100000}),
        ('--feature_size=1000000', {'feature_size': 1000000}),
        ('--batch_size=3000000', {'batch_size': 3000000}),
        ('--hidden_size=100000000', {'hidden_size': 100000000}),
        ('--eval_batch_size=100000000', {'eval_batch_size': 100000000}),
        ('transformer --order=3000', {'model': 'transformer', 'order': 3000, 'num_heads': 2}),
        # Skip-gram reads neither the common --order nor --hidden_size: their defaults.
        ('skipgram --window=100000', {'model': 'skipgram', 'window': 100000, 'order': 5,
                                      'hidden_size': 100, 'head': 'negative_sampling',
                                      'optimizer': 'sgd'}))


def case_huge(c) -> None:
  """11: requests too large for the machine: refused before they are allocated?"""
  for case, values in HUGE:
    argv = c.train_argv(f'huge_{len(c.rows)}', **values)
    result, seen = watched(argv, c.checkout)
    c.row(f'11 {case}', argv, result, seen)
  argv = c.train_argv('huge_sigterm', order=100000)
  result, seen = watched(argv, c.checkout, signal_at=('parameters', signal.SIGTERM))
  c.row('11 --order=100000, SIGTERM at its start-up line', argv, result, seen)


def case_signals(c) -> None:
  """12: SIGTERM and Ctrl-C in each phase of a run and in evaluate."""
  # With --log_every=376 (an epoch's updates) the first step line is epoch 1's last.
  for phase, pattern in (('validation', r'step 376\b'), ('final evaluation',
                                                         'final evaluation')):
    argv = c.train_argv(f'sigterm_{phase[:5]}', eval_batch_size=4, log_every=376)
    result, seen = watched(argv, c.checkout, signal_at=(pattern, signal.SIGTERM))
    c.row(f'12 SIGTERM in {phase} (--eval_batch_size=4)', argv, result, seen)
  argv = nplm('evaluate', f'--workdir={c.out / "reference"}',
              f'--text_file={c.out / "big_sigterm" / "train.txt"}')
  result, seen = watched(argv, c.checkout, signal_at=(2, signal.SIGINT))
  c.row('12 Ctrl-C in evaluate (a 2M-word --text_file), 2 s after the start', argv, result,
        seen)


def case_command_line(c) -> None:
  """13: flagfiles, workdirs and the command line as typed."""
  flagfile = c.out / 'with_workdir.flags'
  flagfile.write_text(f'--epochs=1\n--workdir={c.out / "flagfile_workdir"}\n')
  argv = c.train_argv('typed_workdir') + [f'--flagfile={flagfile}']
  result = run(argv, c.checkout)
  c.row('13 --workdir typed, then a --flagfile that sets --workdir', argv, result, f'typed workdir: {_files(c.out / "typed_workdir")}; '
        f"flagfile's: {_files(c.out / 'flagfile_workdir')}")
  (c.out / 'binary.flags').write_bytes(bytes(range(256)))
  for case, value in (('missing', c.out / 'no_such.flags'), ('binary', c.out / 'binary.flags'),
                      ('by recipe name', 'fast')):
    argv = c.train_argv(f'flagfile_{case[:3]}', max_steps=1) + [f'--flagfile={value}']
    c.row(f'13 --flagfile {case}', argv, run(argv, c.checkout), '')
  pipes = [subprocess.run(['bash', '-c', f'{sys.executable} -m nplm.cli export --help | head -1'],
                          cwd=c.checkout, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=c.checkout)) for _ in range(3)]
  c.row('13 nplm export --help | head -1 (3 times)', 'nplm export --help | head -1',
        {'rc': pipes[-1].returncode, 'stdout': pipes[-1].stdout,
         'stderr': [l for p in pipes for l in p.stderr.splitlines()]},
        f'{sum("Traceback" in p.stderr for p in pipes)} of 3 with a traceback')
  argv = nplm('--version')
  result = run(argv, c.checkout)
  c.row('13 nplm --version', argv, result, result['stdout'].strip()[:40])
  loop = c.out / 'loop'
  loop.symlink_to(loop)
  argv = c.train_argv('loop', workdir=loop)
  c.row('13 --workdir a symlink loop', argv, run(argv, c.checkout), '')
  home = c.out / 'home'
  home.mkdir()
  argv = c.train_argv('home', workdir=home)
  result = run(argv, c.checkout, env={'HOME': str(home)})
  c.row('13 --workdir=$HOME (the home directory itself)', argv, result,
        f'home: {_files(home)}')
  edited = c.out / 'edited_run_json'
  shutil.copytree(c.out / 'reference', edited)
  run_json = json.loads((edited / 'run.json').read_text())
  run_json['config']['hidden_size'] += 1
  (edited / 'run.json').write_text(json.dumps(run_json))
  argv, result = c.score(edited.name)
  c.row('13 score: run.json edited (hidden_size + 1)', argv, result, '')
  (c.out / 'empty.txt').write_text('')
  argv = nplm('evaluate', f'--workdir={c.out / "reference"}', f'--text_file={c.out / "empty.txt"}')
  c.row('13 evaluate --text_file empty', argv, run(argv, c.checkout), '')
  argv = nplm('score', f'--workdir={c.out / "reference"}', 'w1')
  result = run(argv, c.checkout)
  c.row('13 score one word', argv, result, result['stdout'].strip()[-60:])
  argv = c.train_argv('diverged', optimizer='sgd', learning_rate=1e9)
  result = run(argv, c.checkout)
  count = sum('diverged' in l for l in result['stderr'])
  c.row('13 a diverged run: its message', argv, result, f'"diverged" on {count} lines')


CASES = (case_paths, case_data, case_huge, case_signals, case_command_line)
