"""The configuration of one run: the run's own settings, and a field per knob of its
components (each declared in the component's file: nplm.knobs).

`Config` is a frozen dataclass assembled, when first used, from the run's own settings
declared below (the dataset, the vocabulary, the batch, run bounds, observation, devices, the
seed) and the knobs that the optimizer, the schedule, the tokenizers and the registries'
sources, models and heads declare; `config_class(model, head, dataset)` adds those of a
component named by its import path. The trainer's flags (`nplm train`, nplm/cli), flagfiles,
`--help` and run.json come from its fields, with their groups and help texts. The lists of
fields that play a part (which resume, which are per model, which name the data) derive from
the groups and roles, below the class. This module imports no component: it names them (the
registries' import paths, KNOB_MODULES) and imports them when Config is first assembled, so
`import nplm.config` loads neither Flax nor TFDS.
"""

import dataclasses
import functools
import importlib
from typing import Any

from nplm import components, heads, models, paths
from nplm.components import ComponentImportError
from nplm.errors import ConfigError
from nplm.knobs import (DATA, DEVICES, HEAD, LOCATION, MODEL, OBSERVATION, OPTIMIZER,
                        PER_MODEL, RUN_BOUNDS, SPLIT_CUT, Knob)

__all__ = ['Config', 'ConfigError', 'config_class']

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


# --eval_splits=auto scores the train split up to this many tokens: a pass over it costs an
# epoch's forward passes. Brown's 800k, PTB's 930k and WikiText-2's 2.1M are scored, as Table
# 1 reports train perplexity; WikiText-103's 103M is not (hours on a CPU, and no one reports it).
AUTO_TRAIN_TOKENS = 3_000_000


def _knob(group: str, default: Any, help_text: str, role: str = '') -> Any:
  """A config field with its group and help text (the flag `--<name>` shows them)."""
  return dataclasses.field(default=default,
                           metadata={'help': help_text, 'group': group, 'role': role})


