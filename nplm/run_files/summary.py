"""What a run reports: how it ended (RunStatus), and summary.json (its exact perplexities,
how it went, on what); and whether a finished run can stand for a config (reuse).

summary.json carries a checksum of its own content ('checksum': SHA-256 of the rest as
canonical JSON), since the tools read from it which parameters the run reported: a summary
cut short or edited by hand is found out (read_summary), never followed; one written by an
older nplm has none and is read as it is.
"""

import enum
import hashlib
import json
import math
import os
from pathlib import Path

import jax

from nplm import models, parallel
from nplm.config import Config
from nplm.files import write_json_atomically
from nplm.paths import shown
from nplm.data.corpus import Corpus
from nplm.data.tokenizers import Tokenization
from nplm.perplexity import perplexity


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


def open_vocabulary(config: Config, corpus: Corpus, nll: dict[str, float],
                    spelling_nll: dict[str, float]) -> dict:
  """The open-vocabulary figures of each split's closed Σ -log p (`nll`) and the cost of
  spelling its unknown words (`spelling_nll`, nplm.ngram.spelling): `<split>_open_ppl`
  (every unknown word charged p(<unk> | h) · q(w), not p(<unk> | h) alone),
  `spelling_share` (the part of the open NLL that spelling unknown words costs), and, for a
  model whose tokens are not whitespace words, `<split>_word_ppl`, exp(open Σ NLL / words),
  where the corpus knows its words (a prepared text or TFDS dataset). `words` counts each
  line's whitespace-separated words plus one for its end: the tokens a whitespace word
  model counts (its `<eos>` included), so a word model's open perplexity, a subword model's
  and a character model's word_ppl on the same text divide the same text's total NLL, every
  character of it paid for, by the same count, and compare."""
  stats, figures, shares = corpus.stats, {}, {}
  for name, closed in nll.items():
    total = closed + spelling_nll.get(name, 0.0)
    figures[f'{name}_open_ppl'] = perplexity(total, stats[name]['tokens'])['ppl']
    shares[name] = spelling_nll.get(name, 0.0) / total if total else 0.0
    if not Tokenization.of(config).whitespace_words and 'words' in stats[name]:
      figures[f'{name}_word_ppl'] = perplexity(total, stats[name]['words'])['ppl']
  return {**figures, 'spelling_nll': {name: spelling_nll.get(name, 0.0) for name in nll},
          'spelling_share': shares}


def run_summary(status: RunStatus, config: Config, corpus: Corpus, mesh, progress,
                steps: int, params, results: dict, wall_seconds: float,
                periodic_validation: dict, phase_seconds: dict,
                spelling_nll: dict[str, float]) -> dict:
  """summary.json of a run: its exact perplexities (`results`, per evaluated split, each
  over the whole split: `evaluated` says so), how it went, and on what.

  `periodic_validation` ({'split', 'tokens', 'of'}) is what each figure of
  valid_ppl_history scored: the first `tokens` of the split's `of`. `phase_seconds` is
  THIS invocation's (a resumed run's earlier invocations are not in it): 'load' (loading
  the dataset; None where the caller passed the corpus in), 'build' (model, feed, states),
  'compile' (the first train step, its compilation included; 0 if no step ran), 'train'
  (the updates after it), 'checkpoints' (saving them), 'validation' (the epoch-end
  validations), 'evaluation' ({split: the final evaluation's seconds}). wall_seconds and
  train_seconds count every invocation. `spelling_nll`: per split, what spelling its unknown
  words costs (open_vocabulary).
  """
  stats, train_seconds = corpus.stats, progress.train_seconds
  return {
      'status': status,
      'dataset': config.dataset,
      'data_fingerprint': corpus.fingerprint,
      'vocab_size': corpus.vocab.size,
      'split_tokens': {name: stats[name]['tokens'] for name in corpus.splits},
      'evaluated': {name: {'tokens': stats[name]['tokens'], 'of': stats[name]['tokens']}
                    for name in results},
      'tokens': {name: stats[name]['tokens'] for name in results},
      'unk_rate': {name: stats[name]['unk_rate'] for name in results},
      **{f'{name}_ppl': results[name]['ppl'] for name in results},
      **({'bpc': {name: bits_per_token(results[name]) for name in results}}
         if config.tokens == 'chars' else {}),
      'nll': {name: results[name]['nll'] for name in results},
      **open_vocabulary(config, corpus, {name: results[name]['nll'] for name in results},
                        spelling_nll),
      'epochs': progress.epochs_done,
      'best_epoch': progress.best_epoch,
      'best_step': progress.best_step,
      'valid_ppl_history': progress.valid_ppl_history,
      'valid_steps': progress.valid_steps,
      'periodic_validation': periodic_validation,
      'steps': steps,
      'parameters': parameter_count(params, corpus.vocab.size),
      'wall_seconds': wall_seconds,
      'train_seconds': train_seconds,
      'train_examples_per_second': progress.train_examples / max(train_seconds, 1e-9),
      'phase_seconds': phase_seconds,
      'device': str(jax.devices()[0].device_kind),
      'devices': {'count': jax.device_count(), 'processes': jax.process_count(),
                  'mesh': dict(mesh.shape)},
      'config': config.to_dict(),
  }


