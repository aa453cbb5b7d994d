r"""A trained model's word features C written in word2vec's formats and scored by gensim.

  nplm embeddings --workdir=runs/mlp9 --out=runs/mlp9/embeddings
  python -m experiments.embeddings --workdir=runs/lstm --out=/tmp/lstm_embeddings

OUT receives embeddings.txt and embeddings.bin (word2vec's text and binary formats, the
binary one byte for byte as its C tool's -binary 1 writes it: `gensim.models.KeyedVectors.
load_word2vec_format(path, binary=...)` reads them, as do most embedding tools),
embeddings.json (the scores) and embeddings.md (a table of them). The scores
(nplm.use.embeddings): the Spearman ρ of WordSim-353 and SimLex-999 against the cosine
similarities of C, Google's analogy accuracy, each with its coverage (the share of pairs or
questions whose words the vocabulary holds); a score covering under half of its benchmark is
marked "under half, not comparable" (and `low_coverage` in the JSON): it speaks for the few
words covered, not for the vectors. The workdir is read only: a run still training there is
not disturbed.
"""

from __future__ import annotations

from pathlib import Path

import gensim
from absl import flags

from nplm import cli
from nplm.use import embeddings
from nplm.errors import ConfigError
from nplm.files import write_json_atomically, write_text_atomically
from nplm.use.trained import load_trained
from nplm.stop_requests import Interrupted, interrupting

FLAGS = flags.FLAGS
TITLES = {'wordsim353': 'WordSim-353', 'simlex999': 'SimLex-999', 'analogies': 'Analogies'}
LOW_COVERAGE = 'under half, not comparable'


def _percent(share: float | None) -> str:
  return 'n/a' if share is None else f'{100 * share:.1f}%'


def _coverage(score: dict, covered: int, total: int, unit: str) -> str:
  """'12 of 353 pairs (3.4%)', and a warning when the score speaks for too few of them."""
  text = f'{covered:,} of {total:,} {unit} ({_percent(score["coverage"])})'
  return text + (f': {LOW_COVERAGE}' if score['low_coverage'] else '')


def score_rows(scores: dict) -> list[list[str]]:
  """[benchmark, score, coverage] per benchmark, as printed and tabled."""
  rows = []
  for name in embeddings.PAIR_BENCHMARKS:
    score = scores[name]
    rho = 'n/a' if score['spearman'] is None else f'{score["spearman"]:.3f}'
    rows.append([TITLES[name], f'Spearman ρ {rho}',
                 _coverage(score, score['covered'], score['pairs'], 'pairs')])
  analogies = scores['analogies']
  rows.append([TITLES['analogies'], f'accuracy {_percent(analogies["accuracy"])}',
               _coverage(analogies, analogies['answered'], analogies['questions'],
                         'questions')])
  return rows


def report_lines(report: dict) -> list[str]:
  rows = score_rows(report['scores'])
  widths = [max(len(row[i]) for row in rows) for i in range(2)]
  return [f'{report["model"]}: {report["words"]:,} words × {report["dim"]}'] + [
      f'  {name:{widths[0]}}  {score:{widths[1]}}  coverage {coverage}'
      for name, score, coverage in rows]


def markdown(report: dict) -> str:
  lines = [f'Word features C of `{report["workdir"]}` ({report["model"]}, {report["words"]:,} '
           f'words × {report["dim"]}), scored by gensim {report["gensim"]}.', '',
           '| benchmark | score | coverage |', '| --- | --- | --- |']
  lines += ['| ' + ' | '.join(row) + ' |' for row in score_rows(report['scores'])]
  return '\n'.join(lines) + '\n'


def export(workdir: str, out: str) -> dict:
  """Writes OUT/embeddings.{txt,bin,json,md}; returns the report. The vectors are written before
  the evaluation (seconds), so an unwritable OUT fails at once."""
  trained = load_trained(workdir)
  word_vectors = embeddings.of_trained(trained)
  out_dir = Path(out)
  try:
    out_dir.mkdir(parents=True, exist_ok=True)
    embeddings.write_word2vec_text(word_vectors, out_dir / 'embeddings.txt')
    embeddings.write_word2vec_binary(word_vectors, out_dir / 'embeddings.bin')
  except OSError as error:
    raise ConfigError(f'cannot write into --out={out} ({error.strerror or error}); '
                      'name a writable directory') from error
  config = trained.config
  report = {'workdir': str(workdir), 'model': f'{config.model} under {config.head}',
            'words': len(word_vectors.words), 'dim': word_vectors.dim,
            'gensim': gensim.__version__,
            'scores': embeddings.benchmark_scores(embeddings.keyed_vectors(word_vectors))}
  write_json_atomically(out_dir / 'embeddings.json', report)
  write_text_atomically(out_dir / 'embeddings.md', markdown(report))
  return report


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  try:
    with interrupting(f'exporting the embeddings of {FLAGS.workdir}'):
      report = export(FLAGS.workdir, FLAGS.out)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  print('\n'.join(report_lines(report)))
  print(f'wrote {Path(FLAGS.out) / "embeddings.txt"}, .bin, .json, .md')


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train).', required=True)
  flags.DEFINE_string('out', None, 'Directory to write embeddings.{txt,bin,json,md} into.',
                      required=True)
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
