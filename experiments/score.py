"""`python -m experiments.score`: nplm.cli.score (`nplm score` once installed)."""

from nplm.cli import score

if __name__ == '__main__':
  score.run_program()
