r"""Brown exported by `nplm export` and read back as `text:DIR`: the same text, other tokens.

  python -m experiments.brown_as_text --export_dir=/tmp/brown_text \
      --text_run=runs/brown_as_text/mlp9 --out=experiments/results/brown_as_text/report

The exported files hold Brown's token streams, one paragraph per line, the vocabulary
applied (rare words as <unk>). Read as text:DIR, every line gains an <eos>, and a split's
first context is <eos> instead of </text>. This prints KN5 (and the trained networks given)
on both readings: perplexity over every token, and over the text reading's tokens other than
<eos>, which are Brown's own tokens one for one.
"""

import math

import numpy as np
from absl import flags

from experiments.benchmarks.harness import machine_info, write_report
from nplm import cli, ngram
from nplm.cli.export import export_splits
from nplm.config import Config
from nplm.data.datasets import load_dataset
from nplm.data.vocab import END_OF_SENTENCE
from nplm.use.trained import load_trained

FLAGS = flags.FLAGS
SPLITS = ('valid', 'test')


def perplexities(log_probs: dict, keep: dict) -> dict:
  return {split: math.exp(-np.mean(log_probs[split][keep[split]])) for split in SPLITS}


def rows_for(name: str, corpus, log_probs: dict) -> list[dict]:
  everything = {split: np.ones(len(corpus.splits[split]), bool) for split in SPLITS}
  rows = [{'model': name, 'tokens': 'all', **{s: int(everything[s].sum()) for s in SPLITS},
           'ppl': perplexities(log_probs, everything)}]
  eos = corpus.vocab.words.index(END_OF_SENTENCE) if END_OF_SENTENCE in corpus.vocab.words else -1
  if eos >= 0:
    words = {split: corpus.splits[split] != eos for split in SPLITS}
    rows.append({'model': name, 'tokens': 'without <eos>',
                 **{s: int(words[s].sum()) for s in SPLITS},
                 'ppl': perplexities(log_probs, words)})
  return rows


def format_report(report: dict, markdown: bool = False) -> str:
  header = ['reading', 'model', 'tokens scored', 'valid tokens', 'valid ppl', 'test tokens',
            'test ppl']
  lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)] if markdown else []
  for row in report['rows']:
    scored = row['tokens'].replace('<eos>', '`<eos>`') if markdown else row['tokens']
    cells = [row['reading'], row['model'], scored, f'{row["valid"]:,}',
             f'{row["ppl"]["valid"]:.2f}', f'{row["test"]:,}', f'{row["ppl"]["test"]:.2f}']
    lines.append('| ' + ' | '.join(cells) + ' |' if markdown else '  '.join(
        f'{c:>14}' for c in cells))
  return '\n'.join(lines) + '\n'


def main(argv):
  del argv
  cli.show_progress_lines()
  brown_config = Config(workdir='unused', data_dir=FLAGS.data_dir).resolved()
  brown = load_dataset(brown_config)
  export_splits(brown, FLAGS.export_dir, brown_config.dataset)
  text = load_dataset(Config(workdir='unused', dataset=f'text:{FLAGS.export_dir}',
                             data_dir=FLAGS.data_dir).resolved())
  rows = []
  for reading, corpus in (('brown', brown), ('text:DIR', text)):
    kn5 = ngram.KneserNey.fit(corpus.splits['train'], 5, corpus.vocab.size, corpus.boundary_id)
    log_probs = {split: kn5.log_prob_split(corpus.splits[split]) for split in SPLITS}
    rows += [{'reading': reading, **row} for row in rows_for('KN5', corpus, log_probs)]
  runs = [('brown', brown, FLAGS.brown_run), ('text:DIR', text, FLAGS.text_run)]
  for reading, corpus, workdir in runs:
    if workdir:
      trained = load_trained(workdir)
      log_probs = {split: trained.split_log_probs(corpus.splits[split]) for split in SPLITS}
      rows += [{'reading': reading, **row}
               for row in rows_for(f'{trained.config.model} ({workdir})', corpus, log_probs)]
  report = {'machine': machine_info(), 'export_dir': FLAGS.export_dir,
            'vocab_size': {'brown': brown.vocab.size, 'text': text.vocab.size}, 'rows': rows}
  print(format_report(report))
  if FLAGS.out:
    write_report(report, FLAGS.out, format_report)


if __name__ == '__main__':
  flags.DEFINE_string('export_dir', None, 'Where Brown is exported to and read back from.')
  flags.DEFINE_string('data_dir', '', 'TFDS data dir (Brown, and the text preparation).')
  flags.DEFINE_string('brown_run', '', 'A workdir trained on --dataset=brown (optional).')
  flags.DEFINE_string('text_run', '', 'A workdir trained on text:EXPORT_DIR (optional).')
  flags.DEFINE_string('out', '', 'If set, also writes OUT.json and OUT.md.')
  flags.mark_flag_as_required('export_dir')
  cli.run_experiment(main)
