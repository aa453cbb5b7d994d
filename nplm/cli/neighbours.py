r"""The words whose learned feature vectors C(w) lie nearest to some words, analogies, and a
2-D picture.

  nplm neighbours --workdir=runs/mlp9 --words=dog,cat,the --k=10
  nplm neighbours --workdir=runs/cbow --analogy='king,man,woman;Paris,France,Italy'
  python -m experiments.neighbours --workdir=runs/mlp9 --words=Monday,he --plot=/tmp/c.png

Per word: its k nearest words by cosine similarity of C, the word itself first
(nplm.use.neighbours).
Per --analogy=A,B,C (several: separated by ';' or the flag repeated): the k words nearest to
A - B + C (king - man + woman ≈ queen), the three excluded, as gensim's most_similar answers.
A word outside the vocabulary is skipped with a note on stderr; only when nothing is left to
show is it an error. --plot saves the PCA projection of --plot_words (by default the listed
words and their neighbours), each point labelled, the --words marked as queries.
"""

import sys

from absl import flags

from nplm import cli
from nplm.errors import ConfigError
from nplm.use.neighbours import analogy, feature_vectors, known_and_unknown, nearest, plot_words
from nplm.use.trained import load_trained
from nplm.stop_requests import Interrupted, interrupting

FLAGS = flags.FLAGS


def analogies_of(values: list[str]) -> list[tuple[str, str, str]]:
  """--analogy values, each one or more 'A,B,C' separated by ';', as (A, B, C) triples."""
  triples = []
  for text in (part.strip() for value in values for part in value.split(';')):
    if not text:  # 'a,b,c;' : a trailing separator.
      continue
    words = [w.strip() for w in text.split(',')]
    if len(words) != 3 or not all(words):
      raise ConfigError(f'--analogy {text!r} does not name three words; give three, '
                        'king,man,woman for king - man + woman')
    triples.append(tuple(words))
  return triples


def shown_analogy(triple: tuple[str, str, str]) -> str:
  return f'{triple[0]} - {triple[1]} + {triple[2]}'


def answered(vocab, vectors, words: list[str], triples: list, k: int) -> tuple[dict, list[str]]:
  """{query: its ranked (word, similarity) list} for the words and analogies the vocabulary
  holds, and a note per word or analogy skipped; an error when none is left."""
  known, unknown = known_and_unknown(vocab, words)
  notes = [f'not in the vocabulary, skipped: {", ".join(unknown)}'] if unknown else []
  lists = {word: nearest(vectors, vocab, word, k) for word in known}
  for triple in triples:
    missing = known_and_unknown(vocab, triple)[1]
    if missing:
      notes.append(f'not in the vocabulary, skipped {shown_analogy(triple)}: '
                   f'{", ".join(missing)}')
      unknown += missing
    else:
      lists[shown_analogy(triple)] = analogy(vectors, vocab, *triple, k)
  if not lists:
    raise ConfigError(f'not in the vocabulary (|V| = {vocab.size:,}): '
                      f'{", ".join(dict.fromkeys(unknown))}; nothing to show')
  return lists, notes


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  try:
    triples = analogies_of(FLAGS.analogy)
    if not FLAGS.words and not triples:
      raise ConfigError('--words and --analogy name nothing; give --words=dog,cat or '
                        '--analogy=king,man,woman')
    with interrupting(f'reading {FLAGS.workdir}'):
      trained = load_trained(FLAGS.workdir)
      vectors = feature_vectors(trained)
      lists, notes = answered(trained.vocab, vectors, FLAGS.words, triples, FLAGS.k)
      if FLAGS.plot:
        queries = [word for word in FLAGS.words if word in lists]
        chosen = FLAGS.plot_words or [w for near in lists.values() for w, _ in near]
        plotted, unplotted = known_and_unknown(trained.vocab, list(dict.fromkeys(chosen)))
        if unplotted:
          notes.append(f'not in the vocabulary, not plotted: {", ".join(unplotted)}')
        plot_words(vectors, trained.vocab, plotted, FLAGS.plot, queries=queries)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  for note in notes:
    print(note, file=sys.stderr)
  for query, near in lists.items():
    print(query)
    print('\n'.join(f'  {rank:3d}  {w:20} {similarity:7.4f}'
                    for rank, (w, similarity) in enumerate(near, 1)))
  if FLAGS.plot:
    print(f'plot: {FLAGS.plot}')


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train).')
  flags.DEFINE_list('words', [], 'Words to find the neighbours of, comma-separated.')
  flags.DEFINE_multi_string('analogy', [], 'A,B,C: the words nearest to A - B + C '
                            '(king,man,woman: king - man + woman); several separated by ";" '
                            'or the flag repeated.')
  flags.DEFINE_integer('k', 10, 'How many nearest words to list per word (itself included) '
                       'or per analogy.')
  flags.DEFINE_string('plot', '', 'Save a PNG of the 2-D PCA projection here (optional).')
  flags.DEFINE_list('plot_words', [], 'Words to plot; default: --words and their neighbours.')
  flags.mark_flag_as_required('workdir')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
