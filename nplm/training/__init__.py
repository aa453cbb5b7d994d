"""What an update and a pass over a split compute: the feeds of the model families (windows,
BPTT streams, word2vec), the optimizers and row-sparse updates, the memory a run needs, and
the refusals made before anything is built."""
