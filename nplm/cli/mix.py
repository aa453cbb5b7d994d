r"""Models mixed, three ways: two, or several as an ensemble; without --with, A and the paper's
interpolated trigram.

  nplm mix --workdir=runs/mlp9                      # a network with DelInt3 (Table 1's mix)
  nplm mix --workdir=runs/lstm --with=runs/ptb_kn5  # any two: networks or n-gram DIRs
  nplm mix --workdir=runs/mlp_a --with=runs/mlp_b,runs/mlp_c --with_trigram  # four models
  python -m experiments.mix --workdir=runs/mlp9

The models are A (--workdir), those of --with (workdirs or n-gram DIRs, comma-separated) and,
with --with_trigram or when --with is empty, DelInt3 fitted on A's corpus (weights by EM on
valid). The corpus is the one A was trained on (its data settings are read from its workdir);
every model must have A's vocabulary. Each model scores valid and test once.

Two models, A and B: the exact valid and test perplexities of A alone, of B alone, and of
p = λ p_A + (1 - λ) p_B with λ = 0.5 (the paper's "mix"), one λ learned on valid, and one λ
per context-frequency bin learned on valid (the training count of (w_{t-2}, w_{t-1}), the
interpolated trigram's bins).

K ≥ 3 models (numbered in the order above): each model alone, then p = Σ_i α_i p_i with equal
weights α_i = 1/K, with weights learned by EM on valid (printed in that order), and with
weights per context-frequency bin learned on valid.
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
                      f'{a.vocab.size:,}, or other words): mix needs every model on the same '
                      "tokens; train or fit it on A's dataset with the same data flags")


def delint3(corpus: Corpus, like) -> NgramRun:
  """The paper's interpolated trigram fitted on `corpus`, as a model like any other."""
  trigram = InterpolatedTrigram.fit(corpus.splits['train'], corpus.splits['valid'],
                                    corpus.vocab.size, corpus.boundary_id)
  return NgramRun(like.config, corpus.vocab, trigram, corpus.fingerprint)


def checked(a, b):
  """B, if it is a language model on A's vocabulary (else a one-line error)."""
  b.require_language_model()
  same_vocabulary(a, b)
  return b


def mixes(models: list, corpus: Corpus) -> tuple[list[dict], dict]:
  """(each model's per-token log-probs of valid and test, computed once; mixture.mix_ways of
  them all)."""
  splits = {s: corpus.splits[s] for s in SPLITS}
  log_probs = [{s: model.split_log_probs(ids) for s, ids in splits.items()} for model in models]
  components = {s: np.stack([model_log_probs[s] for model_log_probs in log_probs], axis=1)
                for s in SPLITS}
  bins = context_bins(corpus.splits['train'], splits, corpus.vocab.size, corpus.boundary_id)
  return log_probs, mixture.mix_ways(components, bins, DEFAULT_BINS)


def pair_lines(a, b, alone: list[dict], mixed: dict) -> list[str]:
  """Two models: the table's rows under their names, λ weighing A."""
  ngrams = [isinstance(model, NgramRun) for model in (a, b)]
  networks = ['network alone'] if ngrams.count(False) == 1 else ['network A alone',
                                                                  'network B alone']
  labels = [f'{model.name} alone' if ngram else networks.pop(0)
            for model, ngram in zip((a, b), ngrams)]
  rows = [(labels[0], alone[0]), (labels[1], alone[1]),
          ('mix, λ = 0.5', mixed['fixed']['ppl']),
          (f'mix, learned λ = {mixed["learned"]["weights"][0, 0]:.3f}', mixed['learned']['ppl']),
          (f'mix, λ per bin ({DEFAULT_BINS} bins)', mixed['binned']['ppl'])]
  lines = []
  if b.config.workdir != a.config.workdir:
    lines.append(f'mixed with {paths.shown(b.config.workdir)}: {b.name} (λ weighs the first)')
  return lines + table(rows)


