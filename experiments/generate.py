r"""Text sampled from a trained model, word by word from its exact distribution.

  python -m experiments.generate --workdir=runs/mlp9 --length=50 --temperature=1.0 --top_k=0
  python -m experiments.generate --workdir=runs/lstm --prompt="The jury said" --samples=3

Each sample continues the prompt (after the start-of-split context, nplm.generation) for
--length words or until the model ends the text with `</text>`; `</p>` is printed as a line
break. The same --seed gives the same text.
"""

import sys
from collections.abc import Sequence

import numpy as np
from absl import app, flags

from experiments.brown import show_progress_lines
from nplm.errors import ConfigError
from nplm.generation import Sampling, as_text, generate
from nplm.scoring import NoTrainedModelError, load_trained

FLAGS = flags.FLAGS


def report(vocab, prompt: Sequence[str], samples: Sequence[np.ndarray]) -> str:
  """Each sample after its prompt (as typed), headed by its number when there are several."""
  texts = [as_text([*prompt, *vocab.decode(ids)]) for ids in samples]
  if len(texts) == 1:
    return texts[0]
  return '\n'.join(f'--- sample {number} ---\n{text}' for number, text in enumerate(texts, 1))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
  show_progress_lines()
  try:
    sampling = Sampling(FLAGS.length, FLAGS.temperature, FLAGS.top_k, FLAGS.no_unk,
                        FLAGS.samples).validate()
    trained = load_trained(FLAGS.workdir)
    prompt = FLAGS.prompt.split()
    samples = generate(trained, trained.vocab.encode(prompt), sampling, FLAGS.seed)
  except (NoTrainedModelError, ConfigError) as error:
    print(f'error: {error}', file=sys.stderr)
    sys.exit(2)
  print(report(trained.vocab, prompt, samples))


if __name__ == '__main__':
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (experiments.brown).')
  flags.DEFINE_integer('length', 50, 'Words to draw per sample (fewer if </text> comes).')
  flags.DEFINE_float('temperature', 1.0, 'T: draw from p(w)^(1/T) renormalized; T > 0, '
                     '1 = the model, smaller = surer, larger = flatter.')
  flags.DEFINE_integer('top_k', 0, 'Draw from the k most probable words only; 0 = all.')
  flags.DEFINE_integer('seed', 0, 'Random seed: the same seed gives the same samples.')
  flags.DEFINE_string('prompt', '', 'Words the samples continue (space-separated tokens).')
  flags.DEFINE_integer('samples', 1, 'How many samples to draw.')
  flags.DEFINE_bool('no_unk', False, 'Never draw <unk> (the class of all rare words).')
  flags.mark_flag_as_required('workdir')
  app.run(main)
