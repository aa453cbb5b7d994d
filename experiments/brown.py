"""`python -m experiments.brown`: the card's command, nplm.cli.train (--dataset=brown by
default; any --dataset works)."""

from nplm.cli import train

if __name__ == '__main__':
  train.run_program()
