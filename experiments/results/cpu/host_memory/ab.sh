#!/bin/bash
# before: nplm.host_memory leaves malloc alone (a glibc.malloc tunable set to its default);
# after: as nplm runs.
cd "$(dirname "$0")/../../../.."
for i in 1 2 3; do
  GLIBC_TUNABLES=glibc.malloc.perturb=0 .venv/bin/python -m experiments.benchmarks.nnlm --data_dir=${1:?DATA_DIR} --out=experiments/results/cpu/host_memory/before$i > experiments/results/cpu/host_memory/before$i.log 2>&1
  [ $i = 1 ] || .venv/bin/python -m experiments.benchmarks.nnlm --data_dir=${1:?DATA_DIR} --out=experiments/results/cpu/host_memory/after$i > experiments/results/cpu/host_memory/after$i.log 2>&1
done
