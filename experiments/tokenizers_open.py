r"""One raw text, five tokenizations, KN5 on each: perplexity per word on the open vocabulary.

  python -m experiments.tokenizers_open --out=/work/tok_open

Writes Brown as raw text to OUT/brown_raw (the paper's split, one paragraph per line, `</p>`
and `</text>` as words, laid out as `nplm export --dataset=brown` lays them out, but every
word as written: no vocabulary, so no `<unk>`), then runs `nplm ngram --order=5` on it as
whitespace words, NLTK words, BPE and unigram subwords (8,000) and characters, each into
OUT/kn5_<name> (one whose ngram.json exists is read, not rerun), and prints OUT/table.md: per
split, the closed and open perplexity per token and the open perplexity per word (the same
text's total NLL, every character of it paid for, over the same count of words), beside
|V|, the tokens, the <unk> rate and the share of the open NLL that spelling unknown words
costs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from absl import flags

from nplm.cli import run_experiment
from nplm.data import brown, brown_source
from nplm.files import write_text_atomically

FLAGS = flags.FLAGS
# name in the table -> the flags that pick its tokenization.
TOKENIZATIONS = {
    'whitespace words': ('words', []),
    'nltk (Treebank words)': ('nltk', ['--tokenizer=nltk']),
    'bpe, 8,000': ('bpe', ['--tokenizer=bpe', '--subword_vocab_size=8000']),
    'unigram, 8,000': ('unigram', ['--tokenizer=unigram', '--subword_vocab_size=8000']),
    'characters': ('chars', ['--tokens=chars']),
}
TABLE_SPLITS = ('test', 'valid')


def raw_lines(texts: Sequence[Sequence[Sequence[str]]], train_tokens: int,
              valid_tokens: int) -> dict[str, list[str]]:
  """Each split's paragraph lines, cut as the brown dataset cuts its tokens, with no
  vocabulary applied: every word as the corpus writes it."""
  tokens = brown_source.tokens_from_texts(texts)
  splits = brown_source.split_tokens(tokens, train_tokens, valid_tokens)
  return {name: brown_source.paragraph_lines(split) for name, split in splits.items()}


def write_raw_text(texts: Sequence[Sequence[Sequence[str]]], directory: Path,
                   train_tokens: int = brown_source.PAPER_SPLIT['train_tokens'],
                   valid_tokens: int = brown_source.PAPER_SPLIT['valid_tokens']) -> Path:
  """train.txt, valid.txt and test.txt of Brown's raw text in `directory` (a text:DIR)."""
  directory.mkdir(parents=True, exist_ok=True)
  for name, lines in raw_lines(texts, train_tokens, valid_tokens).items():
    write_text_atomically(directory / f'{name}.txt', ''.join(line + '\n' for line in lines))
  return directory


def ngram_arguments(text_dir: Path, out: Path, data_dir: Path, tokenization: list[str]
                    ) -> list[str]:
  return ['ngram', f'--dataset=text:{text_dir}', '--order=5', *tokenization, f'--out={out}',
          f'--data_dir={data_dir}']


def run_ngram(arguments: list[str]) -> None:
  """`nplm ARGUMENTS` as a user types it: the console script beside this interpreter (the
  virtual environment's), its output passed through."""
  print('== nplm ' + ' '.join(arguments), flush=True)
  subprocess.run([str(Path(sys.executable).with_name('nplm')), *arguments], check=True)


def summaries(out: Path, text_dir: Path, data_dir: Path) -> dict[str, dict]:
  """ngram.json of each tokenization, run first where it is not there yet."""
  found = {}
  for label, (name, tokenization) in TOKENIZATIONS.items():
    run_dir = out / f'kn5_{name}'
    if not (run_dir / 'ngram.json').is_file():
      run_ngram(ngram_arguments(text_dir, run_dir, data_dir, tokenization))
    found[label] = json.loads((run_dir / 'ngram.json').read_text())
  return found


def per_word(summary: dict, split: str) -> float:
  """The open perplexity per word: a whitespace word model's tokens are the words, so its
  open perplexity is that figure (ngram.json records a word_ppl only for other tokens)."""
  return summary.get(f'{split}_word_ppl', summary[f'{split}_open_ppl'])


def table_rows(found: dict[str, dict], split: str) -> list[str]:
  header = ['tokenization', '\\|V\\|', f'{split} tokens', '`<unk>` rate',
            'closed ppl per token', 'open ppl per token', 'open ppl per word',
            'spelling share']
  lines = ['| ' + ' | '.join(header) + ' |', '| --- |' + ' ---: |' * (len(header) - 1)]
  for label, summary in found.items():
    cells = [label, f'{summary["vocab_size"]:,}', f'{summary["tokens"][split]:,}',
             f'{summary["unk_rate"][split]:.2%}', f'{summary[f"{split}_ppl"]:.2f}',
             f'{summary[f"{split}_open_ppl"]:.2f}', f'{per_word(summary, split):.2f}',
             f'{summary["spelling_share"][split]:.2%}']
    lines.append('| ' + ' | '.join(cells) + ' |')
  return lines


def table(found: dict[str, dict]) -> str:
  parts = []
  for split in TABLE_SPLITS:
    parts += [f'{split}:', '', *table_rows(found, split), '']
  return '\n'.join(parts)


def main(argv):
  del argv
  out = Path(FLAGS.out).absolute()
  data_dir = Path(FLAGS.data_dir).absolute() if FLAGS.data_dir else out / 'tfds'
  texts = brown.load_texts(FLAGS.brown_data_dir or None)
  text_dir = write_raw_text(texts, out / 'brown_raw')
  text = table(summaries(out, text_dir, data_dir))
  print(text, end='')
  write_text_atomically(out / 'table.md', text)


if __name__ == '__main__':
  flags.DEFINE_string('out', None, 'Receives brown_raw/, tfds/, kn5_<name>/ and table.md.')
  flags.DEFINE_string('data_dir', '', 'TFDS data dir of the prepared texts (OUT/tfds if '
                      'empty).')
  flags.DEFINE_string('brown_data_dir', '', 'TFDS data dir holding the prepared Brown corpus '
                      "(TFDS's default if empty, as `nplm export --dataset=brown` reads it).")
  flags.mark_flag_as_required('out')
  run_experiment(main)