def parameter_count(params, vocab_size: int) -> int:
  """The model's parameters (the padding rows of vocabulary-parallel outputs are not), from
  their shapes: arrays or shapes alike (jax.ShapeDtypeStruct)."""
  def count(path, leaf) -> int:
    rows = leaf.shape[:1]
    if rows and parallel.is_output_row(path):
      rows = (min(rows[0], vocab_size),)
    return math.prod(rows + leaf.shape[1:])
  return sum(jax.tree.leaves(jax.tree_util.tree_map_with_path(count, params)))


SUMMARY_FILE = 'summary.json'


class SummaryDamaged(ValueError):
  """A workdir's summary.json cannot be read, or does not match its checksum."""


def summary_checksum(summary: dict) -> str:
  """SHA-256 of a summary (without its checksum) as canonical JSON: the same for the dict a
  run wrote and for the one read back, however the file is indented."""
  text = json.dumps(summary, sort_keys=True, separators=(',', ':'))
  return hashlib.sha256(text.encode()).hexdigest()


def write_summary(workdir: str | os.PathLike, summary: dict) -> None:
  """<workdir>/summary.json, written whole, with its checksum."""
  canonical = json.loads(json.dumps(summary))  # As it reads back: enums as their strings.
  write_json_atomically(Path(workdir) / SUMMARY_FILE,
                        {**canonical, 'checksum': summary_checksum(canonical)})


def read_summary(workdir: str | os.PathLike) -> dict | None:
  """A workdir's summary.json, verified against its checksum (without it); None if there is
  none; SummaryDamaged, one line, if it is cut short, edited or unreadable."""
  path = Path(workdir) / SUMMARY_FILE
  remedy = 'rerun the train command of its run to rewrite it (nothing is trained again)'
  try:
    summary = json.loads(path.read_text())
  except FileNotFoundError:
    return None
  except (OSError, ValueError) as error:  # ValueError: not JSON, or not UTF-8.
    why = error.strerror if isinstance(error, OSError) else 'it is no complete JSON'
    raise SummaryDamaged(f'{shown(path)} is damaged ({why}); {remedy}') from None
  if not isinstance(summary, dict):
    raise SummaryDamaged(f'{shown(path)} is damaged (it holds no summary); {remedy}')
  checksum = summary.pop('checksum', None)
  if checksum is not None and checksum != summary_checksum(summary):
    raise SummaryDamaged(f'{shown(path)} is damaged (it does not match its checksum: was it '
                         f'edited?); {remedy}')
  return summary


def finished_summary(config: Config) -> dict | None:
  """The summary a finished run of this config left in its workdir, if any: reused, not
  trained again, by sweeps and the Table 1 runner. Fields that only observe the run
  (nplm.config.OBSERVING_FIELDS) may differ, but it must hold every split the config's
  --eval_splits names: if not, None, and nplm.trainer.run of the config (the run resumed,
  nothing left to train) scores them from its best checkpoint. A damaged summary.json is
  none: that run rewrites it."""
  try:
    summary = read_summary(config.workdir)
  except SummaryDamaged:
    return None
  if summary is None:
    return None
  finished = RunStatus(summary['status']).finished
  if not finished or not config.same_run(summary['config']):
    return None
  if 'evaluated' not in summary:  # Written before --eval_splits: every split evaluated.
    return summary
  language_model = models.model_class(config.model).language_model
  wanted = config.evaluated_splits(summary['split_tokens'], language_model=language_model)
  return summary if set(wanted) <= set(summary['evaluated']) else None
