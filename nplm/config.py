"""The configuration of one run: every knob, its group, its default and what it means.

The trainer's flags (`nplm train`, nplm/cli) are generated from this dataclass, so a field
added here is a command-line flag there, with its help text, under its group. The lists of
fields that play a part (which resume, which are per model, which name the data) are all
derived from the groups, below the class.
"""

import dataclasses
from typing import Any

from nplm import heads, models, paths
from nplm.errors import ConfigError

__all__ = ['Config', 'ConfigError']


# The groups of fields, in the order --help shows them. What a group is for decides what a
# change to one of its fields means: a run resumes, and a finished run is reused, across
# changes to run bounds, observation and devices (and to where the data lies); models trained
# together (nplm.trainer.run given a list) differ only in their per-model hyperparameters.
DATA = 'data'
MODEL = 'model'
HEAD = 'head'
OPTIMIZER = 'optimizer'
RUN_BOUNDS = 'run bounds'
OBSERVATION = 'observation'
DEVICES = 'devices'
PER_MODEL = 'per-model hyperparameters'
GROUPS = (DATA, MODEL, HEAD, OPTIMIZER, RUN_BOUNDS, OBSERVATION, DEVICES, PER_MODEL)
GROUP_HELP = {
    DATA: 'which text, how it is cut into tokens and splits, and the vocabulary',
    MODEL: 'context -> hidden (Bengio et al. 2003 Eq. 1 up to its output layer; RNNs)',
    HEAD: 'hidden -> training loss | exact log p',
    OPTIMIZER: 'how the updates are computed',
    RUN_BOUNDS: 'when training stops (a run resumes with other values)',
    OBSERVATION: 'what is recorded, and where (no effect on the numbers)',
    DEVICES: 'where the run computes (no effect on the numbers)',
    PER_MODEL: 'may differ between models trained together',
}
# Roles of some data fields: where the data lies (no effect on the numbers), how the text
# is cut into splits.
LOCATION = 'location'
SPLITS = 'splits'


# --eval_splits=auto scores the train split up to this many tokens: a pass over it costs an
# epoch's forward passes. Brown's 800k, PTB's 930k and WikiText-2's 2.1M are scored, as Table
# 1 reports train perplexity; WikiText-103's 103M is not (hours on a CPU, and no one reports it).
AUTO_TRAIN_TOKENS = 3_000_000


def _knob(group: str, default: Any, help_text: str, role: str = '') -> Any:
  """A config field with its group and help text (the flag `--<name>` shows them)."""
  return dataclasses.field(default=default,
                           metadata={'help': help_text, 'group': group, 'role': role})


