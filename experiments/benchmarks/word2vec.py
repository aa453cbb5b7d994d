r"""nplm's word2vec against gensim's: the same corpus, vocabulary and settings; embedding scores
and training speed, per model (CBOW, skip-gram) and output (hierarchical softmax, negative
sampling).

  python -m experiments.benchmarks.word2vec --out=runs/word2vec
  python -m experiments.benchmarks.word2vec --max_words=20000 --epochs=1 --out=/tmp/w2v
  python -m experiments.benchmarks.word2vec --workdirs=runs/mlp9,runs/lstm --out=runs/word2vec

Both train on Brown's training split as nplm's models see it (ids mapped back to words,
`<unk>`, `</p>` and `</text>` included; --max_words: its first N tokens, vocabulary and all,
for a quick look), handed to gensim in pieces of 10,000 words (longer sentences gensim cuts).
The settings come from the recipes (nplm/recipes/<name>.flags), translated once
(gensim_settings): sg, hs with negative 0 or hs 0 with negative k, vector_size, window,
sample, epochs, ns_exponent, the learning rate (per example: per_example_rate) and its linear
decay, workers = the usable cores; gensim also trains at its own default rate (alpha 0.025
to 0.0001), as its users run it;
min_count 1, since the words handed over are nplm's vocabulary already (rarer ones read as
`<unk>`), so both keep the same words. Training speed is corpus words × epochs ÷ training
seconds: gensim's `train` call; nplm's updates (summary.json's train_seconds, compilation,
checkpoints and its exact evaluation excluded). Scores: nplm.use.embeddings (gensim's own
evaluation) on each side's vectors. --workdirs adds the same scores of trained NNLM, LSTM, …
runs. Writes OUT/word2vec.{json,md}; nplm's runs stay in OUT/runs/<name>.
"""

import os
import sys
import time
from pathlib import Path

import gensim
from absl import app, flags
from absl import logging as absl_logging
from gensim.models import Word2Vec

from experiments.benchmarks.harness import (CorpusNotPrepared, machine_info, machine_line,
                                            report, require_prepared_brown, table_lines)
from nplm.use import embeddings
from nplm.flagfiles import config_from_flagfile
from nplm.config import DATA_FIELDS, Config, ConfigError
from nplm.data.datasets import load_dataset
from nplm.use.trained import NoTrainedModelError, load_trained
from nplm.trainer import run

CONFIGS = ('cbow_hs', 'cbow_ns', 'skipgram_hs', 'skipgram_ns')
SENTENCE_WORDS = 10_000  # gensim's MAX_WORDS_IN_BATCH: it cuts longer sentences there.
LINEAR_FLOOR = 1e-4  # nplm's linear schedule ends at ε0·1e-4 (the word2vec tool's floor).
SCORES = ('wordsim353', 'simlex999', 'analogies')
# Word2Vec's own alpha and min_alpha: the peer as its users run it, beside the run at nplm's
# translated rate (a rate tuned for minibatches can starve gensim, or nplm the other way).
GENSIM_DEFAULT_RATE = {'alpha': 0.025, 'min_alpha': 0.0001}


def usable_cores() -> int:
  return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()


def flagfile_config(name: str, **overrides) -> Config:
  """The Config of the recipe `name` (nplm/recipes/NAME.flags), with `overrides`."""
  return config_from_flagfile(name, **overrides).resolved().validate()


def output_settings(config: Config) -> dict:
  """gensim's hs / negative / ns_exponent for the config's head."""
  if config.head == 'tree' and config.tree == 'huffman':
    return {'hs': 1, 'negative': 0}
  if config.head == 'negative_sampling':
    return {'hs': 0, 'negative': config.num_samples, 'ns_exponent': config.proposal_power}
  raise ConfigError(f'--head={config.head} has no gensim counterpart: word2vec trains '
                    'with --head=tree --tree=huffman or --head=negative_sampling')


def per_example_rate(config: Config) -> float:
  """gensim's alpha for nplm's --learning_rate: gensim takes a step of alpha per example,
  nplm one of ε on the mean loss of an update's examples, ε / examples each: B positions
  (CBOW), or their (w_t, w_{t+j}) pairs (skip-gram), c + 1 per position on average with the
  radius drawn from 1 … c."""
  pairs_per_position = config.window + 1 if config.model == 'skipgram' else 1
  return config.learning_rate / (config.batch_size * pairs_per_position)


def gensim_settings(config: Config, workers: int) -> dict:
  """Word2Vec's arguments for the run `config` describes (a cbow or skipgram model)."""
  if config.model not in ('cbow', 'skipgram'):
    raise ConfigError(f'--model={config.model} is not a word2vec model (cbow, skipgram)')
  if config.lr_schedule != 'linear':
    raise ConfigError('gensim decays its rate linearly: the nplm run needs '
                      '--lr_schedule=linear')
  return {'sg': int(config.model == 'skipgram'), **output_settings(config),
          'vector_size': config.feature_size, 'window': config.window,
          'sample': config.subsample, 'epochs': config.epochs,
          'alpha': per_example_rate(config),
          'min_alpha': per_example_rate(config) * LINEAR_FLOOR,
          'min_count': 1, 'cbow_mean': 1, 'workers': workers,
          'seed': config.seed}


