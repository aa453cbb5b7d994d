r"""nplm's word2vec against gensim's: the same corpus, vocabulary and settings, over several
seeds; embedding scores and training speed per model (CBOW, skip-gram) and output
(hierarchical softmax, negative sampling), and whether the goals are met.

  python -m experiments.benchmarks.word2vec --out=runs/word2vec
  python -m experiments.benchmarks.word2vec --max_words=20000 --epochs=1 --seeds=0 --out=/tmp/w2v
  python -m experiments.benchmarks.word2vec --speed_tokens=5000000 --out=runs/word2vec
  python -m experiments.benchmarks.word2vec --workdirs=runs/mlp9,runs/lstm --out=runs/word2vec

Both train on Brown's training split as nplm's models see it (ids mapped back to words,
`<unk>`, `</p>`, `</text>` included; --max_words: its first N tokens), handed to gensim in
pieces of 10,000 words. nplm trains by word2vec's own update (nplm.training.word2vec_update:
--learning_rate is word2vec's alpha per pair or position at any --batch_size), so a recipe's
settings are gensim's as they stand (gensim_settings; alpha = --learning_rate decaying
linearly to min_alpha = --min_learning_rate; min_count 1: the words handed over are nplm's
vocabulary already; workers = the usable cores).

Each variant trains once per --seeds seed on each side (nplm --seed=s in
OUT/runs/<name>-seed<s>, gensim seed=s), scored by nplm.use.embeddings (gensim's evaluation:
WordSim-353 and SimLex-999 ρ, analogy accuracy and coverage) and timed. Reported: each
figure's mean and spread (max - min) over the seeds, nplm - gensim of the means (analogies in
points), nplm / gensim of the median words/s, and the goals (GOALS, MIN_SPEED_RATIO).

Speed is corpus words × epochs ÷ training seconds: gensim's `train` call (its vocabulary
built untimed); nplm's summary.json train_seconds, the updates only: nplm.training.loop starts
the clock after the first update (the step's compilation) and restarts it after every
checkpoint; validations, the final evaluation and each epoch's subsampling draw (numpy,
before the epoch's first update) are outside it. The words are counted in the share of the
positions the timed updates trained (all but the first update's batch: train_nplm). nplm
runs with TIMED_RUN (no periodic checkpoints; the epoch ends' remain) and, as word vectors do
unless asked, scores no perplexity.

--speed_tokens=N also times each variant once (seed 0, 1 epoch) on prepare.py's generated
corpus of N i.i.d. Zipf words over SPEED_TYPES types (text:DIR in OUT/speed/corpus, prepared
into OUT/speed/tfds; nplm in OUT/runs/<name>-speed) against gensim on the same words (the
train split as nplm's vocabulary decodes it): words/s and their ratio, no scores (Zipf words
mean nothing). --workdirs adds the scores of trained NNLM, LSTM, … runs. Writes
OUT/word2vec.{json,md} (the table: word2vec_report.py).
"""

import shutil
import sys
import time
from pathlib import Path

import gensim
import numpy as np
from absl import app, flags
from absl import logging as absl_logging
from gensim.models import Word2Vec

from experiments.benchmarks import prepare
from experiments.benchmarks.harness import (CorpusNotPrepared, machine_info, report,
                                            require_prepared_brown)
from experiments.benchmarks.word2vec_report import GOALS, MIN_SPEED_RATIO, format_report
from nplm.cli import run_experiment
from nplm.use import embeddings
from nplm.flagfiles import config_from_flagfile
from nplm.config import DATA_FIELDS, Config, ConfigError
from nplm.data.datasets import load_dataset
from nplm.use.trained import NoTrainedModelError, load_trained
from nplm.parallel import usable_cores
from nplm.run_files.summary import RunStatus
from nplm.stop_requests import Interrupted
from nplm.trainer import TrainingDiverged, request_cpu_devices, run
from nplm.training.config_checks import validated

CONFIGS = ('cbow_hs', 'cbow_ns', 'skipgram_hs', 'skipgram_ns')
SENTENCE_WORDS = 10_000  # gensim's MAX_WORDS_IN_BATCH: it cuts longer sentences there.
# What a timed nplm run leaves out: periodic saves.
TIMED_RUN = {'checkpoint_minutes': 0}
SPEED_TYPES = 50_000  # Word types of the generated corpus --speed_tokens times on.
# (figure, where a side's scores hold it): the scores compared.
SCORES = {'wordsim353': ('wordsim353', 'spearman'), 'simlex999': ('simlex999', 'spearman'),
          'analogies': ('analogies', 'accuracy')}


def flagfile_config(name: str, **overrides) -> Config:
  """The Config of the recipe `name` (nplm/recipes/NAME.flags), with `overrides`."""
  return validated(config_from_flagfile(name, **overrides).resolved())


