"""What a run reports: how it ended (RunStatus), and summary.json (its exact perplexities,
how it went, on what); and whether a finished run can stand for a config (reuse)."""

import enum
import json
import math
from pathlib import Path

import jax

from nplm import parallel
from nplm.config import Config
from nplm.data.corpus import Corpus


class RunStatus(enum.StrEnum):
  """How a run's training ended (a str: summary.json holds the value)."""
  EPOCHS_DONE = 'epochs_done'  # --epochs passes over the training split.
  EARLY_STOPPED = 'early_stopped'  # --patience epochs without a better validation.
  MAX_STEPS = 'max_steps'  # --max_steps updates.
  INTERRUPTED = 'interrupted'  # A stop request (SIGTERM, Ctrl-C): resumes when rerun.
  DIVERGED = 'diverged'  # A loss or the parameters stopped being finite.

  @property
  def finished(self) -> bool:
    """The run reached one of its bounds: its summary stands for its config."""
    return self in (RunStatus.EPOCHS_DONE, RunStatus.EARLY_STOPPED, RunStatus.MAX_STEPS)


def bits_per_token(result: dict) -> float:
  """Σ -log2 p / tokens: bits per character for a character-level model."""
  return result['nll'] / result['tokens'] / math.log(2)


def run_summary(status: RunStatus, config: Config, corpus: Corpus, mesh, progress: dict,
                steps: int, params, results: dict, wall_seconds: float) -> dict:
  """summary.json of a run: its exact perplexities (`results`, per split), how it went, and
  on what."""
  stats, train_seconds = corpus.stats, progress['train_seconds']
  return {
      'status': status,
      'dataset': config.dataset,
      'data_fingerprint': corpus.fingerprint,
      'vocab_size': corpus.vocab.size,
      'tokens': {name: stats[name]['tokens'] for name in results},
      'unk_rate': {name: stats[name]['unk_rate'] for name in results},
      **{f'{name}_ppl': results[name]['ppl'] for name in results},
      **({'bpc': {name: bits_per_token(results[name]) for name in results}}
         if config.tokens == 'chars' else {}),
      'nll': {name: results[name]['nll'] for name in results},
      'epochs': progress['epochs_done'],
      'best_epoch': progress['best_epoch'],
      'valid_ppl_history': progress['valid_ppl_history'],
      'steps': steps,
      'parameters': parameter_count(params, corpus.vocab.size),
      'wall_seconds': wall_seconds,
      'train_seconds': train_seconds,
      'train_examples_per_second': progress['train_examples'] / max(train_seconds, 1e-9),
      'device': str(jax.devices()[0].device_kind),
      'devices': {'count': jax.device_count(), 'processes': jax.process_count(),
                  'mesh': dict(mesh.shape)},
      'config': config.to_dict(),
  }


def parameter_count(params, vocab_size: int) -> int:
  """The model's parameters (the padding rows of vocabulary-parallel outputs are not)."""
  return sum(x.size for x in jax.tree.leaves(parallel.unpadded_output_rows(params,
                                                                           vocab_size)))


def finished_summary(config: Config) -> dict | None:
  """The summary a finished run of this config left in its workdir, if any: reused, not
  trained again, by sweeps and the Table 1 runner. Fields that only observe the run
  (nplm.config.OBSERVING_FIELDS) may differ."""
  path = Path(config.workdir) / 'summary.json'
  if not path.exists():
    return None
  summary = json.loads(path.read_text())
  finished = RunStatus(summary['status']).finished
  return summary if finished and config.same_run(summary['config']) else None
