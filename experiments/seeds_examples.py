r"""The lecture notes' uses of a language model, on trained models: which of two phrases is more
probable (spelling, speech, translation) and what completes a search box's prefix.

  python -m experiments.seeds_examples --workdirs=runs/mlp9,runs/kn5 --out=DIR

Each pair is ranked as `nplm rank` ranks it (the open vocabulary: an unknown word pays for its
spelling), the closed figure (an unknown word scored as <unk> alone) beside it; each prefix is
completed as `nplm complete` completes it. Prints the transcript and writes DIR/README.md.
"""

from collections.abc import Sequence
from pathlib import Path

from absl import flags, logging

import nplm
from nplm.cli import fail, refuse_arguments, run_experiment
from nplm.files import write_text_atomically
from nplm.use.trained import NoTrainedModelError

# (use, the phrase the notes find more probable, the other), in the notes' words.
PAIRS = (
    ('spelling correction', 'about 15 minutes from', 'about 15 minuets from'),
    ('speech recognition', 'I saw a van', 'eye awe of an'),
    ('machine translation', 'high winds tonight', 'large winds tonight'),
)
PREFIXES = ('what is the', 'The jury said')

flags.DEFINE_list('workdirs', None, 'The models: trained runs or n-gram DIRs.', required=True)
flags.DEFINE_string('out', '', 'Directory for README.md (empty: print only).')
flags.DEFINE_integer('k', 5, 'Completions per prefix.')
FLAGS = flags.FLAGS


def pair_lines(model, use: str, better: str, worse: str) -> list[str]:
  """The pair ranked, each phrase's open and closed ln p and its words outside the vocabulary,
  and whether the model agrees with the notes."""
  ranked = model.rank([worse, better])
  agrees = ranked[0].text == better
  closed_agrees = max(ranked, key=lambda s: s.closed_log_prob).text == better
  lines = [f'{use}: P({better}) > P({worse})?  {"yes" if agrees else "NO"} '
           f'(closed vocabulary: {"yes" if closed_agrees else "no"})']
  for score in ranked:
    unknown = [t.word for t in score.tokens if t.oov]
    lines.append(f'    ln {score.log_prob:8.2f}   closed {score.closed_log_prob:8.2f}   '
                 f'{score.text}' + (f'   (outside the vocabulary: {" ".join(unknown)})'
                                    if unknown else ''))
  return lines


def completion_lines(model, prefix: str, k: int) -> list[str]:
  lines = [f'completions of "{prefix}":']
  for completion in model.complete(prefix, k=k):
    lines.append(f'    {completion.probability:9.2e}   {completion.text}')
  return lines


def transcript(workdirs: Sequence[str], k: int) -> list[str]:
  lines = []
  for workdir in workdirs:
    model = nplm.load(workdir)
    lines.append(f'== {workdir} ({model.read.name}, |V| = {model.vocab.size:,})')
    for use, better, worse in PAIRS:
      lines += pair_lines(model, use, better, worse)
    for prefix in PREFIXES:
      lines += completion_lines(model, prefix, k)
    lines.append('')
  return lines


def main(argv):
  refuse_arguments(argv)
  logging.set_verbosity(logging.WARNING)  # The transcript alone (gensim logs on import).
  try:
    lines = transcript(FLAGS.workdirs, FLAGS.k)
  except (NoTrainedModelError, nplm.ConfigError) as error:
    fail(error)
  print('\n'.join(lines))
  if FLAGS.out:
    command = ('python -m experiments.seeds_examples '
               f'--workdirs={",".join(FLAGS.workdirs)} --k={FLAGS.k}')
    Path(FLAGS.out).mkdir(parents=True, exist_ok=True)
    write_text_atomically(Path(FLAGS.out) / 'README.md', '\n'.join([
        "# The lecture notes' uses of a language model, on Brown", '',
        f'`{command}`', '', '```text', *lines, '```', '']))


if __name__ == '__main__':
  run_experiment(main)