@dataclasses.dataclass(frozen=True)
class RunSettings:
  """The run's own settings, and what a Config does (Config: these and the knobs)."""
  # The groups' fields in the order --help shows them; a flagfile sets any of them.
  dataset: str = _knob(DATA, 'brown', "The corpus: brown (the paper's), text:DIR (train.txt, "
                       'valid.txt, test.txt), text:FILE (cut by lines) or '
                       'tfds:NAME[/CONFIG][:FEATURE] (a TFDS text dataset).')
  data_dir: str = _knob(DATA, '', 'TFDS data dir for the prepared corpus (empty: TFDS '
                        'default).', role=LOCATION)
  unk_max_count: int = _knob(DATA, -1, 'Training-split tokens seen at most this often become '
                             "<unk> (-1: the dataset's default: 3 for brown as the paper; for text: and "
                             "tfds: 0, every type kept, where the training text has its own <unk> "
                             '(PTB, WikiText), else 1, so that <unk> is trained).')
  max_vocab_size: int = _knob(DATA, 0, 'Keep at most this many ids, <unk> and the special '
                              'tokens included: the most frequent (ties by the token); 0 = '
                              'no bound.')

  model: str = _knob(MODEL, 'nnlm', f'{", ".join(models.MODELS)} (nplm.models), or '
                     'module.path:Name, a model class of your own with their interface.')

  head: str = _knob(HEAD, 'softmax', f'{", ".join(heads.HEADS)} (nplm.heads), or '
                    'module.path:Name, a head class of your own with their interface.')

  batch_size: int = _knob(OPTIMIZER, 256, 'Training examples per update, over all devices '
                          '(recurrent models: parallel streams B, each giving --bptt_length '
                          'words).')
  dtype: str = _knob(OPTIMIZER, 'float32', 'The train step\'s arithmetic: float32, or bfloat16 '
                     '(matmuls and activations in bfloat16; parameters, optimizer state, '
                     'scores\' log-sum-exp and losses in float32). Evaluation is float32.')
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
                               'one is padded; a shorter split is one batch of its size); '
                               'recurrent models: words per segment of the one stream.')
  eval_splits: str = _knob(OBSERVATION, 'auto', 'The splits the final evaluation scores: '
                           'train, valid, test (comma-separated), none (`nplm evaluate` scores '
                           'the run later: at a large vocabulary on a CPU the exact pass can '
                           'take longer than training) or auto: valid and test, and train '
                           f'where it has at most {AUTO_TRAIN_TOKENS:,} tokens; none for word '
                           'vectors (word2vec), which are not a language model (named, their '
                           'splits are scored and validated each epoch).')
  log_every: int = _knob(OBSERVATION, 200, 'Updates between progress lines / metrics records.')
  checkpoint_minutes: float = _knob(OBSERVATION, 10.0, 'Minutes between periodic checkpoints '
                                    '(as levanter saves; also at each epoch and validation), '
                                    'whatever the speed; 0: none by time. A multi-process '
                                    "run's processes agree at --log_every steps.")
  checkpoint_every: int = _knob(OBSERVATION, 0, 'Also a checkpoint every this-many updates '
                                '(0: by --checkpoint_minutes only).')
  profile_steps: int = _knob(OBSERVATION, 0, "Traces this many updates with JAX's profiler, "
                             'from the first progress line on (the step compiled and warm), '
                             'into <workdir>/profile (TensorBoard, Perfetto); profile.txt '
                             "there sums each device's events by name. 0: none.")
  keep_checkpoints: int = _knob(OBSERVATION, 2, 'Periodic checkpoints kept in '
                                '<workdir>/checkpoints (at least 1), besides the best one.')
  stop_seconds: float = _knob(OBSERVATION, 25.0, 'After SIGTERM or Ctrl-C a run saves at its '
                              'next update and stops; the process ends this many seconds '
                              'after the signal at the latest, even inside one long '
                              'computation (within the 30 s that Slurm, Kubernetes and '
                              'preemptible VMs give by default). A second Ctrl-C stops at once.')
  workdir: str = _knob(OBSERVATION, '', 'Receives checkpoints, metrics.jsonl, TensorBoard '
                       'events, summary.json.')

  updates_per_call: int = _knob(DEVICES, 0, 'Updates run in one compiled call (a scan over '
                                'their batches), the same numbers: where an update is small, '
                                'one call each is set by the host\'s dispatch, not the device '
                                '(a GPU; experiments/benchmarks/dispatch.py). Updates before '
                                'a due action or the epoch\'s end go one a call. 0: chosen at '
                                'the first progress line from the time an update took there, '
                                'for the NNLM and word2vec; 1 for the others '
                                '(docs/devices-and-launch.md).')
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

  @property
  def batch_order_seed(self) -> int:
    return self.seed if self.data_seed == -1 else self.data_seed

  @staticmethod
  def from_saved(saved: dict[str, Any]) -> 'Config':
    """The config a run recorded (of the config_class of its model, head and source); knobs added
    since it ran take their defaults, which compute what the code did before they existed,
    and knobs of components no longer there are left out."""
    try:
      config = config_class(*(saved.get(name, '') for name in ('model', 'head', 'dataset')))
    except ComponentImportError:  # Its own component is not installed here: its knobs
      config = config_class()     # are left out; building it says what is missing.
    known = {field.name for field in dataclasses.fields(config)}
    return config(**{name: value for name, value in saved.items() if name in known})

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

  def evaluated_splits(self, sizes: dict[str, int], *, language_model: bool) -> list[str]:
    """The splits of `sizes` (each split's tokens, in order) that --eval_splits names; auto
    names none of a model that is not a language model (its model class's
    `language_model`): word vectors' "perplexities" are read by no one unless asked for."""
    if self.eval_splits == 'auto':
      return [name for name in sizes if language_model
              and (name != 'train' or sizes[name] <= AUTO_TRAIN_TOKENS)]
    return [name for name in sizes if name in self.eval_splits.split(',')]

  def absolute_paths(self) -> 'Config':
    """This config with every location it names absolute: --workdir, --data_dir,
    --corpus_dir and a text: dataset's directory or file, a relative one taken from the
    current directory (nplm.paths.absolute). Called once where a program or the Python API
    takes a config (training, the readers, export, ngram), so that a run records where its
    data lies and reads from any current directory; idempotent."""
    changes = {name: paths.absolute(value) for name in _path_fields()
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
    saved = self.from_saved(saved).resolved().absolute_paths().to_dict()
    problems = [f'{name}: checkpoint has {saved.get(name)!r}, this run has {value!r}'
                for name, value in self.resolved().absolute_paths().to_dict().items()
                if name not in (*_FIELD_LISTS['RESUMABLE_FIELDS'](), 'unk_max_count')
                and saved.get(name) != value]
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
    saved = self.from_saved(saved).resolved().absolute_paths().to_dict()
    return all(saved.get(name) == value
               for name, value in self.resolved().absolute_paths().to_dict().items()
               if name not in _FIELD_LISTS['OBSERVING_FIELDS']())


def _fields(groups=GROUPS, role=None) -> tuple[str, ...]:
  return tuple(field.name for field in dataclasses.fields(_assembled())
               if field.metadata['group'] in groups
               and role in (None, field.metadata['role']))


# The lists of fields that play a part, derived from the groups and roles of every knob
# (module attributes computed when first asked for: the knobs are the components').
_FIELD_LISTS = {
    # Which corpus a run reads (nplm.data.datasets.load_dataset).
    'DATA_FIELDS': lambda: _fields([DATA]),
    # Where another dataset lies and how it is cut (the model's tokens and vocabulary stay).
    'LOCATION_AND_SPLIT_FIELDS': lambda: _fields([DATA], LOCATION) + _fields([DATA], SPLIT_CUT),
    # A run resumes with other values of these: they bound or observe the run, or lay it out
    # over devices, but do not change what one update computes.
    'RESUMABLE_FIELDS': lambda: (_fields([RUN_BOUNDS, OBSERVATION, DEVICES])
                                 + _fields([DATA], LOCATION)),
    # A finished run is reused across changes to these: they leave its numbers as they are.
    'OBSERVING_FIELDS': lambda: _fields([OBSERVATION, DEVICES]) + _fields([DATA], LOCATION),
    # Models trained together differ only in these (each has a workdir of its own).
    'PER_MODEL_FIELDS': lambda: _fields([PER_MODEL]) + ('workdir',),
}


def _path_fields() -> tuple[str, ...]:
  """The fields that are paths (a text: dataset's path is one more, inside --dataset)."""
  return ('workdir',) + _fields([DATA], LOCATION)


# The run's components that declare their knobs as their module's KNOBS (nplm.knobs): the
# optimizer, its learning-rate schedule, the tokenizers. Named by module, as the registries
# name models, heads and sources, and imported when Config is first assembled.
KNOB_MODULES = ('nplm.training.optimizer', 'nplm.training.schedules', 'nplm.data.tokenizers')


def config_class(model: str = '', head: str = '', dataset: str = '') -> type:
  """Config: RunSettings and a field per knob that the run's components declare (nplm.knobs):
  the optimizer, schedule and tokenizers, and the registries' models, heads and sources;
  with a `model`, `head` or `dataset` source named by its import path (module.path:Name), a
  subclass that adds the knobs of its own. Assembled once each: it imports the components."""
  own_model = model if components.is_import_path(model) else ''
  own_head = head if components.is_import_path(head) else ''
  own_source = dataset if _names_own_source(dataset) else ''
  if own_model or own_head or own_source:
    return _with_own_knobs(own_model, own_head, own_source)
  return _assembled()


def _names_own_source(dataset: str) -> bool:
  """Whether --dataset names a source by its import path (module.path:Name[:ARGUMENT])."""
  kind, _, rest = dataset.partition(':')
  return components.is_import_path(f'{kind}:{rest.partition(":")[0]}')


@functools.cache
def _assembled() -> type:
  from nplm.data import sources  # Here, not above: the registries' sources import numpy.
  kinds = [_declared({module: importlib.import_module(module)}, None) for module in KNOB_MODULES]
  kinds += [_declared({name: sources.source_class(name) for name in sources.SOURCES}, DATA),
            _declared({name: models.model_class(name) for name in models.MODELS}, MODEL),
            _declared({name: heads.head_class(name) for name in heads.HEADS}, HEAD)]
  declared = {}
  for knobs in kinds:
    if shared := sorted(set(declared) & set(knobs)):
      raise ValueError(f'--{shared[0]} is declared by two kinds of component: one reader '
                       'kind owns it')
    declared.update(knobs)
  return _dataclass(declared, RunSettings)


@functools.cache
def _with_own_knobs(model: str, head: str, dataset: str) -> type:
  from nplm.data import sources  # Here, not above: the registries' sources import numpy.
  owners = {model: (models.model_class, MODEL), head: (heads.head_class, HEAD),
            dataset: (lambda named: type(sources.source_of(named)), DATA)}
  base, added = _assembled(), {}
  for owner, (component_of, group) in owners.items():
    if not owner:
      continue
    for name, knob in _declared({owner: component_of(owner)}, group).items():
      if name not in base.__dataclass_fields__:
        added[name] = knob
      elif knob.default != default_of(name):
        raise ConfigError(f'{owner} declares --{name} with the default {knob.default!r}, and '
                          f'nplm\'s --{name} is {default_of(name)!r}: declare the same '
                          'default, or name a knob of its own')
  return _dataclass(added, base)


def _declared(readers: dict[str, Any], group: str | None) -> dict[str, Knob]:
  """Each knob that the components (`readers`: name -> class or module, with `knobs` or
  KNOBS) declare, as one Knob: its group (`group` unless it names its own), its default and
  role (the same for every reader, or a ValueError), and its meaning for each reader ('nnlm:
  ...; transformer: ...'; one meaning alone where every reader shares it)."""
  meanings, declared = {}, {}
  for reader, component in readers.items():
    for name, knob in getattr(component, 'knobs', getattr(component, 'KNOBS', {})).items():
      if name in RunSettings.__dataclass_fields__:
        raise ValueError(f'{reader} declares --{name}, a setting of the run itself')
      first = declared.setdefault(name, knob)
      if (first.default, first.group, first.role) != (knob.default, knob.group, knob.role):
        raise ValueError(f'--{name} is declared with other defaults, groups or roles by its '
                         f'readers ({reader}: {knob.default!r})')
      meanings.setdefault(name, {}).setdefault(knob.help, []).append(reader)
  return {name: Knob(knob.default, _meaning(meanings[name], list(readers)),
                     knob.group or group, knob.role) for name, knob in declared.items()}


def _meaning(by_text: dict[str, list[str]], every: list[str]) -> str:
  """The help of a knob: its meaning, after the names of its readers unless all read it."""
  if len(by_text) == 1 and len(next(iter(by_text.values()))) == len(every):
    return next(iter(by_text))
  return '; '.join(f'{", ".join(readers)}: {_after_colon(text.rstrip("."))}'
                   for text, readers in by_text.items()) + '.'


def _after_colon(text: str) -> str:
  """'Dropout rate …' as 'dropout rate …' after a reader's name; a symbol ('T: …') kept."""
  return text[0].lower() + text[1:] if text[1:2].islower() else text



def _dataclass(knobs: dict[str, Knob], base: type) -> type:
  fields = [(name, type(knob.default), _knob(knob.group, knob.default, knob.help, knob.role))
            for name, knob in knobs.items()]
  return dataclasses.make_dataclass('Config', fields, bases=(base,), frozen=True,
                                    namespace={'__module__': __name__})


def component_knobs() -> tuple[str, ...]:
  """The knobs of the registries' models and heads (a chosen one reads some of them)."""
  declared = [*(models.model_class(name).knobs for name in models.MODELS),
              *(heads.head_class(name).knobs for name in heads.HEADS)]
  return tuple(dict.fromkeys(name for knobs in declared for name in knobs))


def default_of(name: str) -> Any:
  return _assembled().__dataclass_fields__[name].default


def group_of(name: str) -> str:
  return _assembled().__dataclass_fields__[name].metadata['group']


def __getattr__(name: str) -> Any:
  """`Config` is assembled when first asked for (PEP 562): `import nplm.config` alone imports
  no component."""
  if name == 'Config':
    return _assembled()
  if name in _FIELD_LISTS:
    return _FIELD_LISTS[name]()
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