@dataclasses.dataclass(frozen=True)
class Config:
  # The groups' fields in the order --help shows them; a flagfile sets any of them.
  dataset: str = _knob(DATA, 'brown', "The corpus: brown (the paper's), text:DIR (train.txt, "
                       'valid.txt, test.txt), text:FILE (cut by lines) or '
                       'tfds:NAME[/CONFIG][:FEATURE] (a TFDS text dataset).')
  tokens: str = _knob(DATA, 'words', "words (whitespace-separated; Brown's words) or chars "
                      '(every character a token, the space too; reports bits per character).')
  tokenizer: str = _knob(DATA, 'whitespace', 'text:, tfds: words cut by whitespace (PTB, '
                         "WikiText come tokenized), nltk (NLTK's: punctuation apart), or "
                         'subwords learned from the training split by SentencePiece: bpe or '
                         'unigram (summaries add per-word perplexity).')
  lowercase: bool = _knob(DATA, False, 'text:, tfds: lowercase the text before cutting it.')
  subword_vocab_size: int = _knob(DATA, 8000, '--tokenizer=bpe, unigram: the subwords '
                                  'SentencePiece learns (fewer if the text has fewer).')
  data_dir: str = _knob(DATA, '', 'TFDS data dir for the prepared corpus (empty: TFDS '
                        'default).', role=LOCATION)
  corpus_dir: str = _knob(DATA, '', 'Directory of the 500 Brown files ca01 … cr09 (empty: '
                          'search).', role=LOCATION)
  unk_max_count: int = _knob(DATA, -1, 'Training-split tokens seen at most this often become '
                             "<unk> (-1: the dataset's default: 3 for brown as the paper; for text: and "
                             "tfds: 0, every type kept, where the training text has its own <unk> "
                             '(PTB, WikiText), else 1, so that <unk> is trained).')
  max_vocab_size: int = _knob(DATA, 0, 'Keep at most this many ids, <unk> and the special '
                              'tokens included: the most frequent (ties by the token); 0 = '
                              'no bound.')
  train_tokens: int = _knob(DATA, 0, "brown: the first this-many tokens train (0: the paper's "
                            '800,000); text:FILE: the lines of the first this-many.',
                            role=SPLITS)
  valid_tokens: int = _knob(DATA, 0, 'The next this-many validate (0: brown 200,000; '
                            'text:FILE by --split_fractions); the rest is the test split.',
                            role=SPLITS)
  split_fractions: str = _knob(DATA, '0.8,0.1,0.1', 'text:FILE: the train, valid, test shares '
                               'of its lines (unless --train_tokens).', role=SPLITS)
  tfds_splits: str = _knob(DATA, 'train,validation,test', 'tfds: the TFDS splits read as '
                           'train, valid and test (slices allowed: '
                           'train[:95%],train[95%:],test).', role=SPLITS)

  model: str = _knob(MODEL, 'nnlm', f'{", ".join(models.MODELS)} (nplm.models), or '
                     'module.path:Name, a model class of your own with their interface.')
  order: int = _knob(MODEL, 5, 'nnlm, transformer: n, the model predicts w_t from the n-1 '
                     'previous words.')
  feature_size: int = _knob(MODEL, 30, 'm: size of each word feature vector C(w) (the '
                            'embedding).')
  hidden_size: int = _knob(MODEL, 100, 'h: hidden units (nnlm: tanh units, 0 = none, needs '
                           '--direct; recurrent: the state of each layer; transformer: the '
                           'feed-forward width).')
  direct: bool = _knob(MODEL, False, 'nnlm: direct connections W x from the word features to '
                       'the output.')
  num_layers: int = _knob(MODEL, 1, 'Recurrent models: stacked recurrent layers; transformer: '
                          'blocks.')
  num_heads: int = _knob(MODEL, 1, 'transformer: attention heads per block (must divide '
                         '--feature_size, d_model).')
  positions: str = _knob(MODEL, 'sinusoidal', 'transformer: positional encodings, sinusoidal '
                         '(Vaswani et al. 2017) or learned.')
  dropout: float = _knob(MODEL, 0.0, 'Dropout rate in training: nnlm on x and on the tanh '
                         'units; recurrent models on the embeddings, between layers and on '
                         'the last layer (Zaremba et al. 2014); transformer on the input '
                         'sums and each residual branch.')
  tie_embeddings: bool = _knob(MODEL, False, 'The output rows are the input embedding C '
                               "(needs --hidden_size's output as wide as --feature_size).")
  window: int = _knob(MODEL, 5, 'cbow, skipgram: c, the largest window radius; each position '
                      'draws its radius from 1 … c in training.')
  subsample: float = _knob(MODEL, 0.0, 'cbow, skipgram: t, frequent words are kept with '
                           'probability (√(f/tN) + 1)·tN/f each epoch (Mikolov et al. 2013b; '
                           'word2vec: 1e-3); 0 = keep every token.')
  chunk_positions: int = _knob(MODEL, 128, 'cbow, skipgram: positions whose updates are '
                               'summed from one reading of the vectors (skip-gram with '
                               'negative sampling: as many pairs as they hold on average); a '
                               'step applies its --batch_size positions this many at a time, '
                               'one chunk after another, as word2vec updates one after '
                               'another (0: the whole batch at once, for an accelerator). A '
                               'chunk of 128 stays in a CPU\'s cache.')

  head: str = _knob(HEAD, 'softmax', f'{", ".join(heads.HEADS)} (nplm.heads), or '
                    'module.path:Name, a head class of your own with their interface.')
  num_classes: int = _knob(HEAD, 0, 'class head: number of frequency-binned classes (0 = '
                           '√|V|).')
  tree: str = _knob(HEAD, 'huffman', 'tree head: huffman (from training counts) or balanced.')
  num_samples: int = _knob(HEAD, 100, 'k: words sampled per update by the is, nce and '
                           'negative_sampling heads, shared by the minibatch (unless '
                           '--noise_per_example).')
  noise_per_example: bool = _knob(HEAD, False, 'nce, negative_sampling: k noise words drawn '
                                  'for each example, as word2vec does, not k shared by the '
                                  'minibatch (one dense matmul, but every example meets the '
                                  'same few noise words). cbow and skipgram always draw per '
                                  'example (word2vec\'s own update).')
  proposal_power: float = _knob(HEAD, 1.0, 'α: the sampling heads draw from Q ∝ count^α (1 = '
                                'the unigram, 0 = uniform).')
  adaptive_cutoffs: str = _knob(HEAD, '', 'adaptive head: comma-separated ids where the tail '
                                'clusters start (empty = where the words cover 80% and 95% '
                                'of the training tokens).')

  optimizer: str = _knob(OPTIMIZER, 'adamw', 'sgd (the paper; updates only the rows of C and '
                         'of sampled or tree output layers a step reads, decay paid lazily), '
                         'adamw (dense), or lazy_adam (Adam per row: moments and rows of those '
                         'tables move only when read).')
  lr_schedule: str = _knob(OPTIMIZER, 'inverse', 'ε_t, the rate of update t + 1 '
                           '(nplm.training.schedules): inverse ε0 / (1 + r·t) (--lr_decay = r; '
                           'the paper); linear from ε0 to --min_learning_rate over the run '
                           '(word2vec); step: ε0 for --lr_keep_epochs epochs, then × '
                           '--lr_factor each epoch (Zaremba et al. 2014); plateau: × '
                           '--lr_factor after each validation that does not improve on the best '
                           'by --plateau_threshold (Mikolov\'s RNNLM, PyTorch\'s '
                           'word_language_model); cosine: from ε0 to --min_learning_rate after '
                           'the warm-up; rsqrt: ε0·√(W/t) after W = --warmup_steps (Vaswani et '
                           'al. 2017). The run is T = --epochs × the steps per epoch '
                           '(--max_steps cuts it short, never changes it).')
  warmup_steps: int = _knob(OPTIMIZER, 0, 'W: the rate rises linearly over the first W '
                            'updates, ε0·t/W, before any schedule (rsqrt needs W ≥ 1).')
  lr_keep_epochs: int = _knob(OPTIMIZER, 1, '--lr_schedule=step: epochs at ε0 before the '
                              'first decay.')
  lr_factor: float = _knob(OPTIMIZER, 0.5, '--lr_schedule=step, plateau: what each decay '
                           'multiplies the rate by.')
  plateau_threshold: float = _knob(OPTIMIZER, 0.0, '--lr_schedule=plateau: a validation '
                                   'perplexity not below the best × (1 - this) decays the rate.')
  decay_embeddings: bool = _knob(OPTIMIZER, True, 'Weight decay on the embedding tables too (C, '
                                 'learned positions; the paper decays C). Biases and '
                                 'normalization gains and offsets are never decayed.')
  batch_size: int = _knob(OPTIMIZER, 256, 'Training examples per update, over all devices '
                          '(recurrent models: parallel streams B, each giving --bptt_length '
                          'words).')
  bptt_length: int = _knob(OPTIMIZER, 35, 'Recurrent models: T, words per segment of '
                           'truncated BPTT.')
  dtype: str = _knob(OPTIMIZER, 'float32', 'The train step\'s arithmetic: float32, or bfloat16 '
                     '(matmuls and activations in bfloat16; parameters, optimizer state, '
                     'scores\' log-sum-exp and losses in float32). Evaluation is float32.')
  clip_norm: float = _knob(OPTIMIZER, 0.0, 'Clip the gradient to this global norm before the '
                           'update (0 = no clipping).')
  data_seed: int = _knob(OPTIMIZER, -1, 'Seeds the per-epoch shuffles of the training windows '
                         '(-1: --seed). Models trained together share one.')

  epochs: int = _knob(RUN_BOUNDS, 20, 'Upper bound on passes over the training split.')
  patience: int = _knob(RUN_BOUNDS, 2, 'Stop after this many validations without a better '
                        'perplexity; 0 = train every epoch and report the last parameters, not '
                        'the best on validation (word2vec).')
  eval_every: int = _knob(RUN_BOUNDS, 0, 'Validate every this-many updates (0: at the end of '
                          'each epoch); --patience, the best checkpoint and --lr_schedule=plateau '
                          'count validations. A run also validates its last update. A resumed '
                          'run keeps it.')
  max_steps: int = _knob(RUN_BOUNDS, 0, 'Stop after this many updates in all (0 = no bound); '
                         'for smoke runs.')
  valid_tokens_per_eval: int = _knob(RUN_BOUNDS, 0, 'Epoch-end validations (early stopping, '
                                     'the best checkpoint) score the first this-many valid '
                                     'tokens (0, or more than it has: all); the final valid '
                                     'perplexity is the whole split. A resumed run keeps it.')

  eval_batch_size: int = _knob(OBSERVATION, 2048, 'Examples per evaluation batch (the last '
                               'one is padded); recurrent models: words per segment of the '
                               'one stream.')
  eval_splits: str = _knob(OBSERVATION, 'auto', 'The splits the final evaluation scores: '
                           'train, valid, test (comma-separated) or auto: valid and test, and '
                           f'train where it has at most {AUTO_TRAIN_TOKENS:,} tokens.')
  log_every: int = _knob(OBSERVATION, 200, 'Updates between progress lines / metrics records.')
  checkpoint_every: int = _knob(OBSERVATION, 2000, 'Updates between periodic checkpoints '
                                '(also at each epoch).')
  keep_checkpoints: int = _knob(OBSERVATION, 2, 'Periodic checkpoints kept in '
                                '<workdir>/checkpoints (at least 1), besides the best one.')
  stop_seconds: float = _knob(OBSERVATION, 25.0, 'After SIGTERM or Ctrl-C a run saves at its '
                              'next update and stops; the process ends this many seconds '
                              'after the signal at the latest, even inside one long '
                              'computation (within the 30 s that Slurm, Kubernetes and '
                              'preemptible VMs give by default). A second Ctrl-C stops at once.')
  workdir: str = _knob(OBSERVATION, '', 'Receives checkpoints, metrics.jsonl, TensorBoard '
                       'events, summary.json.')

  mesh: str = _knob(DEVICES, '', "Device mesh, e.g. data:8 or data:2,model:4 ('model' splits "
                    'the output rows over the vocabulary); an axis left out takes the devices '
                    'that remain (empty: every device on data).')
  distributed: bool = _knob(DEVICES, False, 'Join a multi-process run whose coordinator JAX '
                            'finds itself (Cloud TPU VMs, Slurm).')
  coordinator_address: str = _knob(DEVICES, '', 'host:port of process 0, for a multi-process '
                                   'run started by hand (with --num_processes, --process_id).')
  num_processes: int = _knob(DEVICES, 1, 'Processes in a multi-process run started by hand.')
  process_id: int = _knob(DEVICES, 0, "This process's index in a multi-process run started by "
                          'hand.')

  seed: int = _knob(PER_MODEL, 0, 'Seeds initialization, sampling and (unless --data_seed) the '
                    'per-epoch shuffles.')
  learning_rate: float = _knob(PER_MODEL, 1e-3, 'ε0: the initial learning rate (word2vec '
                               'models: per pair or position, as word2vec\'s -alpha).')
  min_learning_rate: float = _knob(PER_MODEL, 0.0, 'ε_min: where --lr_schedule=linear ends '
                                   '(word2vec\'s and gensim\'s min_alpha, 0.0001).')
  lr_decay: float = _knob(PER_MODEL, 0.0, 'r in ε_t = ε0 / (1 + r·t), t counting updates '
                          '(paper: 1e-8).')
  weight_decay: float = _knob(PER_MODEL, 0.0, 'λ on the weights and (--decay_embeddings) the '
                              'embedding tables, never on biases or normalization parameters '
                              '(paper: 1e-4 with SGD).')

  @property
  def batch_order_seed(self) -> int:
    return self.seed if self.data_seed == -1 else self.data_seed

  @classmethod
  def from_saved(cls, saved: dict[str, Any]) -> 'Config':
    """The config a run recorded; knobs added since it ran take their defaults, which
    compute what the code did before they existed."""
    known = {field.name for field in dataclasses.fields(cls)}
    return cls(**{name: value for name, value in saved.items() if name in known})

  def resolved(self) -> 'Config':
    """This config with its source's defaults filled in (--unk_max_count -1; its split when
    neither --train_tokens nor --valid_tokens is given): what a run records and compares."""
    from nplm.data.sources import source_of  # Here, not above: it imports numpy.
    source, changes = source_of(self.dataset), {}
    if self.unk_max_count == -1 and source.default_unk_max_count is not None:
      changes['unk_max_count'] = source.default_unk_max_count
    if not self.train_tokens and not self.valid_tokens:
      changes.update(source.default_split())
    return self.replace(**changes)

  def evaluated_splits(self, sizes: dict[str, int]) -> list[str]:
    """The splits of `sizes` (each split's tokens, in order) that --eval_splits names."""
    if self.eval_splits == 'auto':
      return [name for name in sizes if name != 'train' or sizes[name] <= AUTO_TRAIN_TOKENS]
    return [name for name in sizes if name in self.eval_splits.split(',')]

  def absolute_paths(self) -> 'Config':
    """This config with every location it names absolute: --workdir, --data_dir,
    --corpus_dir and a text: dataset's directory or file, a relative one taken from the
    current directory (nplm.paths.absolute). Called once where a program or the Python API
    takes a config (training, the readers, export, ngram), so that a run records where its
    data lies and reads from any current directory; idempotent."""
    changes = {name: paths.absolute(value) for name in _PATH_FIELDS
               if (value := getattr(self, name))}
    kind, _, where = self.dataset.partition(':')
    if kind == 'text' and where:
      changes['dataset'] = f'text:{paths.absolute(where)}'
    return self.replace(**changes)

  def replace(self, **changes: Any) -> 'Config':
    return dataclasses.replace(self, **changes)

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  def incompatibilities(self, saved: dict[str, Any]) -> list[str]:
    """The fields, other than RESUMABLE_FIELDS (but --valid_tokens_per_eval and --eval_every),
    where `saved` differs from this config (both with their dataset-dependent defaults resolved, their
    paths absolute: a relative path recorded by an older nplm is read from the current
    directory). --unk_max_count is left to the caller's comparison of the vocabularies it
    gives (a text run recorded with 0 is today's default -1 on a text that has its own
    <unk>: the same vocabulary)."""
    saved = Config.from_saved(saved).resolved().absolute_paths().to_dict()
    problems = [f'{name}: checkpoint has {saved[name]!r}, this run has {value!r}'
                for name, value in self.resolved().absolute_paths().to_dict().items()
                if name not in (*RESUMABLE_FIELDS, 'unk_max_count') and saved[name] != value]
    for name in ('valid_tokens_per_eval', 'eval_every'):  # Early stopping compares them.
      if saved[name] != getattr(self, name):
        problems.append(f'{name}: checkpoint has {saved[name]!r}, this run has '
                        f'{getattr(self, name)!r} (early stopping compares its validations)')
    if self.lr_schedule in ('linear', 'cosine') and saved['epochs'] != self.epochs:
      problems.append(f'epochs: checkpoint has {saved["epochs"]!r}, this run has '
                      f'{self.epochs!r} (--lr_schedule={self.lr_schedule} decays over the '
                      'planned epochs)')
    return problems

  def same_run(self, saved: dict[str, Any]) -> bool:
    """Whether a finished run recorded with config `saved` is this config's run: equal in
    every field but OBSERVING_FIELDS (those leave its numbers as they are); paths compare
    absolute, as incompatibilities()."""
    saved = Config.from_saved(saved).resolved().absolute_paths().to_dict()
    return all(saved[name] == value
               for name, value in self.resolved().absolute_paths().to_dict().items()
               if name not in OBSERVING_FIELDS)


