r"""Any two models mixed, three ways; without --with, the paper's interpolated trigram.

  nplm mix --workdir=runs/mlp9                      # a network with DelInt3 (Table 1's mix)
  nplm mix --workdir=runs/lstm --with=runs/ptb_kn5  # any two: networks or n-gram DIRs
  python -m experiments.mix --workdir=runs/mlp9

Prints the exact valid and test perplexities of A (--workdir) alone, of B (--with; DelInt3
fitted on A's corpus, weights by EM on valid, if not given) alone, and of
p = λ p_A + (1 - λ) p_B with λ = 0.5 (the paper's "mix"), one λ learned on valid, and one λ
per context-frequency bin learned on valid (the training count of (w_{t-2}, w_{t-1}), the
interpolated trigram's bins). The corpus is the one A was trained on (its data settings are
read from its workdir); B must have the same vocabulary.
"""

import numpy as np
from absl import flags

from nplm import cli, paths
from nplm.data.acquire import CorpusNotFoundError
from nplm.data.corpus import Corpus
from nplm.data.datasets import load_dataset
from nplm.errors import ConfigError
from nplm.ngram import InterpolatedTrigram, mixture, perplexity
from nplm.ngram.interpolated import DEFAULT_BINS, context_bins
from nplm.use.ngram_run import NgramRun
from nplm.use.trained import NoTrainedModelError, load_trained
from nplm.stop_requests import Interrupted, interrupting

SPLITS = ('valid', 'test')


def corpus_of(model, data_dir: str = '') -> Corpus:
  """The corpus a model was trained on (its recorded data settings, at the absolute
  location its workdir records; its prepared copy in `data_dir` if given), refused in one
  line if it is gone or no longer the data the model was trained on."""
  config = model.config.resolved()
  if data_dir:
    config = config.replace(data_dir=paths.absolute(data_dir))
  workdir, dataset = paths.shown(model.config.workdir), paths.shown_dataset(config.dataset)
  try:
    corpus = load_dataset(config)
  except CorpusNotFoundError as error:
    raise ConfigError(f'{workdir} was trained on --dataset={dataset}, which cannot be '
                      f'read now ({error}); mix reads the data a model was trained on') from None
  if model.data_fingerprint not in (None, corpus.fingerprint):
    raise ConfigError(f'--dataset={dataset} holds other data than {workdir} was '
                      'trained on (its fingerprint differs from the one its workdir recorded: '
                      'the files changed since); mix reads the data a model was trained on')
  return corpus


def same_vocabulary(a, b) -> None:
  """A ConfigError unless B reads the same tokens as A."""
  if b.vocab.fingerprint() != a.vocab.fingerprint():
    raise ConfigError(f'--with={paths.shown(b.config.workdir)} has another vocabulary than '
                      f'{paths.shown(a.config.workdir)} (|V| = {b.vocab.size:,} and '
                      f'{a.vocab.size:,}, or other words): mix needs both on the same tokens; '
                      'train or fit B on A\'s dataset with the same data flags')


def delint3(corpus: Corpus, like) -> NgramRun:
  """The paper's interpolated trigram fitted on `corpus`, as a model like any other."""
  trigram = InterpolatedTrigram.fit(corpus.splits['train'], corpus.splits['valid'],
                                    corpus.vocab.size, corpus.boundary_id)
  return NgramRun(like.config, corpus.vocab, trigram, corpus.fingerprint)


def mixes(a, b, corpus: Corpus) -> tuple[dict, dict, dict]:
  """(A's and B's per-token log-probs of valid and test, mixture.mix_ways of the two)."""
  splits = {s: corpus.splits[s] for s in SPLITS}
  log_probs = [{s: model.split_log_probs(ids) for s, ids in splits.items()} for model in (a, b)]
  components = {s: np.stack([log_probs[0][s], log_probs[1][s]], axis=1) for s in SPLITS}
  bins = context_bins(corpus.splits['train'], splits, corpus.vocab.size, corpus.boundary_id)
  return log_probs[0], log_probs[1], mixture.mix_ways(components, bins, DEFAULT_BINS)


def mix_report(a, corpus: Corpus, b=None) -> str:
  """The table printed by this program: A and B (DelInt3 on A's corpus if None) on the
  corpus A learned."""
  a.require_language_model()
  if corpus.vocab.fingerprint() != a.vocab.fingerprint():
    raise NoTrainedModelError(f'the corpus gives another vocabulary than '
                              f'{paths.shown(a.config.workdir)} had')
  if b is None:
    b = delint3(corpus, a)
  b.require_language_model()
  same_vocabulary(a, b)
  log_probs_a, log_probs_b, mixed = mixes(a, b, corpus)
  ngrams = [isinstance(model, NgramRun) for model in (a, b)]
  networks = ['network alone'] if ngrams.count(False) == 1 else ['network A alone',
                                                                  'network B alone']
  labels = [f'{model.name} alone' if ngram else networks.pop(0)
            for model, ngram in zip((a, b), ngrams)]
  rows = [(labels[0], {s: perplexity(lp) for s, lp in log_probs_a.items()}),
          (labels[1], {s: perplexity(lp) for s, lp in log_probs_b.items()}),
          ('mix, λ = 0.5', mixed['fixed']['ppl']),
          (f'mix, learned λ = {mixed["learned"]["weights"][0, 0]:.3f}', mixed['learned']['ppl']),
          (f'mix, λ per bin ({DEFAULT_BINS} bins)', mixed['binned']['ppl'])]
  lines = [f'{paths.shown(a.config.workdir)}: {a.name}, '
           f'{paths.shown_dataset(a.config.dataset)}, |V| = {corpus.vocab.size:,}']
  if b.config.workdir != a.config.workdir:
    lines.append(f'mixed with {paths.shown(b.config.workdir)}: {b.name} (λ weighs the first)')
  lines.append(f'{"":34} {"valid":>9} {"test":>9}')
  lines += [f'{name:34} {ppl["valid"]:9.2f} {ppl["test"]:9.2f}' for name, ppl in rows]
  return '\n'.join(lines)


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  try:
    with interrupting(f'mixing {flags.FLAGS.workdir}'):
      a = load_trained(flags.FLAGS.workdir)
      a.require_language_model()  # Before the corpus is read and anything fitted.
      b = None
      if flags.FLAGS['with'].value:
        b = load_trained(flags.FLAGS['with'].value)
        b.require_language_model()
        same_vocabulary(a, b)
      report = mix_report(a, corpus_of(a, flags.FLAGS.data_dir), b)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  print(report)


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train) or an n-gram '
                      'DIR (nplm ngram --out): model A, whose corpus is read.')
  flags.DEFINE_string('with', '', 'Model B, a workdir or n-gram DIR on the same vocabulary '
                      "(empty: the paper's interpolated trigram fitted on A's corpus).")
  flags.DEFINE_string('data_dir', '', 'TFDS data dir, if not the one the run recorded.')
  flags.mark_flag_as_required('workdir')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