def sentences_of(words: list[str]) -> list[list[str]]:
  """The token stream in pieces gensim trains on whole."""
  return [words[start:start + SENTENCE_WORDS] for start in range(0, len(words), SENTENCE_WORDS)]


def train_gensim(words: list[str], settings: dict) -> tuple:
  """(gensim's vectors, its training seconds): the vocabulary is built untimed."""
  model = Word2Vec(**settings)
  sentences = sentences_of(words)
  model.build_vocab(sentences)
  start = time.perf_counter()
  model.train(sentences, total_examples=model.corpus_count, epochs=model.epochs)
  return model.wv, time.perf_counter() - start


def train_nplm(config: Config, corpus) -> tuple:
  """(nplm's vectors, its training seconds, epochs done) of a fresh run in config.workdir."""
  if Path(config.workdir).exists():
    raise ConfigError(f'{config.workdir} exists: its run would not be timed now; delete it '
                      'or choose another --out')
  summary = run(config, corpus)
  keyed = embeddings.keyed_vectors(embeddings.of_workdir(config.workdir))
  return keyed, summary['train_seconds'], summary['epochs']


def side(keyed, seconds: float, words: int, epochs: int) -> dict:
  return {'scores': embeddings.benchmark_scores(keyed), 'seconds': seconds, 'epochs': epochs,
          'words_per_second': words * epochs / max(seconds, 1e-9),
          'vocab_size': len(keyed.index_to_key)}


def headline(scores: dict) -> dict:
  """The three numbers compared: both Spearman ρ and the analogy accuracy."""
  return {'wordsim353': scores['wordsim353']['spearman'],
          'simlex999': scores['simlex999']['spearman'],
          'analogies': scores['analogies']['accuracy']}


def ratios(nplm: dict, gensim_side: dict) -> dict:
  """nplm / gensim of each score and of the speed (None where either is undefined or 0)."""
  ours, theirs = headline(nplm['scores']), headline(gensim_side['scores'])
  ours['words_per_second'] = nplm['words_per_second']
  theirs['words_per_second'] = gensim_side['words_per_second']
  return {name: ours[name] / theirs[name] if ours[name] is not None and theirs[name] else None
          for name in ours}


def compare(config: Config, corpus, words: list[str], workers: int) -> dict:
  """One configuration trained by gensim and by nplm on the same words."""
  settings = gensim_settings(config, workers)
  nplm_vectors, nplm_seconds, nplm_epochs = train_nplm(config, corpus)
  gensim_vectors, gensim_seconds = train_gensim(words, settings)
  shared = set(gensim_vectors.index_to_key) == {
      w for w, n in zip(corpus.vocab.words, corpus.vocab.counts) if n > 0}
  if not shared:  # Scores over different words would not compare.
    raise RuntimeError('gensim kept other words than nplm\'s vocabulary')
  default_vectors, default_seconds = train_gensim(words, {**settings, **GENSIM_DEFAULT_RATE})
  sides = {'gensim': side(gensim_vectors, gensim_seconds, len(words), config.epochs),
           'gensim_default_rate': side(default_vectors, default_seconds, len(words),
                                       config.epochs),
           'nplm': side(nplm_vectors, nplm_seconds, len(words), nplm_epochs)}
  return {'settings': settings, 'nplm_learning_rate': config.learning_rate,
          'nplm_batch_size': config.batch_size, **sides,
          'nplm_over_gensim': ratios(sides['nplm'], sides['gensim']),
          'nplm_over_gensim_default_rate': ratios(sides['nplm'],
                                                  sides['gensim_default_rate'])}


def workdir_scores(workdir: str) -> dict:
  trained = load_trained(workdir)
  keyed = embeddings.keyed_vectors(embeddings.of_trained(trained))
  return {'model': trained.config.model, 'head': trained.config.head,
          'dim': trained.config.feature_size, 'vocab_size': trained.vocab.size,
          'scores': embeddings.benchmark_scores(keyed)}


def measure(configs: dict, corpus, workdirs=(), workers: int = 0) -> dict:
  """Everything the program reports, as a dict: `configs` by name (their workdirs not yet
  there), trained on `corpus`'s training split; `workdirs`' vectors scored beside them."""
  words = corpus.vocab.decode(corpus.splits['train'])
  workers = workers or usable_cores()
  return {'machine': {**machine_info(), 'usable_cores': usable_cores()},
          'gensim': gensim.__version__, 'train_words': len(words),
          'vocab_size': corpus.vocab.size,
          'configs': {name: compare(config, corpus, words, workers)
                      for name, config in configs.items()},
          'workdirs': {str(w): workdir_scores(w) for w in workdirs}}


def _number(value, percent: bool = False) -> str:
  if value is None:
    return 'n/a'
  return f'{100 * value:.1f}%' if percent else f'{value:.3f}'


def score_cells(scores: dict) -> list[str]:
  analogies = scores['analogies']
  return [_number(scores['wordsim353']['spearman']), _number(scores['simlex999']['spearman']),
          f'{_number(analogies["accuracy"], True)} ({_number(analogies["coverage"], True)})']