def _fields(groups=GROUPS, role=None) -> tuple[str, ...]:
  return tuple(field.name for field in dataclasses.fields(Config)
               if field.metadata['group'] in groups
               and role in (None, field.metadata['role']))


# The fields that are paths (a text: dataset's path is one more, inside --dataset).
_PATH_FIELDS = ('workdir', 'data_dir', 'corpus_dir')


def default_of(name: str) -> Any:
  return Config.__dataclass_fields__[name].default


def group_of(name: str) -> str:
  return Config.__dataclass_fields__[name].metadata['group']


# The knobs read by some models or heads only (their `knobs`): --bptt_length is the
# recurrent models'.
COMPONENT_KNOBS = tuple(name for name in _fields([MODEL, HEAD])
                        if name not in ('model', 'head')) + ('bptt_length',)
# Which corpus a run reads (nplm.data.datasets.load_dataset).
DATA_FIELDS = _fields([DATA])
# Where another dataset lies and how it is cut (the model's tokens and vocabulary stay).
LOCATION_AND_SPLIT_FIELDS = _fields([DATA], LOCATION) + _fields([DATA], SPLITS)
# A run resumes with other values of these: they bound or observe the run, or lay it out
# over devices, but do not change what one update computes.
RESUMABLE_FIELDS = (_fields([RUN_BOUNDS, OBSERVATION, DEVICES])
                    + _fields([DATA], LOCATION))
# A finished run is reused across changes to these: they leave its numbers as they are.
OBSERVING_FIELDS = _fields([OBSERVATION, DEVICES]) + _fields([DATA], LOCATION)
# Models trained together differ only in these (each has a workdir of its own).
PER_MODEL_FIELDS = _fields([PER_MODEL]) + ('workdir',)
# The per-model values that enter the train step as traced arrays (nplm.training.optimizer).
HYPERPARAMETERS = tuple(field.name for field in dataclasses.fields(Config)
                        if field.metadata['group'] == PER_MODEL and field.type is float)
