"""The `nplm` command's entry point (pyproject.toml's [project.scripts]): nplm.cli.__main__,
imported while Ctrl-C ends the start with one line (nplm.errors.interrupt_ends_the_start),
after malloc is told to keep the compiled steps' temporaries (nplm.host_memory: before JAX
starts its threads). Its import is the command's first seconds (JAX, Flax, Orbax); this
module imports only what `import nplm` does."""

from nplm import host_memory
from nplm.errors import interrupt_ends_the_start


def main() -> None:
  host_memory.keep_freed_blocks()
  with interrupt_ends_the_start():
    from nplm.cli.__main__ import main as run_command
  run_command()
