r"""Any trained network mixed with the paper's interpolated trigram, three ways.

  nplm mix --workdir=runs/mlp9              # a trained run, any model, head and dataset
  python -m experiments.mix --workdir=runs/mlp9

Prints the exact valid and test perplexities of the network alone, of the trigram (DelInt3,
weights by EM on valid) alone, and of p = λ p_network + (1 - λ) p_trigram with λ = 0.5 (the
paper's "mix"), one λ learned on valid, and one λ per context-frequency bin learned on valid.
The corpus is the one the run was trained on (its data settings are read from run.json).
"""

from absl import flags

from nplm import cli, paths
from nplm.data.acquire import CorpusNotFoundError
from nplm.data.corpus import Corpus
from nplm.data.datasets import load_dataset
from nplm.errors import ConfigError
from nplm.ngram import InterpolatedTrigram, perplexity
from nplm.use.trained import NoTrainedModelError, TrainedModel, load_trained
from nplm.stop_requests import Interrupted, interrupting


def corpus_of(network: TrainedModel, data_dir: str = '') -> Corpus:
  """The corpus the network was trained on (its recorded data settings, at the absolute
  location run.json records; its prepared copy in `data_dir` if given), refused in one line
  if it is gone or no longer the data the network was trained on."""
  config = network.config.resolved()
  if data_dir:
    config = config.replace(data_dir=paths.absolute(data_dir))
  workdir, dataset = paths.shown(network.config.workdir), paths.shown_dataset(config.dataset)
  try:
    corpus = load_dataset(config)
  except CorpusNotFoundError as error:
    raise ConfigError(f'{workdir} was trained on --dataset={dataset}, which cannot be '
                      f'read now ({error}); mix reads the data a network was trained on') from None
  if network.data_fingerprint not in (None, corpus.fingerprint):
    raise ConfigError(f'--dataset={dataset} holds other data than {workdir} was '
                      'trained on (its fingerprint differs from the one in run.json: the files '
                      'changed since); mix reads the data a network was trained on')
  return corpus


def mix_report(network: TrainedModel, corpus: Corpus) -> str:
  """The table printed by this program, for a trained network and the corpus it learned."""
  config = network.config
  if corpus.vocab.fingerprint() != network.vocab.fingerprint():
    raise NoTrainedModelError(f'the corpus gives another vocabulary than '
                              f'{paths.shown(config.workdir)} had')
  splits = {s: corpus.splits[s] for s in ('valid', 'test')}
  boundary = corpus.boundary_id
  trigram = InterpolatedTrigram.fit(corpus.splits['train'], splits['valid'], corpus.vocab.size,
                                    boundary)
  network_log_probs = {s: network.split_log_probs(ids) for s, ids in splits.items()}
  mixes = trigram.mix_with(network_log_probs, splits)
  rows = [('network alone', {s: perplexity(lp) for s, lp in network_log_probs.items()}),
          ('DelInt3 alone', {s: perplexity(trigram.log_prob_split(ids))
                             for s, ids in splits.items()}),
          ('mix, λ = 0.5', mixes['fixed']['ppl']),
          (f'mix, learned λ = {mixes["learned"]["weights"][0, 0]:.3f}', mixes['learned']['ppl']),
          (f'mix, λ per bin ({trigram.num_bins} bins)', mixes['binned']['ppl'])]
  lines = [f'{paths.shown(config.workdir)}: {config.model}, --head={config.head}, '
           f'{paths.shown_dataset(config.dataset)}, '
           f'|V| = {corpus.vocab.size:,}',
           f'{"":34} {"valid":>9} {"test":>9}']
  lines += [f'{name:34} {ppl["valid"]:9.2f} {ppl["test"]:9.2f}' for name, ppl in rows]
  return '\n'.join(lines)


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  try:
    with interrupting(f'mixing {flags.FLAGS.workdir}'):
      network = load_trained(flags.FLAGS.workdir)
      network.require_language_model()  # Before the corpus is read and the trigram fitted.
      report = mix_report(network, corpus_of(network, flags.FLAGS.data_dir))
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  print(report)


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train).')
  flags.DEFINE_string('data_dir', '', 'TFDS data dir, if not the one the run recorded.')
  flags.mark_flag_as_required('workdir')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