def output_settings(config: Config) -> dict:
  """gensim's hs / negative / ns_exponent for the config's head."""
  if config.head == 'tree' and config.tree == 'huffman':
    return {'hs': 1, 'negative': 0}
  if config.head == 'negative_sampling':
    return {'hs': 0, 'negative': config.num_samples, 'ns_exponent': config.proposal_power}
  raise ConfigError(f'--head={config.head} --tree={config.tree} has no gensim counterpart: '
                    'compare --head=tree --tree=huffman or --head=negative_sampling')


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
          'alpha': config.learning_rate, 'min_alpha': config.min_learning_rate,
          'min_count': 1, 'cbow_mean': 1, 'workers': workers, 'seed': config.seed}


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


def timed_config(config: Config, **changes) -> Config:
  """The nplm run the benchmark times: `config` with `changes`, TIMED_RUN's knobs set."""
  return validated(config.replace(**TIMED_RUN, **changes))


def refuse_existing(configs: list[Config]) -> None:
  """Every run is timed from its start: a workdir already there is refused before any
  training, so that a long benchmark does not fail half-way."""
  for config in configs:
    if Path(config.workdir).exists():
      raise ConfigError(f'{config.workdir} exists: its run would not be timed now; delete '
                        'it or choose another --out')


def train_nplm(config: Config, corpus, words: int) -> tuple:
  """(nplm's vectors, its timing) of a fresh run in config.workdir on `words` corpus words:
  words × epochs ÷ train_seconds, of the share of them trained by the timed updates (all
  but the first: train_seconds and the summary's examples both start after it)."""
  refuse_existing([config])
  try:
    summary = run(config, corpus)
  except Interrupted:  # While building or compiling.
    summary = {'status': RunStatus.INTERRUPTED}
  if summary['status'] == RunStatus.INTERRUPTED:  # Resumed, it would not be timed whole.
    shutil.rmtree(config.workdir, ignore_errors=True)
    raise KeyboardInterrupt(f'its unfinished run {config.workdir} is removed; runs are timed '
                            'from their start: rerun with a new --out')
  keyed = embeddings.keyed_vectors(embeddings.of_workdir(config.workdir))
  seconds = summary['train_seconds']
  timed = summary['train_examples_per_second'] * seconds  # Positions the clock saw.
  share = timed / (timed + config.batch_size)
  return keyed, timing(seconds, words, summary['epochs'], share)


def check_same_words(keyed, corpus) -> None:
  """Scores (and speeds) over different words would not compare."""
  if set(keyed.index_to_key) != {w for w, n in zip(corpus.vocab.words, corpus.vocab.counts)
                                 if n > 0}:
    raise RuntimeError('gensim kept other words than nplm\'s vocabulary')


def timing(seconds: float, words: int, epochs: int, share: float = 1.0) -> dict:
  """Corpus words × epochs ÷ seconds, of the `share` of the words trained in `seconds`."""
  return {'seconds': seconds, 'epochs': epochs, 'timed_share': share,
          'words_per_second': share * words * epochs / max(seconds, 1e-9)}


def both_sides(config: Config, corpus, words: list[str], workers: int) -> dict:
  """{'nplm': (vectors, timing), 'gensim': …}: `config`'s run (its workdir not yet there) and
  gensim's at its settings, on the same words."""
  vectors, nplm_timing = train_nplm(config, corpus, len(words))
  gensim_vectors, seconds = train_gensim(words, gensim_settings(config, workers))
  check_same_words(gensim_vectors, corpus)
  return {'nplm': (vectors, nplm_timing),
          'gensim': (gensim_vectors, timing(seconds, len(words), config.epochs))}


def seeded(config: Config, seed: int) -> Config:
  """The timed run of `config` with `seed`, in its workdir suffixed -seed<seed>."""
  return timed_config(config, seed=seed, workdir=f'{config.workdir}-seed{seed}')


def seed_runs(config: Config, corpus, words: list[str], workers: int, seed: int) -> dict:
  """{'nplm': …, 'gensim': …}: the variant trained, timed and scored by each with `seed`."""
  ours = seeded(config, seed)
  return {who: {'seed': seed, **took, 'vocab_size': len(keyed.index_to_key),
                'scores': embeddings.benchmark_scores(keyed)}
          for who, (keyed, took) in both_sides(ours, corpus, words, workers).items()}


def figures(entry: dict) -> dict:
  """What is compared of one trained side: both ρ, analogy accuracy, words/s."""
  return {**{name: entry['scores'][score][key] for name, (score, key) in SCORES.items()},
          'words_per_second': entry['words_per_second']}


