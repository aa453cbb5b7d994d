"""`python -m experiments.train --dataset=...`: nplm.cli.train, for any dataset."""

from nplm.cli import train

if __name__ == '__main__':
  train.run_program()
