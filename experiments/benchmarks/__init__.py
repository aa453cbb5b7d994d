"""The benchmarks time what a user's `nplm train` runs: malloc keeps the compiled steps'
temporaries (nplm.host_memory) from before JAX's first computation, as the `nplm` command
and `python -m experiments.<command>` ask for it. Asked for later, by the feed, the threads
JAX had started kept arenas whose heaps hold at most 64 MiB: the LSTM's 63 MB of scores were
faulted in again at every update, and its benchmark timed nplm 17% slower than a user's run
(experiments/results/cpu/lstm_malloc/)."""

from nplm import host_memory

host_memory.keep_freed_blocks()
