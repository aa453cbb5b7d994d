"""The GPU check (experiments/benchmarks/gpu.py): its runner on tiny stand-in commands (a run
past its limit stopped with what it started, the next one run; the budget; skips; figures
read, the report written), its plan of GPU.md's rows, and its whole dry run as a user types it."""

import importlib.util
import json
import math
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest

from experiments.benchmarks import dispatch, gpu, gpu_report, gpu_runs
from nplm.run_files.profile import event_table
from tests import cli

MACHINE = {'device_kind': 'Toy Accelerator', 'platform': 'toy', 'device_count': 1,
           'jax': '0', 'jaxlib': '0', 'torch': None, 'torch_error': 'No module named torch',
           'gensim': None, 'gensim_error': 'No module named gensim', 'brown_prepared': True}


def python(code: str) -> list:
  return [sys.executable, '-c', code]


def reads_its_number(rows: Path, run_id: str, seconds: float) -> list:
  return [gpu_report.figure('its number', gpu_report.read(rows / run_id / 'n.json')['n'], '×',
                            '≥ 1×'),
          gpu_report.figure('what it lacked', None, '×', '', 'nothing to compare with')]


def state(pid: int) -> str:
  """A process's state letter (Z: ended, not yet reaped), or '' once it is gone."""
  try:
    return Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
  except FileNotFoundError:
    return ''


def test_a_run_past_its_limit_is_stopped_with_its_children_and_the_next_runs(tmp_path):
  # The stalled run starts a child of its own first: stopping it must stop both.
  stalls = ('import subprocess, sys, time\n'
            'child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])\n'
            'print("started", child.pid, flush=True)\ntime.sleep(60)')
  writes = 'import json, sys; json.dump({"n": 3}, open(sys.argv[1], "w")); print("done")'
  runs = [gpu_runs.Run('s', 1, 'stalls', python(stalls), limit=2),
          gpu_runs.Run('f', 2, 'fails', python('import sys; print("working"); sys.exit("boom: no")'),
                  limit=30),
          gpu_runs.Run('w', 3, 'writes', [*python(writes), str(tmp_path / 'rows' / 'w' / 'n.json')],
                  limit=30, figures=reads_its_number),
          gpu_runs.Run('g', 6, 'needs gensim', python('pass'), limit=30, needs=('gensim',)),
          gpu_runs.Run('b', 8, 'needs Brown', python('pass'), limit=30, needs=('brown',))]
  machine = {**MACHINE, 'brown_prepared': False}
  started = time.monotonic()
  results = gpu_runs.run_all(runs, tmp_path, dict(os.environ), machine, '/nowhere',
                        deadline=time.monotonic() + 120)
  assert time.monotonic() - started < 20  # The stalled run did not hold the check.
  stalled, failed, wrote, no_gensim, no_brown = results
  assert stalled['status'] == 'timeout' and 2 <= stalled['seconds'] < 10
  assert 'limit of 2 s' in stalled['reason'] and stalled['printed'][0].startswith('started')
  assert state(int(stalled['printed'][0].split()[1])) in ('', 'Z')  # Its child was stopped.
  assert failed['status'] == 'failed' and failed['reason'] == 'exit status 1: boom: no'
  assert 'working' in failed['printed']
  assert wrote['status'] == 'ok' and wrote['reason'] == '' and wrote['cpu_seconds'] > 0
  assert [f['value'] for f in wrote['figures']] == [3.0, None]
  assert (tmp_path / 'rows' / 'w' / 'stdout.txt').read_text() == 'done\n'
  assert no_gensim['status'] == 'skipped' and 'gensim is not importable' in no_gensim['reason']
  assert no_brown['status'] == 'skipped' and '--data_dir=/nowhere' in no_brown['reason']
  assert all(r['command'].startswith(sys.executable) for r in results)

  report = {'date': 'today', 'machine': machine, 'dry_run': False, 'data_dir': '/nowhere',
            'environment': {'JAX_PLATFORMS': 'cpu'}, 'budget_s': 120, 'seconds': 9.0,
            'command': 'gpu', 'runs': results}
  page = gpu_report.format_report(report)
  assert page.startswith('# GPU check: Toy Accelerator\n')
  assert '| 1 | stalls | timeout |' in page and '| 6 | needs gensim | skipped |' in page
  assert '| its number | 3.00× | ≥ 1× |  |' in page
  assert '| what it lacked | n/a |  | nothing to compare with |' in page
  assert 'failed: exit status 1: boom: no' in page
  assert 'Every command ran with JAX_PLATFORMS=cpu.' in page


