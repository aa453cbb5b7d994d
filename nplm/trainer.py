"""Training from Python: `run(config)` trains one model, `run([config, ...])` several at once.

The loop itself (one for K >= 1 models; a lone run is K = 1) is nplm.training.loop.
"""

import logging
import time

from nplm import parallel
from nplm.config import Config
from nplm.data.corpus import SPLITS, Corpus
from nplm.data.datasets import load_dataset
from nplm.data.tokenizers import Tokenization
from nplm.run_files.model_run import TrainingDiverged
from nplm.run_files.summary import RunStatus
from nplm.stop_requests import RunInterrupted, interrupting
from nplm.models import model_class
from nplm.training import loop
from nplm.training.families import feed_of
from nplm.training.run_checks import check_together

__all__ = ['RunInterrupted', 'TrainingDiverged', 'request_cpu_devices', 'run']

log = logging.getLogger(__name__)


def run(configs: Config | list[Config], corpus: Corpus | None = None) -> dict | list[dict]:
  """Trains (or resumes) in the config's workdir on `corpus` (by default the one --dataset
  names, loaded here) and returns its summary (also summary.json).

  A list of configs: one summary per config, in order, the models trained together in one
  program (one vmapped step); they are feed-forward models of one shape that differ only in
  PER_MODEL_FIELDS and share one --data_seed, and each has its own workdir and stop.

  Stopped by SIGTERM/Ctrl-C, training saves a checkpoint and each summary is
  {'status': 'interrupted', ...}; rerunning the same configs continues them to the same final
  numbers. A lone run whose loss explodes raises TrainingDiverged, its last good checkpoint
  kept (a model trained with others: its summary says so).
  """
  started, load_seconds = time.perf_counter(), None  # The summary's phase_seconds.
  lone = isinstance(configs, Config)
  configs = check_together([configs] if lone else configs)  # Settled once, here.
  parallel.initialize_processes(configs[0])
  if corpus is None:
    loading = time.perf_counter()
    corpus = _load_dataset(configs[0])
    load_seconds = time.perf_counter() - loading
  summaries = loop.train(configs, corpus, started, load_seconds)
  return _lone_summary(summaries[0]) if lone else summaries


def request_cpu_devices(config: Config) -> None:
  """The CPU devices the model's update wants (word2vec's without a C++ compiler: one per
  core), where the config names no mesh and the process is alone: for a program to call
  before any device is used (nplm train does). Not `run`'s to do: the devices are the whole
  process's, and a later run of another model in it would be spread over them too. From
  Python, JAX_NUM_CPU_DEVICES set before jax is imported does the same."""
  if not config.mesh and not config.distributed and config.num_processes == 1:
    parallel.request_cpu_devices(feed_of(model_class(config.model)).cpu_devices(config))


def _load_dataset(config: Config) -> Corpus:
  log.info('loading --dataset=%s (%s)', config.dataset, Tokenization.of(config).name)
  with interrupting(f'loading --dataset={config.dataset}'):
    return parallel.main_process_first(lambda: load_dataset(config))


def _lone_summary(summary: dict) -> dict:
  """A lone run's summary, its numbers logged; TrainingDiverged if it diverged."""
  if summary['status'] == RunStatus.DIVERGED:
    raise TrainingDiverged(summary['error'])
  if summary['status'] != RunStatus.INTERRUPTED:
    # The held-out splits that --eval_splits named (train where it named neither).
    scored = [split for split in SPLITS if f'{split}_ppl' in summary]
    shown = [split for split in scored if split != 'train'] or scored
    if shown:  # Word vectors score none unless asked.
      log.info('%s  (|V| = %d)', '  '.join(f'{split} perplexity {summary[f"{split}_ppl"]:.2f}'
                                           for split in shown), summary['vocab_size'])
  return summary
