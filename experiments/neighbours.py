"""`python -m experiments.neighbours`: nplm.cli.neighbours (`nplm neighbours` once installed)."""

from nplm.cli import neighbours

if __name__ == '__main__':
  neighbours.run_program()
