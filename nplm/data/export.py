r"""Writes the token streams that models see as text files, for inspection and other tools.

  python -m nplm.data.export --out DIR [--data_dir D] [--corpus_dir C] [--unk_max_count 3]

DIR receives train.txt, valid.txt, test.txt and vocab.txt. The vocabulary is applied (rare
words appear as <unk>) and the boundary marks appear verbatim, so splitting a file on
whitespace gives exactly the split's tokens. Lines: one paragraph per line; a text's last
line ends with `</p> </text>` (the line breaks after `</text>`, not between the two marks).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from absl import app, flags

from nplm.data.acquire import CorpusError
from nplm.data.corpus import SPLIT_NAMES, Corpus, load_corpus
from nplm.data.vocab import PARAGRAPH_END, TEXT_END
from nplm.files import write_text_atomically

FLAGS = flags.FLAGS


def lines_of(tokens: list[str]) -> list[str]:
  """One line per paragraph, breaking after </p> unless </text> follows it."""
  lines, current = [], []
  for position, token in enumerate(tokens):
    current.append(token)
    next_token = tokens[position + 1] if position + 1 < len(tokens) else None
    if token == TEXT_END or token == PARAGRAPH_END and next_token != TEXT_END:
      lines.append(' '.join(current))
      current = []
  if current:  # A split may end inside a paragraph.
    lines.append(' '.join(current))
  return lines


def export_splits(corpus: Corpus, out_dir: str | os.PathLike) -> list[Path]:
  """Writes <split>.txt for every split and vocab.txt; returns the paths written."""
  out_dir = Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  written = []
  for name in SPLIT_NAMES:
    path = out_dir / f'{name}.txt'
    text = ''.join(line + '\n' for line in lines_of(corpus.vocab.decode(corpus.splits[name])))
    write_text_atomically(path, text)
    written.append(path)
  corpus.vocab.save(out_dir / 'vocab.txt')
  return written + [out_dir / 'vocab.txt']


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  try:
    corpus = load_corpus(FLAGS.data_dir, FLAGS.corpus_dir, FLAGS.unk_max_count)
    paths = export_splits(corpus, FLAGS.out)
  except (CorpusError, ValueError, OSError) as error:  # User mistakes: no traceback.
    sys.exit(f'error: {error}')
  sizes = ', '.join(f'{name} {corpus.stats[name]["tokens"]:,}' for name in SPLIT_NAMES)
  print(f'|V| = {corpus.vocab.size:,}; tokens: {sizes}; wrote {", ".join(map(str, paths))}')


def define_flags() -> None:
  """Defined only when run as a program: importing export_splits defines no global flags."""
  flags.DEFINE_string('out', None, 'Directory to write the split files into.')
  flags.DEFINE_string('data_dir', None, "TFDS data dir (default: TFDS's own).")
  flags.DEFINE_string('corpus_dir', None, 'Directory with the raw Brown files.')
  flags.DEFINE_integer('unk_max_count', 3, 'Training words seen at most this often become <unk>.')
  flags.mark_flag_as_required('out')


if __name__ == '__main__':
  define_flags()
  app.run(main)
