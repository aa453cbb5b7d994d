"""`python -m experiments.mix`: nplm.cli.mix (`nplm mix` once installed)."""

from nplm.cli import mix

if __name__ == '__main__':
  mix.run_program()
