r"""An n-gram baseline on any dataset: fit on train, exact perplexity of every split.

  nplm ngram --dataset=text:data/ptb --order=5 --out=runs/ptb_kn5          # Kneser-Ney
  nplm ngram --dataset=brown --order=3 --model=delint --out=runs/delint3   # the paper's
  python -m experiments.ngram --dataset=text:data/ptb --order=5 --out=DIR

--model=kn: interpolated modified Kneser-Ney (Chen & Goodman 1999) of any order; delint: the
paper's interpolated trigram (weights by EM on valid). Both score the same tokens as the
networks (each split after order-1 boundary tokens, every token once) from a distribution
normalized over the vocabulary; the data flags are the trainer's. Writes DIR/ngram.json
(the numbers) and the model (nplm.use.ngram_run: model.npz, vocab.txt, and model.arpa for
Kneser-Ney, which KenLM reads), so that evaluate, score, rank, predict, generate and mix read
DIR as they read a trained network's workdir.
"""

import logging
import math
import shutil
import time
from pathlib import Path

import numpy as np
from absl import flags

from nplm import cli, flagfiles, ngram, paths
from nplm.config import DATA_FIELDS, ConfigError
from nplm.data.corpus import Corpus
from nplm.data.datasets import load_dataset
from nplm.data.tokenizers import Tokenization
from nplm.display import counted
from nplm.ngram import bounds, spelling
from nplm.perplexity import perplexity
from nplm.training.memory import host_available, size
from nplm.stop_requests import Interrupted, interrupting
from nplm.run_files.summary import bits_per_token, open_vocabulary
from nplm.use.ngram_run import model_name, save_ngram_run
from nplm.data.config_checks import settled_data

FLAGS = flags.FLAGS
log = logging.getLogger(__name__)


class Bounds:
  """What a Kneser-Ney model of --order takes (nplm.ngram.bounds), checked before the work
  and after each order is counted: a ConfigError, one line, where the memory this process
  can have or the free disk under --out cannot hold it; a progress line per order."""

  def __init__(self, corpus: Corpus, order: int, out: Path):
    self.order, self.out, self.grams = order, out, []
    self.train = len(corpus.splits['train'])
    self.longest = max(len(ids) for ids in corpus.splits.values())
    lengths = np.array([len(word) for word in corpus.vocab.words], np.float64)
    self.vocab_size, self.vocab_chars = len(lengths), float(lengths.mean())
    self.word_chars = float(lengths[corpus.splits['train']].mean())
    self.budget, self.where = host_available()
    most = bounds.at_most(self.vocab_size, self.train, order, self.longest)
    log.info('counting the n-grams of order 1 to %d in %s: memory at most %s (%s %s '
             'available)', order, counted(self.train, 'token'), size(most), self.where,
             size(self.budget))

  def __call__(self, k: int, grams: int) -> None:
    """After order k is counted: its distinct k-grams."""
    self.grams.append(grams)
    needed = bounds.at_least(self.grams, self.order, self.train, self.longest)
    exact = k == self.order
    log.info('counted the %d-grams: %s distinct (order %d of %d); memory %s %s', k,
             f'{grams:,}', k, self.order, 'needed' if exact else 'at least', size(needed))
    if needed > self.budget:
      so_far = '' if exact else f' (orders 1-{k} counted, the higher ones at least as many)'
      raise ConfigError(f'--order={self.order} needs {"about" if exact else "at least"} '
                        f'{size(needed)} of memory for {counted(sum(self.grams), "n-gram")}'
                        f'{so_far}, and {self.where} {size(self.budget)} available: lower '
                        '--order')
    if exact:
      self.check_disk()

  def check_disk(self) -> None:
    """The ARPA file and the model's arrays against the free space under --out."""
    arpa = bounds.arpa_bytes(self.grams, self.vocab_size, self.word_chars, self.vocab_chars)
    written = arpa + bounds.WORD * 2 * sum(self.grams)  # model.npz, at most (compressed).
    where = self.out
    while not where.exists() and where != where.parent:
      where = where.parent
    free = shutil.disk_usage(where).free
    log.info('%s will hold about %s (model.arpa %s); %s free there', paths.shown(self.out),
             size(written), size(arpa), size(free))
    if written > free:
      raise ConfigError(f'--order={self.order} writes about {size(written)} to '
                        f'--out={paths.shown(self.out)} (model.arpa {size(arpa)}), and its '
                        f'disk has {size(free)} free: lower --order or free some space')