def over_seeds(entries: list[dict]) -> dict:
  """Each figure's mean, spread (max - min) and median over the seeds' entries; None where
  some seed's is undefined (a ρ of too few pairs, no analogy answered)."""
  by_figure = {name: [figures(entry)[name] for entry in entries] for name in figures(entries[0])}
  return {name: (dict.fromkeys(('mean', 'spread', 'median')) if None in values else
                 {'mean': float(np.mean(values)), 'spread': float(max(values) - min(values)),
                  'median': float(np.median(values))})
          for name, values in by_figure.items()}


def differences(nplm: dict, gensim_side: dict) -> dict:
  """nplm - gensim of the means (ρ; analogy accuracy in points), and nplm / gensim of the
  median words/s (over_seeds' summaries of each side)."""
  def minus(name: str, scale: float = 1.0):
    ours, theirs = nplm[name]['mean'], gensim_side[name]['mean']
    return None if ours is None or theirs is None else scale * (ours - theirs)
  return {'wordsim353': minus('wordsim353'), 'simlex999': minus('simlex999'),
          'analogies_points': minus('analogies', 100.0),
          'speed_ratio': (nplm['words_per_second']['median']
                          / gensim_side['words_per_second']['median'])}


def verdicts(difference: dict) -> dict:
  """Each goal met (True), not met (False), or not measurable (None: a score undefined)."""
  met = {name: None if difference[name] is None else abs(difference[name]) <= bound
         for name, bound in GOALS.items()}
  return {**met, 'speed_ratio': difference['speed_ratio'] >= MIN_SPEED_RATIO}


def compare(config: Config, corpus, words: list[str], workers: int, seeds) -> dict:
  """One configuration trained by nplm and by gensim on the same words, once per seed."""
  runs = [seed_runs(config, corpus, words, workers, seed) for seed in seeds]
  sides = {who: over_seeds([run[who] for run in runs]) for who in ('nplm', 'gensim')}
  difference = differences(sides['nplm'], sides['gensim'])
  settings = gensim_settings(config, workers)
  del settings['seed']  # Each run's own (seeds).
  return {'settings': settings, 'seeds': list(seeds),
          'runs': {who: [run[who] for run in runs] for who in ('nplm', 'gensim')},
          'over_seeds': sides, 'nplm_minus_gensim': difference,
          'goals_met': verdicts(difference)}


def measure_speed(configs: dict, corpus, generated: dict, workers: int) -> dict:
  """The speed section: each of `configs` (their workdirs not yet there, seed 0) and gensim
  on `corpus`, the generated one (`generated`: its tokens and types); words/s and ratios."""
  refuse_existing(list(configs.values()))
  words, speeds = corpus.vocab.decode(corpus.splits['train']), {}
  for name, config in configs.items():
    sides = {who: took for who, (_, took) in
             both_sides(timed_config(config, seed=0), corpus, words, workers).items()}
    ratio = sides['nplm']['words_per_second'] / sides['gensim']['words_per_second']
    speeds[name] = {**sides, 'speed_ratio': ratio, 'speed_ratio_met': ratio >= MIN_SPEED_RATIO}
  return {**generated, 'train_words': len(words), 'vocab_size': corpus.vocab.size,
          'configs': speeds}


def workdir_scores(workdir: str) -> dict:
  trained = load_trained(workdir)
  keyed = embeddings.keyed_vectors(embeddings.of_trained(trained))
  return {'model': trained.config.model, 'head': trained.config.head,
          'dim': trained.config.feature_size, 'vocab_size': trained.vocab.size,
          'scores': embeddings.benchmark_scores(keyed)}


def measure(configs: dict, corpus, seeds=(0,), workdirs=(), workers: int = 0) -> dict:
  """Everything the program reports but the speed section, as a dict: `configs` by name
  (their workdirs, suffixed -seed<s>, not yet there), trained on `corpus`'s training split
  once per seed; `workdirs`' vectors scored beside them."""
  refuse_existing([seeded(config, seed) for config in configs.values() for seed in seeds])
  words = corpus.vocab.decode(corpus.splits['train'])
  workers = workers or usable_cores()
  return {'machine': {**machine_info(), 'usable_cores': usable_cores()},
          'gensim': gensim.__version__, 'train_words': len(words),
          'vocab_size': corpus.vocab.size, 'workers': workers,
          'configs': {name: compare(config, corpus, words, workers, seeds)
                      for name, config in configs.items()},
          'workdirs': {str(w): workdir_scores(w) for w in workdirs}}


def same_data(configs: dict) -> dict:
  """`configs`, which must read the same data, so that gensim's one corpus is every run's."""
  if len({tuple(getattr(c, f) for f in DATA_FIELDS) for c in configs.values()}) > 1:
    raise ConfigError(f'the flagfiles {", ".join(configs)} read different data (--dataset, '
                      '--unk_max_count, …): compare them in separate runs')
  return configs


