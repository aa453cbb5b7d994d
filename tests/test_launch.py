"""launch/: the Colab notebook runs top to bottom on a CPU, launch.local's command lines and
supervision of its processes, and the shell scripts' syntax and usage."""

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbclient
import nbformat
import pytest

from launch import local
from nplm.config import Config
from nplm.trainer import run
from tests.conftest import TINY_SPLIT, write_text_corpus

ROOT = Path(__file__).parent.parent
LAUNCH = ROOT / 'launch'


# --- the Colab notebook -------------------------------------------------------------------

def test_committed_notebook_is_valid_and_has_no_outputs():
  notebook = nbformat.read(LAUNCH / 'colab_tpu.ipynb', as_version=4)
  nbformat.validate(notebook)
  for cell in notebook.cells:
    if cell.cell_type == 'code':
      assert cell.execution_count is None and cell.outputs == [], cell.source[:60]


@pytest.mark.slow
def test_notebook_runs_top_to_bottom_on_the_tiny_corpus(tmp_path, monkeypatch):
  workdir = tmp_path / 'run'
  text_dir = write_text_corpus(tmp_path / 'text')
  smoke = dict(dataset=f'text:{text_dir}', data_dir=str(tmp_path / 'tfds'), unk_max_count=1,
               order=3, feature_size=8, hidden_size=12, batch_size=16, epochs=2, patience=2,
               eval_batch_size=64, log_every=5, workdir=str(workdir))
  monkeypatch.setenv('NPLM_NOTEBOOK_SMOKE', json.dumps(smoke))
  monkeypatch.setenv('JAX_PLATFORMS', 'cpu')
  notebook = nbformat.read(LAUNCH / 'colab_tpu.ipynb', as_version=4)
  # The kernel must be this environment's Python, where the project's requirements are.
  notebook.cells.insert(0, nbformat.v4.new_code_cell('import sys; print(sys.executable)'))
  # Jupyter opened on the notebook starts its kernel in launch/.
  nbclient.NotebookClient(notebook, kernel_name='python3', timeout=120,
                          resources={'metadata': {'path': str(LAUNCH)}}).execute()

  assert _text(notebook.cells[0]).strip() == sys.executable
  summary = json.loads((workdir / 'summary.json').read_text())
  assert summary['status'] == 'epochs_done' and summary['epochs'] == 2
  for split in ('train', 'valid', 'test'):
    assert math.isfinite(summary[f'{split}_ppl']) and summary[f'{split}_ppl'] > 1
  printed = _text(next(c for c in notebook.cells if 'summary = run(' in c.source))
  assert f'|V| = {summary["vocab_size"]}' in printed
  assert f'valid: perplexity {summary["valid_ppl"]:9.2f}' in printed and '<unk> rate' in printed
  assert (workdir / 'learning_curve.png').read_bytes().startswith(b'\x89PNG')


def _text(cell) -> str:
  return ''.join(out.get('text', '') for out in cell.outputs if out.output_type == 'stream')


# --- launch.local -------------------------------------------------------------------------

