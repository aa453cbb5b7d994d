"""`python -m experiments.table1`: nplm.cli.table1 (`nplm table1` once installed)."""

from nplm.cli import table1

if __name__ == '__main__':
  table1.run_program()
