"""Checks that need several devices, run in a child process with simulated CPU devices.

With this jax, `jax_num_cpu_devices` raises a RuntimeError once the backend has started, which
another test module of the same pytest run may already have done. So a test module holding
`check_*` functions runs them all in one child, `python -m <module>` with
JAX_NUM_CPU_DEVICES=N, which prints a JSON report {check: 'ok' or the traceback}; each pytest
test then asserts its own entry. One child means one jax start-up and shared compiles.
"""

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import jax

ROOT = Path(__file__).resolve().parents[1]


def check_names(module_globals: dict) -> list[str]:
  return sorted(name for name in module_globals if name.startswith('check_'))


def run_checks(module_globals: dict, devices: int) -> None:
  """The child's main: every check_* of the module, a JSON report on the last stdout line."""
  assert jax.device_count() == devices, jax.devices()
  report = {}
  for name in check_names(module_globals):
    try:
      module_globals[name]()
      report[name] = 'ok'
    except Exception:  # pylint: disable=broad-except
      report[name] = traceback.format_exc()
  print(json.dumps(report))


def child_report(module: str, devices: int, timeout: int = 600, **env: str) -> dict:
  """Runs `python -m module` on `devices` simulated CPU devices; its report."""
  env = dict(os.environ, JAX_NUM_CPU_DEVICES=str(devices), JAX_PLATFORMS='cpu', **env)
  child = subprocess.run([sys.executable, '-m', module], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=timeout)
  assert child.returncode == 0, child.stderr[-5000:]
  return json.loads(child.stdout.strip().splitlines()[-1])
