"""`python -m experiments.brown`: the main job, Bengio et al. (2003)'s NNLM trained on the
Brown corpus (`nplm train` on --dataset=brown, any other flag as nplm train takes it). Other
data: `nplm train --dataset=...` or `python -m experiments.train --dataset=...`."""

import sys

from nplm.cli import train

if __name__ == '__main__':
  if any(arg.lstrip('-').startswith('dataset') for arg in sys.argv[1:]):
    print('error: experiments.brown trains on Brown; for other data run nplm train '
          '--dataset=... (or python -m experiments.train --dataset=...)', file=sys.stderr)
    sys.exit(2)
  train.run_program()
