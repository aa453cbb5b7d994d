r"""Text sampled from a trained model, word by word from its exact distribution.

  nplm generate --workdir=runs/mlp9 --length=50 --temperature=1.0 --top_k=0
  python -m experiments.generate --workdir=runs/lstm --prompt="The jury said" --samples=3

Each sample continues the prompt (after the start-of-split context, nplm.use.generation) for
--length tokens or until the model ends the text (Brown: `</text>`; text datasets: the line,
`<eos>`); `</p>` and `<eos>` print as line breaks. The same --seed gives the same text.
"""

import sys
from collections.abc import Sequence

import numpy as np
from absl import flags

from nplm import cli
from nplm.data.tokenize import words_of
from nplm.data.vocab import UNK
from nplm.use.generation import Sampling, as_text, generate
from nplm.use.trained import load_trained
from nplm.stop_requests import Interrupted, interrupting

FLAGS = flags.FLAGS


def report(vocab, prompt: Sequence[str], samples: Sequence[np.ndarray],
           tokenization: str = 'words') -> str:
  """Each sample after its prompt, headed by its number when there are several."""
  texts = [as_text([*prompt, *vocab.decode(ids)], tokenization) for ids in samples]
  if len(texts) == 1:
    return texts[0]
  return '\n'.join(f'--- sample {number} ---\n{text}' for number, text in enumerate(texts, 1))


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  try:
    sampling = Sampling(FLAGS.length, FLAGS.temperature, FLAGS.top_k, FLAGS.no_unk,
                        FLAGS.samples).validate()
    with interrupting(f'sampling from {FLAGS.workdir}'):
      trained = load_trained(FLAGS.workdir)
      config = trained.config
      prompt = words_of(FLAGS.prompt, config.dataset, config.tokens)
      ids = trained.vocab.encode(prompt)
      unknown = sorted({t for t, i in zip(prompt, ids)
                        if i == trained.vocab.unk_id and t != UNK})
      if unknown:
        print(f'prompt tokens read as {UNK} (not in the vocabulary): {" ".join(unknown)}',
              file=sys.stderr)
      samples = generate(trained, ids, sampling, FLAGS.seed)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  print(report(trained.vocab, prompt, samples, config.tokens))


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train).')
  flags.DEFINE_integer('length', 50, 'Tokens to draw per sample (fewer if the text ends).')
  flags.DEFINE_float('temperature', 1.0, 'T: draw from p(w)^(1/T) renormalized; T > 0, '
                     '1 = the model, smaller = surer, larger = flatter.')
  flags.DEFINE_integer('top_k', 0, 'Draw from the k most probable words only; 0 = all.')
  flags.DEFINE_integer('seed', 0, 'Random seed: the same seed gives the same samples.')
  flags.DEFINE_string('prompt', '', 'Text the samples continue, tokenized as the model\'s '
                      'dataset was.')
  flags.DEFINE_integer('samples', 1, 'How many samples to draw.')
  flags.DEFINE_bool('no_unk', False, 'Never draw <unk> (the class of all rare words).')
  flags.mark_flag_as_required('workdir')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