def format_report(result: dict, markdown: bool = False) -> str:
  m = result['machine']
  lines = [machine_line(m) + f'; {m["usable_cores"]} cores usable, gensim {result["gensim"]}',
           f'Brown training split: {result["train_words"]:,} words, |V| = '
           f'{result["vocab_size"]:,}. Analogies: accuracy (coverage).', '']
  rows = [['config', 'trained by', 'WordSim-353 ρ', 'SimLex-999 ρ', 'analogies', 'words/s']]
  default_rate = f'gensim α {GENSIM_DEFAULT_RATE["alpha"]:g}'
  for name, entry in result['configs'].items():
    for who, label in (('gensim', 'gensim'), ('gensim_default_rate', default_rate),
                       ('nplm', 'nplm')):
      rows.append([name, label, *score_cells(entry[who]['scores']),
                   f'{entry[who]["words_per_second"]:,.0f}'])
    for ratio_of, label in (('nplm_over_gensim', 'nplm / gensim'),
                            ('nplm_over_gensim_default_rate', f'nplm / {default_rate}')):
      ratio = entry[ratio_of]
      rows.append([name, label, *(_number(ratio[k]) for k in SCORES),
                   f'{ratio["words_per_second"]:.2f}×'])
  for workdir, entry in result['workdirs'].items():
    rows.append([f'{entry["model"]} ({entry["head"]}, m={entry["dim"]})', workdir,
                 *score_cells(entry['scores']), ''])
  lines += table_lines(rows, markdown)
  scores = next((entry['gensim']['scores'] for entry in result['configs'].values()), None)
  if scores:  # The words are nplm's on both sides: the same pairs and questions count.
    lines += ['', 'Coverage: ' + ', '.join(
        f'{title} {scores[name]["covered"]:,} of {scores[name]["pairs"]:,} pairs'
        for name, title in (('wordsim353', 'WordSim-353'), ('simlex999', 'SimLex-999')))
        + f', analogies {scores["analogies"]["answered"]:,} of '
        f'{scores["analogies"]["questions"]:,} questions.']
  return '\n'.join(lines) + '\n'


def flagfile_configs(names: list[str], out: Path, data_dir: str, max_words: int,
                     epochs: int) -> dict:
  """The configs to compare, by flagfile name, each run in OUT/runs/<name>; they must read
  the same data, so that gensim's one corpus is every run's."""
  if not names:
    raise ConfigError(f'--configs names no flagfile; e.g. {",".join(CONFIGS)}')
  # A slice validates on a quarter as many tokens: a look stays quick.
  data = {'data_dir': data_dir, 'train_tokens': max_words, 'valid_tokens': max_words // 4}
  configs = {name: flagfile_config(name, workdir=str(out / 'runs' / name), **data,
                                   **({'epochs': epochs} if epochs else {}))
             for name in names}
  if len({tuple(getattr(c, f) for f in DATA_FIELDS) for c in configs.values()}) > 1:
    raise ConfigError(f'the flagfiles {", ".join(names)} read different data (--dataset, '
                      '--unk_max_count, …): compare them in separate runs')
  return configs


def define_flags() -> None:
  """Only when run as a program: absl refuses a flag defined twice in one process."""
  flags.DEFINE_string('data_dir', '', 'TFDS data dir of the prepared corpus (empty: TFDS '
                      'default).')
  flags.DEFINE_list('configs', list(CONFIGS), 'Recipes (nplm/recipes/NAME.flags) to '
                    'compare.')
  flags.DEFINE_integer('epochs', 0, 'Epochs for both (0: the flagfiles\').')
  flags.DEFINE_integer('max_words', 0, 'Train on the first N training tokens only (0: all).')
  flags.DEFINE_list('workdirs', [], 'Trained nplm runs (NNLM, LSTM, …) to score beside them.')
  flags.DEFINE_string('out', None, 'Directory for word2vec.{json,md} and runs/<config>.',
                      required=True)


def make_out_dir(out: str) -> None:
  """--out, made now: a report that cannot be written fails before the training."""
  try:
    Path(out).mkdir(parents=True, exist_ok=True)
  except OSError as error:
    raise ConfigError(f'cannot write into --out={out} ({error.strerror or error})') from error


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
  FLAGS = flags.FLAGS
  absl_logging.set_verbosity(absl_logging.WARNING)  # TFDS's INFO lines would bury the table.
  try:
    make_out_dir(FLAGS.out)
    require_prepared_brown(FLAGS.data_dir)
    configs = flagfile_configs(FLAGS.configs, Path(FLAGS.out), FLAGS.data_dir,
                               FLAGS.max_words, FLAGS.epochs)
    result = measure(configs, load_dataset(next(iter(configs.values()))), FLAGS.workdirs)
  except (CorpusNotPrepared, ConfigError, NoTrainedModelError) as error:
    print(f'error: {error}', file=sys.stderr)
    sys.exit(2)
  report(result, format_report, str(Path(FLAGS.out) / 'word2vec'))


if __name__ == '__main__':
  define_flags()
  app.run(main)
