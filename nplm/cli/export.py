r"""Writes the token streams that models see as text files, for inspection and other tools.

  nplm export --out=DIR [--dataset=brown] [--tokens=words] [--unk_max_count=-1] ...
  python -m nplm.cli.export --out=DIR

DIR receives train.txt, valid.txt, test.txt and vocab.txt, with the vocabulary applied (rare
words appear as <unk>). Brown: the boundary marks appear verbatim, so splitting a file on
whitespace gives exactly the split's tokens; one paragraph per line, a text's last line ends
with `</p> </text>` (the line breaks after `</text>`, not between the two marks). Text and
TFDS datasets: one line per `<eos>`, the `<eos>` left out (reading the files back as
text:DIR restores it); characters are written as they are, with no spaces added.
"""

from __future__ import annotations

import os
from pathlib import Path

from absl import flags

from nplm import cli, flagfiles
from nplm.config import DATA_FIELDS
from nplm.data.corpus import SPLITS, Corpus
from nplm.data.datasets import load_dataset
from nplm.data.sources import source_of
from nplm.files import write_text_atomically
from nplm.stop_requests import Interrupted, interrupting
from nplm.data.config_checks import settled_data

FLAGS = flags.FLAGS


def export_splits(corpus: Corpus, out_dir: str | os.PathLike, dataset: str,
                  tokenization: str = 'words') -> list[Path]:
  """Writes <split>.txt for every split (as the source of `dataset` writes its lines) and
  vocab.txt; returns the paths written."""
  out_dir = Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  source, written = source_of(dataset), []
  for name in SPLITS:
    lines = source.export_lines(corpus.vocab.decode(corpus.splits[name]), tokenization)
    path = out_dir / f'{name}.txt'
    write_text_atomically(path, ''.join(line + '\n' for line in lines))
    written.append(path)
  corpus.vocab.save(out_dir / 'vocab.txt')
  return written + [out_dir / 'vocab.txt']


def main(argv: list[str]) -> None:
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  config = cli.config_from_flags()
  try:
    config = settled_data(config)
    with interrupting(f'exporting --dataset={config.dataset}'):
      corpus = load_dataset(config)
      paths = export_splits(corpus, FLAGS.out, config.dataset, config.tokens)
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  sizes = ', '.join(f'{name} {corpus.stats[name]["tokens"]:,}' for name in SPLITS)
  print(f'|V| = {corpus.vocab.size:,}; tokens: {sizes}; wrote {", ".join(map(str, paths))}')


def run_program(argv=None) -> None:
  flags.DEFINE_string('out', None, 'Directory to write the split files into.', required=True)
  flagfiles.define_config_flags(names=DATA_FIELDS)
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