def ensemble_lines(models: list, fitted, alone: list[dict], mixed: dict) -> list[str]:
  """K >= 3 models: each numbered, alone, then mixed with equal, learned and binned weights."""
  lines = [f'mixed with {len(models) - 1} more, numbered (weights in this order):']
  lines += [f'  {i}. ' + (f'{model.name} fitted on this corpus (weights by EM on valid)'
                          if model is fitted else
                          f'{paths.shown(model.config.workdir)}: {model.name}')
            for i, model in enumerate(models, 1)]
  rows = [(f'model {i} alone', ppl) for i, ppl in enumerate(alone, 1)]
  rows += [(f'mix, equal weights (1/{len(models)})', mixed['fixed']['ppl']),
           ('mix, learned weights (see below)', mixed['learned']['ppl']),
           (f'mix, weights per bin ({DEFAULT_BINS} bins)', mixed['binned']['ppl'])]
  learned = ' '.join(f'{weight:.3f}' for weight in mixed['learned']['weights'][0])
  return lines + table(rows) + [f'learned weights (EM on valid): {learned}']


def table(rows: list[tuple[str, dict]]) -> list[str]:
  """A row per (name, {split: perplexity}), valid and test in columns."""
  return [f'{"":34} {"valid":>9} {"test":>9}',
          *(f'{name:34} {ppl["valid"]:9.2f} {ppl["test"]:9.2f}' for name, ppl in rows)]


def mix_report(a, corpus: Corpus, others=(), with_trigram: bool = False) -> str:
  """The table printed by this program: A, `others` and DelInt3 fitted on A's corpus (if
  `with_trigram` or there are no others) on the corpus A learned."""
  a.require_language_model()
  if corpus.vocab.fingerprint() != a.vocab.fingerprint():
    raise NoTrainedModelError(f'the corpus gives another vocabulary than '
                              f'{paths.shown(a.config.workdir)} had')
  models = [a, *(checked(a, b) for b in others)]
  fitted = delint3(corpus, a) if with_trigram or not others else None
  models += [fitted] if fitted else []
  log_probs, mixed = mixes(models, corpus)
  alone = [{s: perplexity(lp) for s, lp in model_log_probs.items()}
           for model_log_probs in log_probs]
  lines = [f'{paths.shown(a.config.workdir)}: {a.name}, '
           f'{paths.shown_dataset(a.config.dataset)}, |V| = {corpus.vocab.size:,}']
  if len(models) == 2:
    return '\n'.join(lines + pair_lines(*models, alone, mixed))
  return '\n'.join(lines + ensemble_lines(models, fitted, alone, mixed))


def listed(value: str) -> list[str]:
  """The paths of a comma-separated flag, without blanks around them or empty entries."""
  return [where.strip() for where in value.split(',') if where.strip()]


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  try:
    with interrupting(f'mixing {flags.FLAGS.workdir}'):
      a = load_trained(flags.FLAGS.workdir)
      a.require_language_model()  # Before the corpus is read and anything fitted.
      others = [checked(a, load_trained(where)) for where in listed(flags.FLAGS['with'].value)]
      report = mix_report(a, corpus_of(a, flags.FLAGS.data_dir), others,
                          flags.FLAGS.with_trigram)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  print(report)


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train) or an n-gram '
                      'DIR (nplm ngram --out): model A, whose corpus is read.')
  flags.DEFINE_string('with', '', 'The other models, comma-separated: workdirs or n-gram DIRs '
                      "on A's vocabulary (empty: the paper's interpolated trigram fitted on "
                      "A's corpus). A and one other model make a pair (λ weighs A); more, an "
                      'ensemble.')
  flags.DEFINE_bool('with_trigram', False, "Add the paper's interpolated trigram (DelInt3), "
                    "fitted on A's corpus, as one more model beside those of --with (without "
                    '--with it is the other model anyway).')
  flags.DEFINE_string('data_dir', '', 'TFDS data dir, if not the one the run recorded.')
  flags.mark_flag_as_required('workdir')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
