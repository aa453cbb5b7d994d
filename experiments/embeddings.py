"""`python -m experiments.embeddings`: nplm.cli.embeddings (`nplm embeddings` once installed)."""

from nplm.cli import embeddings

if __name__ == '__main__':
  embeddings.run_program()
