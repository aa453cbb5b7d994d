r"""The words whose learned feature vectors C(w) lie nearest to some words, and a 2-D picture.

  nplm neighbours --workdir=runs/mlp9 --words=dog,cat,the --k=10
  python -m experiments.neighbours --workdir=runs/mlp9 --words=Monday,he --plot=/tmp/c.png

Per word: its k nearest words by cosine similarity of C, the word itself first (nplm.use.neighbours).
--plot saves the PCA projection of --plot_words (by default the listed words and their
neighbours), each point labelled, the --words marked as queries.
"""

from absl import flags

from nplm import cli
from nplm.errors import ConfigError
from nplm.use.neighbours import feature_vectors, nearest, plot_words
from nplm.use.trained import load_trained
from nplm.stop_requests import Interrupted, interrupting

FLAGS = flags.FLAGS


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  try:
    if not FLAGS.words:
      raise ConfigError('--words names no word; give some, comma-separated')
    with interrupting(f'reading {FLAGS.workdir}'):
      trained = load_trained(FLAGS.workdir)
      vectors = feature_vectors(trained)
      lists = {word: nearest(vectors, trained.vocab, word, FLAGS.k) for word in FLAGS.words}
      if FLAGS.plot:
        chosen = FLAGS.plot_words or [w for near in lists.values() for w, _ in near]
        plot_words(vectors, trained.vocab, list(dict.fromkeys(chosen)), FLAGS.plot,
                   queries=FLAGS.words)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  for word, near in lists.items():
    print(word)
    print('\n'.join(f'  {rank:3d}  {w:20} {similarity:7.4f}'
                    for rank, (w, similarity) in enumerate(near, 1)))
  if FLAGS.plot:
    print(f'plot: {FLAGS.plot}')


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train).')
  flags.DEFINE_list('words', [], 'Words to find the neighbours of, comma-separated.')
  flags.DEFINE_integer('k', 10, 'How many nearest words to list per word, itself included.')
  flags.DEFINE_string('plot', '', 'Save a PNG of the 2-D PCA projection here (optional).')
  flags.DEFINE_list('plot_words', [], 'Words to plot; default: --words and their neighbours.')
  flags.mark_flag_as_required('workdir')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