def flagfile_configs(names: list[str], out: Path, data_dir: str, max_words: int,
                     epochs: int, chunk: int = -1) -> dict:
  """The configs to compare, by flagfile name, each run in OUT/runs/<name>-seed<s>."""
  if not names:
    raise ConfigError(f'--configs names no flagfile; e.g. {",".join(CONFIGS)}')
  # A slice validates on a quarter as many tokens: a look stays quick.
  data = {'data_dir': data_dir, 'train_tokens': max_words, 'valid_tokens': max_words // 4}
  return same_data({name: flagfile_config(name, workdir=str(out / 'runs' / name), **data,
                                          **({'epochs': epochs} if epochs else {}),
                                          **chunk_override(chunk))
                    for name in names})


def chunk_override(chunk: int) -> dict:
  """--chunk_positions for nplm's runs: none where -1 (the recipes')."""
  return {} if chunk == -1 else {'chunk_positions': chunk}


def speed_configs(names: list[str], out: Path, tokens: int, types: int = SPEED_TYPES,
                  chunk: int = -1) -> tuple[dict, dict]:
  """(the speed section's configs by flagfile name, 1 epoch, each run in
  OUT/runs/<name>-speed; the generated corpus's tokens and types): the corpus is written into
  OUT/speed/corpus unless there already."""
  corpus_dir = out / 'speed' / 'corpus'
  generated = prepare.generated_corpus(corpus_dir, out / 'speed' / 'corpus.json', tokens, types)
  data = {'dataset': f'text:{corpus_dir}', 'data_dir': str(out / 'speed' / 'tfds')}
  configs = {name: flagfile_config(name, workdir=str(out / 'runs' / f'{name}-speed'), epochs=1,
                                   **data, **chunk_override(chunk))
             for name in names}
  return same_data(configs), generated['wanted']


def parse_seeds(values: list[str]) -> tuple[int, ...]:
  """--seeds as distinct integers, or a one-line ConfigError."""
  try:
    seeds = tuple(int(value) for value in values)
  except ValueError:
    seeds = ()
  if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
    raise ConfigError(f'--seeds must be distinct integers from 0, e.g. 0,1,2; got '
                      f'{",".join(values)!r}')
  return seeds


def define_flags() -> None:
  """Only when run as a program: absl refuses a flag defined twice in one process."""
  flags.DEFINE_string('data_dir', '', 'TFDS data dir of the prepared corpus (empty: TFDS '
                      'default).')
  flags.DEFINE_list('configs', list(CONFIGS), 'Recipes (nplm/recipes/NAME.flags) to '
                    'compare.')
  flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds each variant is trained with, on each '
                    'side.')
  flags.DEFINE_integer('epochs', 0, 'Epochs for both (0: the flagfiles\').')
  flags.DEFINE_integer('chunk_positions', -1, "nplm's --chunk_positions (-1: the recipes'; 0: "
                       'the largest chunk that trains stably, for an accelerator).')
  flags.DEFINE_integer('max_words', 0, 'Train on the first N training tokens only (0: all).')
  flags.DEFINE_integer('speed_tokens', 0, 'Also time each variant for 1 epoch on N '
                       'generated Zipf tokens (0: not).', lower_bound=0)
  flags.DEFINE_list('workdirs', [], 'Trained nplm runs (NNLM, LSTM, …) to score beside them.')
  flags.DEFINE_string('out', None, 'Directory for word2vec.{json,md}, runs/ and speed/.',
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
  out = Path(FLAGS.out)
  absl_logging.set_verbosity(absl_logging.WARNING)  # TFDS's INFO lines would bury the table.
  try:
    seeds = parse_seeds(FLAGS.seeds)
    make_out_dir(FLAGS.out)
    require_prepared_brown(FLAGS.data_dir)
    configs = flagfile_configs(FLAGS.configs, out, FLAGS.data_dir, FLAGS.max_words,
                               FLAGS.epochs, FLAGS.chunk_positions)
    request_cpu_devices(next(iter(configs.values())))  # As nplm train does.
    speed, generated = (speed_configs(FLAGS.configs, out, FLAGS.speed_tokens,
                                      chunk=FLAGS.chunk_positions)
                        if FLAGS.speed_tokens else ({}, {}))
    refuse_existing(list(speed.values()))  # Before the seeds' runs, not after them.
    speed_corpus = load_dataset(next(iter(speed.values()))) if speed else None
    result = measure(configs, load_dataset(next(iter(configs.values()))), seeds,
                     FLAGS.workdirs)
    if speed:
      result['speed'] = measure_speed(speed, speed_corpus, generated, result['workers'])
  except (CorpusNotPrepared, ConfigError, NoTrainedModelError, TrainingDiverged) as error:
    print(f'error: {error}', file=sys.stderr)
    sys.exit(2)
  report(result, format_report, str(out / 'word2vec'))


if __name__ == '__main__':
  define_flags()
  run_experiment(main)
