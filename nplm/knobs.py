"""A knob: one setting of a run, declared by what reads it.

A model, head and source declares its knobs in its own file, as its class's `knobs` (a dict
of name -> Knob), beside the checks of their values (its `config_errors`); the optimizer,
the learning-rate schedule and the tokenizers as their module's KNOBS. The settings of the
run itself (the dataset, the batch, run bounds, observation, devices, the seed) are declared
in nplm/config.py. nplm.config.Config has a field per knob, so the command line, flagfiles,
`--help` and run.json come from these declarations; a component named by its import path
brings its own (nplm.config.config_class). A knob read by several components is declared by
each, with the same default and what it means there: `--help` shows each meaning with its
readers.
"""

import dataclasses
from typing import Any

# The groups of settings, in the order --help shows them. What a group is for decides what a
# change to one of its settings means: a run resumes, and a finished run is reused, across
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
# Roles of some data knobs: where the data lies (no effect on the numbers), how the text is
# cut into splits.
LOCATION = 'location'
SPLIT_CUT = 'split cut'


@dataclasses.dataclass(frozen=True)
class Knob:
  """A setting: its default (whose type is the flag's), what it means to the component
  that declares it, its group (None: the declaring component's: MODEL, HEAD or DATA) and
  its role within the group, if any (LOCATION, SPLIT_CUT)."""
  default: Any
  help: str
  group: str | None = None
  role: str = ''