# The check's runner in a child of its own, its second run sending the check a Ctrl-C (as
# the terminal would: the runs are in sessions of their own, which a Ctrl-C does not reach)
# after starting a child of its own; the results as JSON.
_INTERRUPTED_CHECK = """
import json, os, sys, time
from experiments.benchmarks import gpu_runs
stalls = ('import os, signal, subprocess, sys, time\\n'
          'child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])\\n'
          'print("started", child.pid, flush=True)\\n'
          'os.kill(int(sys.argv[1]), signal.SIGINT)\\ntime.sleep(60)')
runs = [gpu_runs.Run('q', 1, 'quick', [sys.executable, '-c', 'pass'], limit=30),
        gpu_runs.Run('s', 2, 'stalls', [sys.executable, '-c', stalls, str(os.getpid())], limit=60),
        gpu_runs.Run('n', 3, 'next', [sys.executable, '-c', 'pass'], limit=30)]
machine = json.loads(sys.argv[2])
started = time.monotonic()
results = gpu_runs.run_all(runs, gpu_runs.Path(sys.argv[1]), dict(os.environ), machine, '',
                      deadline=time.monotonic() + 120)
print(json.dumps({'results': results, 'seconds': time.monotonic() - started}))
"""


def test_a_ctrl_c_stops_the_run_and_its_children_and_keeps_what_ran(tmp_path):
  """The lent GPU's minutes are not lost to a Ctrl-C: the runs before it keep their results,
  the one it stopped is stopped with what it started (not left running on the GPU), the
  rest are skipped, and the report can be written."""
  done = subprocess.run([sys.executable, '-c', _INTERRUPTED_CHECK, str(tmp_path),
                         json.dumps(MACHINE)], cwd=gpu_runs.ROOT, capture_output=True, text=True,
                        timeout=120, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  ran = json.loads(done.stdout.splitlines()[-1])
  quick, stalled, following = ran['results']
  assert ran['seconds'] < 30
  assert quick['status'] == 'ok'
  assert stalled['status'] == 'interrupted' and stalled['reason'] == 'stopped by Ctrl-C'
  started = (tmp_path / 'rows' / 's' / 'stdout.txt').read_text().split()
  assert started[0] == 'started' and state(int(started[1])) in ('', 'Z')
  assert following['status'] == 'skipped'
  assert following['reason'] == 'the check was interrupted (Ctrl-C)'
  page = gpu_report.format_report({'date': 'today', 'machine': MACHINE, 'dry_run': False,
                                   'data_dir': '', 'environment': {}, 'budget_s': 120,
                                   'seconds': 9.0, 'command': 'gpu', 'runs': ran['results']})
  assert '| 2 | stalls | interrupted |' in page and '| 3 | next | skipped |' in page


def test_a_runs_own_environment_is_set_over_the_checks(tmp_path):
  shows = 'import os; print(os.environ["SHOWN"], os.environ["KEPT"])'
  runs = [gpu_runs.Run('e', 6, 'shows', python(shows), limit=30, env={'SHOWN': 'its own'})]
  results = gpu_runs.run_all(runs, tmp_path, {**os.environ, 'SHOWN': 'the check\'s', 'KEPT': 'kept'},
                        MACHINE, '', deadline=time.monotonic() + 60)
  assert results[0]['status'] == 'ok'
  assert (tmp_path / 'rows' / 'e' / 'stdout.txt').read_text() == 'its own kept\n'


def test_the_budget_stops_a_run_and_skips_the_rest(tmp_path, monkeypatch):
  monkeypatch.setattr(gpu_runs, 'MIN_START_S', 0.5)
  runs = [gpu_runs.Run('s', 1, 'stalls', python('import time; time.sleep(60)'), limit=60),
          gpu_runs.Run('q', 2, 'quick', python('pass'), limit=60)]
  results = gpu_runs.run_all(runs, tmp_path, dict(os.environ), MACHINE, '',
                        deadline=time.monotonic() + 1.5)
  assert [r['status'] for r in results] == ['timeout', 'skipped']
  assert results[0]['seconds'] < 5 and results[0]['limit_s'] <= 1.5
  assert 'budget' in results[1]['reason']


@pytest.mark.parametrize('dry_run', [False, True])
def test_the_plan_runs_every_row_of_gpu_md(tmp_path, dry_run):
  settings = gpu.DRY if dry_run else gpu.GPU
  runs = gpu.plan(settings, tmp_path, '/data', dry_run, row8_epochs=1)
  assert sorted({run.row for run in runs}) == list(range(1, 9))
  assert len({run.id for run in runs}) == len(runs)
  assert all(run.id in settings['limits'] for run in runs)
  for run in runs:
    through_fixture = run.argv[1:3] == ['-m', 'tests.readme_substitutions']
    assert through_fixture == (dry_run and 'brown' in run.needs), run.argv
    if 'brown' in run.needs:
      assert '--data_dir=/data' in run.argv
  compiled = [run for run in runs if run.row in (2, 3)]
  assert compiled and all(f'--torch_compile={"aot_eager" if dry_run else "inductor"}' in run.argv
                          for run in compiled)
  if not dry_run:  # The GPU's filling batch, and 16 models together.
    assert '--batch_size=8192' in runs[2].argv and '--models=1,16' in runs[6].argv


def test_rows_run_in_the_order_given():
  runs = gpu.plan(gpu.GPU, Path('/out'), '/data', False, row8_epochs=1)
  assert ([run.id for run in gpu.chosen(runs, ['6', '2', '1'])]
          == ['6a', '6b', '6c', '2a', '2b', '1'])
  assert [run.env for run in runs if run.row == 6] == [{}, {'JAX_PLATFORMS': 'cpu'}, {}]
  assert '--chunk_positions=0' in runs[[run.id for run in runs].index('6a')].argv


@pytest.mark.slow
def test_the_dry_run_runs_every_row_to_a_report(tmp_path):
  """The device call's script, gpu_session.sh, with `--dry_run`, from another directory:
  every row of GPU.md ok, each figure finite (or, for a PyTorch comparison, n/a because
  PyTorch is not installed here); the report and the rows' text files in OUT."""
  out = tmp_path / 'out'
  result = subprocess.run(
      ['bash', str(gpu_runs.ROOT / 'experiments' / 'benchmarks' / 'gpu_session.sh'), '--dry_run'],
      cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
      env={**os.environ, 'PYTHON': sys.executable, 'OUT': str(out),
           'CHECK_DIR': str(tmp_path / 'check'), 'SITE': str(tmp_path / 'site')})
  assert result.returncode == 0, result.stderr[-3000:]
  with tarfile.open(out / 'rows.tgz') as rows:
    names = rows.getnames()
  assert 'rows/1/stdout.txt' in names and 'rows/7/scale.json' in names, names
  assert {'rows/2a/programs/MLP9_bfloat16.hlo.txt',  # The steps as compiled, as profiled.
          'rows/2a/programs/MLP9_bfloat16.profile.txt',
          'rows/1/run/profile/profile.txt'} <= set(names), names  # --profile_steps's table.
  assert any(name.startswith('rows/7/') and name.endswith('/profile/profile.txt')
             for name in names), names
  assert not any('/corpus/' in name or '/tfds/' in name for name in names), names
  report = json.loads((out / 'gpu.json').read_text())
  runs = report['runs']
  assert sorted({run['row'] for run in runs}) == list(range(1, 9))
  torch_missing = importlib.util.find_spec('torch') is None
  for run in runs:
    if run['status'] == 'skipped' and importlib.util.find_spec('gensim') is None:
      assert 'gensim is not importable' in run['reason']  # The one optional program.
      continue
    assert run['status'] == 'ok', (run['name'], run['reason'], run['printed'])
    assert 'python' in run['command'] and run['command'] in result.stdout  # Shown as it started.
    assert run['figures'], run['name']
    for f in run['figures']:
      if f['value'] is None:  # Only a PyTorch comparison, only without PyTorch.
        assert torch_missing and 'PyTorch is not importable' in f['note'], (run['name'], f)
      else:
        assert math.isfinite(f['value']), (run['name'], f)
  assert report['machine']['device_kind'] in (out / 'gpu.md').read_text()
  assert report['dry_run'] and report['environment']['JAX_PLATFORMS'] == 'cpu'


@pytest.mark.parametrize('flags, said', [
    (['--configs=cbow'], 'error: --configs takes cbow_ns, cbow_hs, skipgram_ns, skipgram_hs, '
                         'not cbow'),
    (['--chunks=32,33'], 'error: each of --chunks must be a whole number dividing '
                         '--batch_size=16384, got 32,33'),
    (['--chunks=x'], 'error: each of --chunks must be a whole number dividing '
                     '--batch_size=16384, got x')])
def test_the_word2vec_loop_refuses_what_it_cannot_time_in_one_line(tmp_path, flags, said):
  """Row 6c's program as a user types it, from another directory: a variant it does not know
  or a chunk that does not divide the batch is one line and status 2, before any compile."""
  result = cli.run(*flags, f'--out={tmp_path / "loop"}', cwd=tmp_path,
                   module='experiments.benchmarks.word2vec_loop')
  assert result.returncode == 2, result.stderr[-1500:]
  assert result.stderr.strip().splitlines()[-1] == said
  assert 'Traceback' not in result.stderr and not (tmp_path / 'loop.json').exists()


@pytest.mark.parametrize('flags, said', [
    (['--steps=8', '--steps_per_call=3'],
     'error: each of --steps_per_call must be a whole number dividing --steps=8, got 3'),
    (['--steps_per_call=0,8'],
     'error: each of --steps_per_call must be a whole number dividing --steps=512, got 0,8'),
    (['--tokens=100'], 'error: --tokens=100 must exceed --batch_size=1024: a batch of windows'),
    (['--vocab_size=1'], 'error: --vocab_size must be a whole number of at least 2, got 1'),
    (['--batch_size=0'], 'error: --batch_size must be a whole number of at least 1, got 0'),
    (['--steps=0'], 'error: --steps must be a whole number of at least 1, got 0'),
    (['--repeats=0'], 'error: --repeats must be a whole number of at least 1, got 0')])
def test_the_dispatch_benchmark_refuses_what_it_cannot_time_in_one_line(tmp_path, flags, said):
  """Row 7b's program as a user types it, from another directory: one line and status 2,
  before any compile, nothing written."""
  result = cli.run(*flags, f'--out={tmp_path / "dispatch"}', cwd=tmp_path,
                   module='experiments.benchmarks.dispatch')
  assert result.returncode == 2, result.stderr[-1500:]
  assert result.stderr.strip().splitlines()[-1] == said
  assert 'Traceback' not in result.stderr and not list(tmp_path.iterdir())


@pytest.mark.slow
def test_k_updates_in_one_call_train_as_one_a_call():
  """Row 7b compares like with like: K updates scanned in one call (K = 2, 4) give each
  update's loss as nplm's loop, one call an update, gives it (on this CPU, to the bit)."""
  report = dispatch.measure(vocab_size=50, batch_size=16, steps=8, repeats=1, tokens=400,
                            steps_per_call=[2, 4])
  assert list(report['ways']) == ['one a call', '2 a call', '4 a call']
  for way in report['ways'].values():
    assert way['max_loss_difference'] == 0.0 and np.isfinite(way['last_loss'])
    assert way['median'] > 0 and len(way['runs']) == 1
  assert report['dispatch_seconds'] > 0


def test_a_profile_sums_each_devices_events_by_name_longest_first():
  """A trace of two processes (a GPU's kernels, the host): each event's time summed over
  its calls, per process, a device first, the longest first; a step's share divided out."""
  events = [{'ph': 'M', 'name': 'process_name', 'pid': 1, 'args': {'name': '/host:CPU'}},
            {'ph': 'M', 'name': 'process_name', 'pid': 2, 'args': {'name': '/device:GPU:0'}},
            *({'ph': 'X', 'pid': 2, 'name': 'gemm', 'dur': 30.0} for _ in range(4)),
            {'ph': 'X', 'pid': 2, 'name': 'loop_fusion', 'dur': 40.0},
            {'ph': 'X', 'pid': 1, 'name': 'PjitFunction(update)', 'dur': 7.0},
            {'ph': 'i', 'pid': 2, 'name': 'marker'}]
  lines = event_table(events, steps=4)
  device = lines.index('/device:GPU:0: 160 µs summed')
  assert lines.index('/host:CPU: 7 µs summed') > device
  assert lines[device + 2].split() == ['120', '30.0', '75.0%', '4', 'gemm']
  assert lines[device + 3].split() == ['40', '10.0', '25.0%', '1', 'loop_fusion']


def test_row_2_sets_the_peers_and_the_aligned_output_matmul_beside_xlas(tmp_path):
  """PyTorch's product over XLA's, each as nnlm.json records it, or n/a with the reason the
  comparison was skipped; the bfloat16 product at aligned sizes over it as is."""
  shape = {'shape': 'MLP1', 'jax': {'median': 5.0}, 'jax_over_torch': 1.2,
           'jax_over_torch_compiled': 1.1, 'torch_skipped': None,
           'torch_compiled_skipped': None, 'share_of_matmul': 0.5,
           'output_matmul': {'gflops_per_s': 200.0, 'torch_gflops_per_s': 250.0,
                             'bfloat16': {'gflops_per_s': 50.0, 'aligned_dims': [8, 104, 16],
                                          'aligned_gflops_per_s': 400.0}}}
  skipped = {**shape, 'shape': 'MLP9', 'torch_skipped': 'PyTorch is not importable (x)',
             'output_matmul': {'gflops_per_s': 200.0}}
  (tmp_path / '2a').mkdir()
  (tmp_path / '2a' / 'nnlm.json').write_text(json.dumps({'shapes': [shape, skipped]}))
  found = {f['name']: f for f in gpu_report.nnlm(tmp_path, '2a', 1.0)}
  timed = found["MLP1 PyTorch's output matmul / XLA's"]
  assert timed['value'] == 1.25 and timed['note'] == 'XLA 200, PyTorch 250 GFLOP/s'
  assert gpu_report.format_value(timed) == '1.25×'
  untimed = found["MLP9 PyTorch's output matmul / XLA's"]
  assert untimed['value'] is None and untimed['note'] == 'PyTorch is not importable (x)'
  aligned = found['MLP1 bfloat16 output matmul, D and |V| to multiples of 8 / as is']
  assert aligned['value'] == 8.0 and aligned['note'] == '50 GFLOP/s as is, 400 at [8, 104, 16]'
  assert found['MLP9 bfloat16 output matmul, D and |V| to multiples of 8 / as is'][
      'value'] is None  # A report written before it was timed.


def test_row_2_sets_k_updates_a_call_beside_torch_compile(tmp_path):
  """nplm's step K updates a call over torch.compile's rate, with its gain over one a call;
  n/a with the reason where it or the peer was not timed."""
  grouped = {'median': 12.0, 'updates_per_call': 8, 'over_one_a_call': 1.5}
  shape = {'shape': 'MLP1', 'jax': {'median': 8.0}, 'jax_over_torch': 1.0,
           'jax_over_torch_compiled': 1.0, 'torch_skipped': None,
           'torch_compiled_skipped': None, 'share_of_matmul': 0.5,
           'output_matmul': {'gflops_per_s': 200.0}, 'torch_compiled': {'median': 6.0},
           'grouped': grouped}
  no_peer = {**shape, 'shape': 'MLP9', 'torch_compiled': None,
             'torch_compiled_skipped': 'torch.compile failed'}
  before = {**shape, 'shape': 'MLP5'}
  del before['grouped']
  (tmp_path / '2a').mkdir()
  (tmp_path / '2a' / 'nnlm.json').write_text(json.dumps({'shapes': [shape, no_peer, before]}))
  found = {f['name']: f for f in gpu_report.nnlm(tmp_path, '2a', 1.0)}
  timed = found['MLP1 JAX 8 updates a call / torch.compile']
  assert (timed['value'], timed['goal']) == (2.0, '≥ 1.5×')
  assert timed['note'] == '12 examples/s, 1.50× one a call'
  untimed = found['MLP9 JAX 8 updates a call / torch.compile']
  assert untimed['value'] is None
  assert untimed['note'] == '12 examples/s, 1.50× one a call; torch.compile failed'
  assert found['MLP5 JAX K updates a call / torch.compile']['value'] is None