def run_launcher(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, '-m', 'launch.local', *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize('args, phrase', [
    (['--num_processes=0'], '--num_processes must be at least 1, got 0'),
    (['--devices_per_process=0'], '--devices_per_process must be at least 1, got 0'),
    (['--num_processes=two'], "invalid int value: 'two'"),
    (['--', '--workdir=/tmp/x', '--process_id=1'], '--process_id=1 is set by launch.local'),
    (['--', '--distributed'], '--distributed is set by launch.local'),
])
def test_launcher_refuses_bad_input_in_one_line(args, phrase):
  result = run_launcher(*args)
  assert result.returncode == 2, result.stderr
  assert result.stderr.startswith('error: ') and result.stderr.count('\n') == 1, result.stderr
  assert phrase in result.stderr


def test_each_process_gets_the_flags_the_coordinator_and_its_own_id():
  argvs = local.command_lines(3, ['--flagfile=fast', '--mesh=data:4'],
                              'localhost:1234', python='/venv/bin/python')
  assert argvs == [['/venv/bin/python', '-m', 'experiments.train',
                    '--flagfile=fast', '--mesh=data:4',
                    '--coordinator_address=localhost:1234', '--num_processes=3',
                    f'--process_id={i}'] for i in range(3)]
  env = local.process_environment(4, {'PATH': '/bin', 'JAX_PLATFORMS': 'cuda'})
  assert env == {'PATH': '/bin', 'JAX_PLATFORMS': 'cpu', 'JAX_NUM_CPU_DEVICES': '4'}


def test_free_port_is_one_a_coordinator_can_listen_on():
  port = local.free_port()
  assert 1024 <= port <= 65535  # The OS's pick: no privileged port.
  with socket.socket() as server:
    server.bind(('localhost', port))
    server.listen()
    with socket.create_connection(('localhost', port), timeout=10):
      pass  # A process can reach it.
    # While it is taken, the next pick is another port (bind refuses one in use).
    assert local.free_port() != port


# A stand-in for Python: `-m experiments.train ... --process_id=i`. Process $STUB_FAIL exits
# with 3 once the others have started; they wait, recording the SIGTERM they get in $STUB_DIR.
STUB = """#!/usr/bin/env bash
for arg; do
  case "$arg" in --process_id=*) id="${arg#*=}";; --num_processes=*) n="${arg#*=}";; esac
done
echo "process $id: $*"
if [ "$id" = "${STUB_FAIL:-}" ]; then
  until [ "$(ls "$STUB_DIR" | grep -c '^started_')" = "$((n - 1))" ]; do sleep 0.05; done
  exit 3
fi
trap 'touch "$STUB_DIR/terminated_$id"; kill "$sleeper"; exit 0' TERM
sleep 60 & sleeper=$!
touch "$STUB_DIR/started_$id"
wait "$sleeper"
"""


@pytest.fixture
def stub_python(tmp_path, monkeypatch):
  path = tmp_path / 'python'
  path.write_text(STUB)
  path.chmod(0o755)
  monkeypatch.setenv('STUB_DIR', str(tmp_path))
  return str(path)


def test_one_failure_stops_the_others_and_gives_its_exit_code(stub_python, tmp_path,
                                                               monkeypatch, capfd):
  monkeypatch.setenv('STUB_FAIL', '1')
  assert local.launch(3, 2, ['--workdir=w'], python=stub_python) == 3
  assert sorted(p.name for p in tmp_path.glob('terminated_*')) == ['terminated_0',
                                                                   'terminated_2']
  out, err = capfd.readouterr()
  assert 'process 0: -m experiments.train --workdir=w' in out  # Process 0: the terminal.
  assert '[process 2] process 2: -m experiments.train' in err  # The others: prefixed.
  assert 'error: process 1 exited with code 3; stopping the others' in err


def test_ctrl_c_reaches_every_process_as_sigterm(stub_python, tmp_path):
  """The processes stop as the trainer does on SIGTERM (here: at once, exit code 0)."""
  started = [tmp_path / f'started_{i}' for i in range(2)]

  def press_ctrl_c_once_all_started():
    for _ in range(300):
      if all(path.exists() for path in started):
        os.kill(os.getpid(), signal.SIGINT)  # Caught by launch(), running meanwhile.
        return
      time.sleep(0.1)

  threading.Thread(target=press_ctrl_c_once_all_started, daemon=True).start()
  assert local.launch(2, 1, [], python=stub_python) == 0
  assert sorted(p.name for p in tmp_path.glob('terminated_*')) == ['terminated_0',
                                                                   'terminated_1']


@pytest.mark.parametrize('mesh, head, shape', [
    ('', {'head': 'softmax'}, {'data': 4, 'model': 1}),
    # Output rows split across processes.
    ('data:2,model:2', {'head': 'nce', 'num_samples': 10}, {'data': 2, 'model': 2}),
])
@pytest.mark.slow
def test_two_processes_on_loopback_give_the_metrics_of_one(tiny_corpus, tiny_data_dir,
                                                            tmp_path, mesh, head, shape):
  """2 processes × 2 CPU devices (jax.distributed, gloo collectives) train the same model as
  one process on one device: same steps, same exact perplexities; process 0 alone writes."""
  # 105 evaluation batches of the training split in a row: without parallel.wait_on_cpu_devices, about
  # a hundred computations in flight deadlock jax's CPU collectives.
  flags = dict(order=3, feature_size=8, hidden_size=16, batch_size=16, eval_batch_size=4,
               epochs=2, learning_rate=0.05, log_every=1000, checkpoint_every=20,
               unk_max_count=1, **head, **TINY_SPLIT)
  workdir = tmp_path / 'two'
  args = [f'--{name}={value}' for name, value in flags.items()]
  code = local.launch(2, 2, [*args, f'--mesh={mesh}', f'--data_dir={tiny_data_dir}',
                             f'--workdir={workdir}'],
                      module='tests.tiny_brown', timeout_seconds=120, grace_seconds=1)
  assert code == 0
  two = json.loads((workdir / 'summary.json').read_text())
  one = run(Config(workdir=str(tmp_path / 'one'), **flags), tiny_corpus)
  assert two['devices'] == {'count': 4, 'processes': 2, 'mesh': shape}
  assert two['steps'] == one['steps'] and two['status'] == one['status'] == 'epochs_done'
  for split in ('train', 'valid', 'test'):
    assert math.isclose(two[f'{split}_ppl'], one[f'{split}_ppl'], rel_tol=1e-5)
  records = [json.loads(line) for line in (workdir / 'metrics.jsonl').read_text().splitlines()]
  assert len([r for r in records if r['kind'] == 'valid']) == 2  # Once, not once a process.
  assert json.loads((workdir / 'run.json').read_text())['config']['process_id'] == 0


@pytest.mark.slow
def test_a_two_process_run_stopped_by_ctrl_c_resumes_to_the_same_numbers(
    tiny_corpus, tiny_data_dir, tmp_path):
  """Ctrl-C reaches the processes at different updates; they agree on one to stop at, save
  one checkpoint together, and the rerun ends where an uninterrupted run does."""
  flags = dict(order=3, feature_size=8, hidden_size=16, batch_size=16, eval_batch_size=16,
               epochs=6, patience=6, learning_rate=0.05, log_every=3, checkpoint_every=1000,
               unk_max_count=1, **TINY_SPLIT)
  workdir = tmp_path / 'two'
  args = [*(f'--{name}={value}' for name, value in flags.items()),
          f'--data_dir={tiny_data_dir}', f'--workdir={workdir}']
  metrics = workdir / 'metrics.jsonl'

  def press_ctrl_c_after_some_updates():
    for _ in range(1200):
      if metrics.exists() and metrics.read_text().count('"train"') >= 3:
        os.kill(os.getpid(), signal.SIGINT)  # Caught by launch(), running meanwhile.
        return
      time.sleep(0.05)

  threading.Thread(target=press_ctrl_c_after_some_updates, daemon=True).start()
  assert local.launch(2, 2, args, module='tests.tiny_brown', timeout_seconds=120) == 0
  assert not (workdir / 'summary.json').exists()  # Stopped before the end…
  saved = [int(p.name) for p in (workdir / 'checkpoints').iterdir() if p.name.isdigit()]
  assert saved and max(saved) % flags['log_every'] == 0  # …at an update they agreed on.
  assert local.launch(2, 2, args, module='tests.tiny_brown', timeout_seconds=120) == 0
  resumed = json.loads((workdir / 'summary.json').read_text())
  one = run(Config(workdir=str(tmp_path / 'one'), **flags), tiny_corpus)
  assert resumed['steps'] == one['steps'] and resumed['epochs'] == one['epochs'] == 6
  for split in ('train', 'valid', 'test'):
    assert math.isclose(resumed[f'{split}_ppl'], one[f'{split}_ppl'], rel_tol=1e-5)


# --- the multi-host scripts ---------------------------------------------------------------

@pytest.mark.parametrize('script', ['tpu_vm.sh', 'slurm.sbatch'])
def test_scripts_parse(script):
  result = subprocess.run(['bash', '-n', str(LAUNCH / script)], capture_output=True, text=True)
  assert result.returncode == 0, result.stderr


def test_tpu_vm_script_without_arguments_prints_its_usage():
  result = subprocess.run(['bash', str(LAUNCH / 'tpu_vm.sh')], capture_output=True, text=True)
  assert result.returncode != 0
  assert result.stderr.startswith('usage: launch/tpu_vm.sh TPU_NAME ZONE WORKDIR'), result.stderr
