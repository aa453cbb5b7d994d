"""`python -m nplm <command> [flags]`: the `nplm` command (nplm.console) without its script on
PATH (a venv not activated, a notebook's `!python -m nplm ...`)."""

from nplm.console import main

if __name__ == '__main__':
  main()
