#!/usr/bin/env bash
# One nplm run on every host of a multi-host Cloud TPU VM (a pod slice: v4-32, v5litepod-16,
# ...): one process per host, each driving its host's TPU chips, all joined into one JAX run.
#
#   launch/tpu_vm.sh TPU_NAME ZONE WORKDIR [experiments.train flags...]
#
#   REPO_URL=https://github.com/you/nplm.git launch/tpu_vm.sh my-pod us-central2-b \
#       /mnt/nplm/mlp9 --flagfile=mlp9 --batch_size=4096
#
# It creates nothing: the TPU VM and WORKDIR's filesystem must exist. Each host writes its
# shards of every Orbax checkpoint into WORKDIR (process 0 also the logs and summaries), so
# WORKDIR must be one directory that every host sees at the same path: an NFS share
# (Filestore), or a Cloud Storage bucket mounted with gcsfuse on every worker. A gs:// URL
# will not do: the trainer writes the workdir through the local filesystem.
#
# Why --distributed: on a TPU pod slice, jax.distributed.initialize() with no arguments
# learns the coordinator (worker 0), the number of processes and this one's index from the
# TPU VM's metadata, so the very same command runs on every worker.
#
# Environment:
#   REPO_URL  this project's repository, cloned on every worker (required).
#   REPO_REF  branch or tag to check out (default main).
#   PYTHON    the workers' Python, 3.11 or newer (default python3; Ubuntu 22.04 images have
#             3.10: install python3.11-venv there and set PYTHON=python3.11).
#   PROJECT   gcloud project (default: gcloud's configured one).
#   SETUP=0   skip cloning and installing (a rerun: the same WORKDIR resumes the run).
#   DETACH=1  run in the background on each worker (log: ~/nplm.log), so the run outlives this
#             ssh session; otherwise every worker's output streams here until the run ends.
set -euo pipefail

usage() {
  cat >&2 <<'USAGE'
usage: launch/tpu_vm.sh TPU_NAME ZONE WORKDIR [experiments.train flags...]
  TPU_NAME  an existing multi-host TPU VM (gcloud compute tpus tpu-vm list --zone=ZONE)
  ZONE      its zone, e.g. us-central2-b
  WORKDIR   a directory every worker sees at the same path (NFS, or a gcsfuse mount)
Set REPO_URL to this project's repository; see the comments at the top for the rest.
USAGE
  exit 2
}
(( $# >= 3 )) || usage
TPU=$1 ZONE=$2 WORKDIR=$3
shift 3

REPO_URL=${REPO_URL:-https://github.com/YOUR_ACCOUNT/nplm.git}
REPO_REF=${REPO_REF:-main}
PYTHON=${PYTHON:-python3}
if [[ $REPO_URL == *YOUR_ACCOUNT* ]]; then
  echo "error: set REPO_URL to this project's repository (every worker clones it)" >&2
  exit 2
fi

# Words quoted for the workers' shell.
quote() { printf '%q ' "$@"; }

on_all_workers() {
  gcloud compute tpus tpu-vm ssh "$TPU" --zone="$ZONE" ${PROJECT:+--project="$PROJECT"} \
    --worker=all --command="$1"
}

if [[ ${SETUP:-1} != 0 ]]; then
  on_all_workers "set -euo pipefail
    $(quote "$PYTHON") -c 'import sys; assert sys.version_info >= (3, 11), \"set PYTHON to 3.11+\"'
    if [ -d nplm ]; then
      git -C nplm fetch -q origin $(quote "$REPO_REF") && git -C nplm checkout -q FETCH_HEAD
    else
      git clone -q --branch $(quote "$REPO_REF") $(quote "$REPO_URL") nplm
    fi
    cd nplm && $(quote "$PYTHON") -m venv .venv
    .venv/bin/pip install -q -e '.[tf,tpu]'"
fi

# Ours last: a typed flag wins over a flagfile's, and of two typed the last wins, so no
# other --workdir can split the hosts.
train=".venv/bin/python -m experiments.train $(quote "$@" --distributed "--workdir=$WORKDIR")"
if [[ ${DETACH:-0} == 1 ]]; then
  on_all_workers "cd nplm && nohup $train > ~/nplm.log 2>&1 < /dev/null &"
  echo "Started on every worker of $TPU; follow it with:"
  echo "  gcloud compute tpus tpu-vm ssh $TPU --zone=$ZONE --worker=0 \\"
  echo "    --command='tail -f ~/nplm.log'"
else
  on_all_workers "cd nplm && $train"
fi