def fit(corpus: Corpus, model: str, order: int, on_order=None):
  splits, size, boundary = corpus.splits, corpus.vocab.size, corpus.boundary_id
  if model == 'delint':
    if order != 3:
      raise ConfigError(f'--model=delint is the interpolated trigram: --order=3, not {order}')
    return ngram.InterpolatedTrigram.fit(splits['train'], splits['valid'], size, boundary)
  if order < 1:
    raise ConfigError(f'--order must be at least 1, got {order}')
  return ngram.KneserNey.fit(splits['train'], order, size, boundary, on_order)


def results(corpus: Corpus, config, model: str, order: int, on_order=None):
  """(the fitted model, the spelling of its unknown words (nplm.ngram.spelling), its
  summary: every split's exact perplexity, closed and open)."""
  started = time.perf_counter()
  fitted = fit(corpus, model, order, on_order)
  nll = {}
  for name, ids in corpus.splits.items():
    log.info('scoring %s (%s)', name, counted(len(ids), 'token'))
    nll[name] = -math.fsum(fitted.log_prob_split(ids).tolist())
  tokens = {name: corpus.stats[name]['tokens'] for name in corpus.splits}
  summary = {
      'model': model, 'order': order, 'dataset': config.dataset,
      'tokenization': Tokenization.of(config).name,
      'vocab_size': corpus.vocab.size, 'tokens': tokens,
      'unk_rate': {name: corpus.stats[name]['unk_rate'] for name in corpus.splits},
      **{f'{name}_ppl': perplexity(nll[name], tokens[name])['ppl'] for name in corpus.splits},
      'nll': nll, 'data_fingerprint': corpus.fingerprint,
      'config': {name: getattr(config, name) for name in DATA_FIELDS},
      'wall_seconds': time.perf_counter() - started,
  }
  if config.tokens == 'chars':
    summary['bpc'] = {name: bits_per_token({'nll': nll[name], 'tokens': tokens[name]})
                      for name in nll}
  spelt = spelling.of_corpus(corpus)
  summary |= open_vocabulary(config, corpus, nll, spelling.split_costs(spelt, corpus))
  return fitted, spelt, summary


def report(summary: dict) -> str:
  name = model_name(summary['model'], summary['order'])
  lines = [f'{name} on {paths.shown_dataset(summary["dataset"])} ({summary["tokenization"]}), '
           f'|V| = {summary["vocab_size"]:,}']
  return '\n'.join(lines + cli.summary_lines(summary))


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  try:
    if FLAGS.model not in ('kn', 'delint'):
      raise ConfigError(f'unknown --model={FLAGS.model!r}; known: kn, delint')
    # Absolute: ngram.json records where the data lies, readable from anywhere.
    config = settled_data(cli.config_from_flags())
    with interrupting(f'fitting an n-gram model on --dataset={config.dataset}'):
      corpus = load_dataset(config)
      out = Path(FLAGS.out)
      checks = Bounds(corpus, FLAGS.order, out) if FLAGS.model == 'kn' else None
      fitted, spelt, summary = results(corpus, config, FLAGS.model, FLAGS.order, checks)
      summary = save_ngram_run(out, fitted, spelt, corpus, summary)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  print(report(summary))
  arpa = summary['arpa']
  print(f'wrote {out / "ngram.json"} and the model' + (f', {out / arpa["file"]} (ARPA)'
                                                      if arpa['file'] else
                                                      f' (no ARPA file: {arpa["why_not"]})'))


def run_program(argv=None) -> None:
  flags.DEFINE_integer('order', 5, 'n: the model predicts a token from the n-1 before it.')
  flags.DEFINE_string('model', 'kn', 'kn (modified Kneser-Ney) or delint (the paper\'s '
                      'interpolated trigram, --order=3).')
  flags.DEFINE_string('out', None, 'Directory that receives ngram.json and the model.',
                      required=True)
  flagfiles.define_config_flags(names=DATA_FIELDS)
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
