"""`python -m experiments.generate`: nplm.cli.generate (`nplm generate` once installed)."""

from nplm.cli import generate

if __name__ == '__main__':
  generate.run_program()
