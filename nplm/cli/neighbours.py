r"""The words whose learned feature vectors C(w) lie nearest to some words, analogies, and a
2-D picture.

  nplm neighbours --workdir=runs/mlp9 --words=dog,cat,the --k=10
  nplm neighbours --workdir=runs/mlp9 lincoln war
  nplm neighbours --workdir=runs/cbow --analogy='king,man,woman;Paris,France,Italy'
  python -m experiments.neighbours --workdir=runs/mlp9 --words=Monday,he --plot=/tmp/c.png

Per word (the arguments and --words): its k nearest words by cosine similarity of C, the
word itself first (nplm.use.neighbours). A word is read as the model reads typed text: a
--lowercase model's query 'Paris' is 'paris', shown as `paris (typed Paris)`.
Per --analogy=A,B,C (several: separated by ';' or the flag repeated): the k words nearest to
A - B + C (king - man + woman ≈ queen), the three excluded, as gensim's most_similar answers.
A word outside the vocabulary is skipped with a note on stderr; only when nothing is left to
show is it an error. --plot saves the PCA projection of --plot_words (by default the listed
words and their neighbours), each point labelled, the --words marked as queries.
"""

import sys

from absl import flags

from nplm import cli
from nplm.display import printable
from nplm.errors import ConfigError
from nplm.use.neighbours import (analogy, as_read, feature_vectors, known_and_unknown,
                                 nearest, plot_words, with_suggestion)
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


def shown_query(read: str, typed: str) -> str:
  """A query as the model read it, and as typed where that differs."""
  return read if read == typed else f'{read} (typed {typed})'


def answered(trained, vectors, words: list[str], triples: list, k: int
             ) -> tuple[dict, list[str]]:
  """{query: its ranked (word, similarity) list} for the words and analogies the vocabulary
  holds, each word read as the model reads typed text, and a note per word or analogy
  skipped; an error when none is left."""
  vocab = trained.vocab
  read = {word: as_read(trained, word) for word in [*words, *(w for t in triples for w in t)]}
  unknown = [word for word in words if not known_and_unknown(vocab, [read[word]])[0]]
  named = lambda words: ', '.join(with_suggestion(vocab, w) for w in dict.fromkeys(words))
  notes = [f'not in the vocabulary, skipped: {named(unknown)}'] if unknown else []
  lists = {shown_query(read[word], word): nearest(vectors, vocab, read[word], k)
           for word in dict.fromkeys(words) if word not in unknown}
  for typed in triples:
    triple = tuple(read[word] for word in typed)
    missing = [word for word, as_known in zip(typed, triple)
               if not known_and_unknown(vocab, [as_known])[0]]
    if missing:
      notes.append(f'not in the vocabulary, skipped {shown_analogy(typed)}: '
                   f'{named(missing)}')
      unknown += missing
    else:
      query = shown_query(shown_analogy(triple), shown_analogy(typed))
      lists[query] = analogy(vectors, vocab, *triple, k)
  if not lists:
    raise ConfigError(f'not in the vocabulary (|V| = {vocab.size:,}): {named(unknown)}; '
                      'nothing to show')
  return lists, notes


def main(argv):
  cli.show_progress_lines()
  try:
    words = [*argv[1:], *FLAGS.words]  # `nplm neighbours lincoln war` as --words=lincoln,war
    triples = analogies_of(FLAGS.analogy)
    if not words and not triples:
      raise ConfigError('no words given; name them (nplm neighbours --workdir=W dog cat, or '
                        '--words=dog,cat) or --analogy=king,man,woman')
    with interrupting(f'reading {FLAGS.workdir}'):
      trained = load_trained(FLAGS.workdir)
      vectors = feature_vectors(trained)
      lists, notes = answered(trained, vectors, words, triples, FLAGS.k)
      if FLAGS.plot:
        queries = known_and_unknown(trained.vocab, [as_read(trained, w) for w in words])[0]
        chosen = ([as_read(trained, word) for word in FLAGS.plot_words]
                  or [w for near in lists.values() for w, _ in near])
        plotted, unplotted = known_and_unknown(trained.vocab, list(dict.fromkeys(chosen)))
        if unplotted:
          notes.append(f'not in the vocabulary, not plotted: {", ".join(unplotted)}')
        plot_words(vectors, trained.vocab, plotted, FLAGS.plot, queries=queries)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  for note in notes:
    print(printable(note), file=sys.stderr)
  for query, near in lists.items():
    print(printable(query))
    print('\n'.join(f'  {rank:3d}  {printable(w):20} {similarity:7.4f}'
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
