"""`python -m experiments.ngram`: nplm.cli.ngram (`nplm ngram` once installed)."""

from nplm.cli import ngram

if __name__ == '__main__':
  ngram.run_program()
