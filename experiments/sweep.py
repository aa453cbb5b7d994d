"""`python -m experiments.sweep`: nplm.cli.sweep (`nplm sweep` once installed)."""

from nplm.cli import sweep

if __name__ == '__main__':
  sweep.run_program()
