"""`python -m nplm.cli <command> [flags]`: the `nplm` command (nplm.console) from a checkout."""

from nplm.console import main

if __name__ == '__main__':
  main()
