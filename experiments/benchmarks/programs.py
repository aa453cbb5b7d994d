"""What a timing alone cannot say: a compiled step's program and where its time went.

For a benchmark that hands its files back from a machine it cannot revisit (a lent GPU, 15
minutes): `write_program` saves the step as XLA compiled it (optimized HLO: on a GPU, which
products are cuBLAS's or Triton's, the fusions, any padding copies), and `write_profile`
runs the steps once under JAX's profiler and writes the events of each device (a GPU's
kernels) and of the host, summed by name, longest first: a text table (nplm.run_files.
profile's, as `nplm train --profile_steps` writes), where the profiler's own trace is a
binary file of megabytes.
"""

import tempfile
from pathlib import Path

import jax

from nplm.run_files.profile import newest_table


def write_program(path: Path, compiled) -> None:
  """`compiled` (a jax.stages.Compiled) as its optimized HLO text."""
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(compiled.as_text())


def write_profile(path: Path, run_steps, batches) -> None:
  """One run of `run_steps(batches)` under the profiler, as the table of a run's
  --profile_steps (nplm.run_files.profile). A machine whose profiler cannot trace (no
  CUPTI for a GPU's kernels) gets the error in the file, not a failed benchmark."""
  path.parent.mkdir(parents=True, exist_ok=True)
  try:
    with tempfile.TemporaryDirectory() as directory:
      with jax.profiler.trace(directory, create_perfetto_trace=True):
        run_steps(batches)
      lines = newest_table(Path(directory), len(batches))
  except Exception as error:  # The profiler's failures share no base class.
    lines = [f'no profile: {type(error).__name__}: {error}']
  path.write_text('\n'.join(lines) + '\n')
