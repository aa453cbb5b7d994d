r"""Preparing a large corpus: wall time and peak memory, and what the memory is spent on.

  python -m experiments.benchmarks.prepare --out=/tmp/prep            # 100M tokens, 300k types
  python -m experiments.benchmarks.prepare --out=/tmp/prep --tokens=1000000 --types=5000

Writes a text:DIR corpus of --tokens tokens (Zipf-distributed over --types word types, lines
of 1 to 49 words, 98/1/1% of the lines in train/valid/test, as WikiText-103's proportions),
then, each in a fresh child process so that its peak resident memory is its own:
  1. prepare: nplm.data.prepared streams the files into the TFDS data dir (array_record);
  2. load: reads the prepared ids back and builds the corpus (vocabulary, remapped ids),
     as a training run starts.
Prints each step's median wall time over --repeats runs, its peak resident memory (VmHWM),
the memory of the interpreter with its imports before it started (VmRSS), and the sizes of
the structures the step must hold; --trace adds where the Python memory of a preparation
went (tracemalloc). --out keeps the corpus between runs (regenerated only if its size
differs); the prepared dataset is deleted before each timed preparation.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from absl import flags

from experiments.benchmarks.harness import machine_info, write_report
from nplm.cli import run_experiment

FLAGS = flags.FLAGS
SPLIT_SHARES = {'train': 0.98, 'valid': 0.01, 'test': 0.01}


def word_strings(types: int) -> list[str]:
  """Distinct lowercase words, shortest first (frequent words are short, as in text)."""
  letters = 'abcdefghijklmnopqrstuvwxyz'
  words, length = [], 1
  while len(words) < types:
    for index in range(26 ** length):
      word = ''.join(letters[(index // 26 ** k) % 26] for k in range(length))
      words.append(word)
      if len(words) == types:
        break
    length += 1
  return words


def write_corpus(directory: Path, tokens: int, types: int, seed: int = 0) -> dict:
  """train/valid/test.txt with `tokens` Zipf(1) tokens in all (line ends not counted)."""
  rng = np.random.default_rng(seed)
  words = np.array(word_strings(types), dtype=object)
  cdf = np.cumsum(1.0 / (np.arange(types) + 2.7))
  cdf /= cdf[-1]
  directory.mkdir(parents=True, exist_ok=True)
  boundaries = np.cumsum([int(tokens * SPLIT_SHARES[s]) for s in ('train', 'valid')])
  written, files = 0, {}
  for split, end in zip(('train', 'valid', 'test'), [*boundaries, tokens]):
    with open(directory / f'{split}.txt', 'w', encoding='utf-8') as f:
      while written < end:
        count = min(1 << 20, end - written)
        ids = np.searchsorted(cdf, rng.random(count))
        lengths = rng.integers(1, 50, size=count // 25 + 2)
        cuts = np.cumsum(lengths)
        cuts = cuts[cuts < count]
        chunk = words[ids]
        f.write(''.join(' '.join(line) + '\n' for line in np.split(chunk, cuts)))
        written += count
    files[split] = (directory / f'{split}.txt').stat().st_size
  return files


def generated_corpus(corpus_dir: Path, marker: Path, tokens: int, types: int) -> dict:
  """The marker's record {'wanted', 'files' (bytes per split), 'seconds'} of the corpus in
  `corpus_dir`, written first unless the marker says it holds these tokens and types (a
  100M-token corpus takes half a minute)."""
  wanted = {'tokens': tokens, 'types': types}
  if not marker.exists() or json.loads(marker.read_text())['wanted'] != wanted:
    started = time.perf_counter()
    files = write_corpus(corpus_dir, tokens, types)
    marker.write_text(json.dumps({'wanted': wanted, 'files': files,
                                  'seconds': time.perf_counter() - started}))
  return json.loads(marker.read_text())


_CHILD = r'''
import json, sys, time, tracemalloc
def status(key):
  for line in open('/proc/self/status'):
    if line.startswith(key):
      return int(line.split()[1]) * 1024
from nplm.config import Config
from nplm.data import datasets, prepared
config = Config(workdir='unused', dataset='text:' + sys.argv[2], data_dir=sys.argv[3]).resolved()
sites = {}
if sys.argv[4] == 'trace':  # Python's allocations by line, once the train split is generated.
  generate = prepared.NplmTokens._generate_examples
  def traced(self, split):
    yield from generate(self, split)
    if split == 'train':
      stats = tracemalloc.take_snapshot().statistics('lineno')[:6]
      sites.update({f'{s.traceback[0].filename.split("site-packages/")[-1]}:'
                    f'{s.traceback[0].lineno}': s.size for s in stats})
  prepared.NplmTokens._generate_examples = traced
  tracemalloc.start()
before = status('VmRSS')
started = time.perf_counter()
if sys.argv[1] == 'prepare':
  tokens = datasets.load_prepared(config)
  sizes = {'types': len(tokens.types), 'sites_after_train': sites}
else:
  corpus = datasets.load_dataset(config)
  sizes = {'vocab': corpus.vocab.size,
           'tokens': {name: len(ids) for name, ids in corpus.splits.items()},
           'id_bytes': sum(ids.nbytes for ids in corpus.splits.values())}
seconds = time.perf_counter() - started
print(json.dumps({'seconds': seconds, 'rss_before': before, 'peak': status('VmHWM'), **sizes}))
'''


def child_command(step: str, corpus_dir: Path, data_dir: Path, trace: bool = False) -> list:
  """The command line of one timed step (prepare or load) in a fresh interpreter."""
  return [sys.executable, '-c', _CHILD, step, str(corpus_dir), str(data_dir),
          'trace' if trace else 'no']


def child(step: str, corpus_dir: Path, data_dir: Path, trace: bool = False) -> dict:
  result = subprocess.run(child_command(step, corpus_dir, data_dir, trace),
                          capture_output=True, text=True, check=False)
  if result.returncode != 0:
    sys.exit(f'error: the {step} step failed:\n{result.stderr[-3000:]}')
  return json.loads(result.stdout.strip().splitlines()[-1])


def median_run(runs: list[dict]) -> dict:
  """The run of median wall time, with every run's seconds and peak beside it."""
  ordered = sorted(runs, key=lambda run: run['seconds'])
  return {**ordered[len(ordered) // 2], 'all_seconds': [run['seconds'] for run in runs],
          'all_peaks': [run['peak'] for run in runs]}


def format_report(report: dict, markdown: bool = False) -> str:
  mib = 1 << 20
  rows = [('prepare', report['prepare']), ('load', report['load'])]
  machine = report['machine']
  lines = [f'{machine["cpu"]}, {machine["cores"]} cores, {machine["memory_gib"]:.0f} GiB, '
           f'Python {machine["python"]}',
           f'corpus: {report["tokens"]:,} words + line ends, {report["types"]:,} types, '
           f'{report["text_bytes"] / mib:,.0f} MiB of text (generated in '
           f'{report["generate_seconds"]:.0f} s); median of {report["repeats"]} runs of each '
           'step, each in a fresh process', '']
  header = ('step', 'wall s', 'range s', 'peak MiB', 'before MiB', 'step MiB')
  lines.append('| ' + ' | '.join(header) + ' |' if markdown else
               '  '.join(f'{h:>10}' for h in header))
  if markdown:
    lines.append('|' + '---|' * len(header))
  for name, row in rows:
    cells = (name, f'{row["seconds"]:.1f}',
             f'{min(row["all_seconds"]):.1f}-{max(row["all_seconds"]):.1f}',
             f'{row["peak"] / mib:,.0f}',
             f'{row["rss_before"] / mib:,.0f}', f'{(row["peak"] - row["rss_before"]) / mib:,.0f}')
    lines.append('| ' + ' | '.join(cells) + ' |' if markdown else
                 '  '.join(f'{c:>10}' for c in cells))
  load = report['load']
  lines += ['', f'prepared types: {report["prepare"]["types"]:,}; vocabulary after load: '
            f'{load["vocab"]:,}; split tokens: {load["tokens"]}',
            f'load holds the ids of every split: {load["id_bytes"] / mib:,.0f} MiB of int32 '
            '(read chunk by chunk into one array per split, then remapped to vocabulary ids)']
  if 'traced_prepare' in report:
    lines += ['', 'Python memory by line of code once the train split is generated '
              '(tracemalloc, a second preparation):']
    lines += [f'  {size / mib:8,.0f} MiB  {site}'
              for site, size in report['traced_prepare']['sites_after_train'].items()]
  return '\n'.join(lines) + '\n'


def main(argv):
  del argv
  out = Path(FLAGS.out)
  corpus_dir, data_dir = out / 'corpus', out / 'tfds'
  generated = generated_corpus(corpus_dir, out / 'corpus.json', FLAGS.tokens, FLAGS.types)
  runs = {'prepare': [], 'load': []}
  for _ in range(FLAGS.repeats):
    shutil.rmtree(data_dir, ignore_errors=True)
    for step in runs:
      runs[step].append(child(step, corpus_dir, data_dir))
  memory_gib = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / (1 << 30)
  report = {'machine': {**machine_info(), 'memory_gib': memory_gib}, 'tokens': FLAGS.tokens,
            'types': FLAGS.types, 'text_bytes': sum(generated['files'].values()),
            'generate_seconds': generated['seconds'], 'repeats': FLAGS.repeats,
            **{step: median_run(step_runs) for step, step_runs in runs.items()}}
  if FLAGS.trace:  # A second, slower preparation: where its Python memory went.
    shutil.rmtree(data_dir)
    report['traced_prepare'] = child('prepare', corpus_dir, data_dir, trace=True)
  print(format_report(report))
  if FLAGS.report:
    write_report(report, FLAGS.report, format_report)


if __name__ == '__main__':
  flags.DEFINE_string('out', None, 'Directory for the generated corpus and its preparation.')
  flags.DEFINE_integer('tokens', 100_000_000, 'Words in the generated corpus.')
  flags.DEFINE_integer('types', 300_000, 'Distinct words it draws from (Zipf).')
  flags.DEFINE_integer('repeats', 3, 'Preparations (and loads) timed; the median is reported.')
  flags.DEFINE_string('report', '', 'If set, also writes REPORT.json and REPORT.md.')
  flags.DEFINE_bool('trace', False, 'Also prepare once under tracemalloc and list where the '
                    'Python memory went (slower; not timed).')
  flags.mark_flag_as_required('out')
  run_experiment(main)
