"""`python -m experiments.evaluate`: nplm.cli.evaluate (`nplm evaluate` once installed)."""

from nplm.cli import evaluate

if __name__ == '__main__':
  evaluate.run_program()
