"""Ctrl-C sent as `nplm train`'s "step 2" log line is read, then Ctrl-C again 2 s later
(tests/test_stops.py's second-Ctrl-C moment, its child and flags), N times, against the
checkout CHECKOUT: how many ended with status 75 and no traceback.

  python experiments/results/stops/log_line_stops.py CHECKOUT N
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

checkout, trials = Path(sys.argv[1]).resolve(), int(sys.argv[2])
sys.path.insert(0, str(checkout))
from tests.conftest import write_text_corpus  # noqa: E402
from tests.test_stops import _CHILD, FLAGS  # noqa: E402

root = Path(tempfile.mkdtemp())
dataset = f'text:{write_text_corpus(root / "corpus")}'
buffered = {k: v for k, v in os.environ.items() if k != 'PYTHONUNBUFFERED'}
kept = 0
for trial in range(trials):
  argv = [f'--dataset={dataset}', f'--data_dir={root}/tfds', f'--workdir={root}/run{trial}',
          *FLAGS]
  child = subprocess.Popen([sys.executable, '-c', _CHILD, '0.0', '3.0', *argv], cwd=checkout,
                           env=buffered, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
  for line in child.stdout:
    if re.search(r'\bstep 2\b', line):
      break
  child.send_signal(signal.SIGINT)
  time.sleep(2.0)
  child.send_signal(signal.SIGINT)
  out, _ = child.communicate(timeout=120)
  ok = child.returncode == 75 and 'Traceback' not in out
  kept += ok
  print(f'trial {trial}: status {child.returncode}'
        f'{"" if ok else " (the first Ctrl-C lost: " + str(out.count("Logging error")) + " logging errors)"}')
print(f'{kept} of {trials} stopped as asked')
shutil.rmtree(root)
