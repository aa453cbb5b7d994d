r"""nplm's modified Kneser-Ney against KenLM's `lmplz` on the same exported token streams.

  python -m nplm.cli.export --out=/tmp/nplm_export
  python -m experiments.kenlm_check --export_dir=/tmp/nplm_export \
      --kenlm_bin=/path/to/kenlm/build/bin --out=/tmp/kenlm_check

KenLM (https://github.com/kpu/kenlm; its sdist on PyPI, `kenlm`, builds `lmplz` and `query`
with cmake and Boost) is the established implementation: interpolated modified Kneser-Ney
with three discounts per order. The events are made the same as nplm's: each split goes
to KenLM as one line, so KenLM's <s> stands where nplm pads with `</text>` (the contexts
of a split's first n-1 tokens) and the final </s> that KenLM appends is left out of the
score. KenLM reserves `<unk>` and refuses it in training text, so the exported `<unk>`
becomes the ordinary word `<rare>` on both sides. Writes kenlm_check.json and .md in --out.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

from absl import app, flags

from nplm.cli import run_experiment
from nplm.data.vocab import TEXT_END, UNK, Vocabulary
from nplm.files import write_json_atomically, write_text_atomically
from nplm.ngram import KneserNey, perplexity

KENLM_UNK = '<rare>'
SPLITS = ('train', 'valid', 'test')


def read_export(export_dir: Path) -> tuple[Vocabulary, dict[str, list[str]]]:
  vocab = Vocabulary.load(export_dir / 'vocab.txt')
  tokens = {split: (export_dir / f'{split}.txt').read_text().split() for split in SPLITS}
  unknown = {t for split in tokens.values() for t in split} - set(vocab.words)
  if unknown:
    raise ValueError(f'{export_dir} has tokens outside its vocab.txt, e.g. {sorted(unknown)[:3]}')
  return vocab, tokens


def kenlm_log10_probs(query: Path, arpa: Path, one_line: Path) -> list[float]:
  """log10 p of every token of the one-line file, without the final </s>, from `query`."""
  with one_line.open() as text:
    output = subprocess.run([str(query), '-v', 'word', str(arpa)], stdin=text, check=True,
                            capture_output=True, text=True).stdout
  scores = []
  for entry in output.replace('\n', '\t').split('\t'):
    entry = entry.strip()
    if '=' not in entry or entry.startswith(('Total:', 'Perplexity', 'OOVs', 'Tokens')):
      continue
    word, rest = entry.rsplit('=', 1)
    scores.append((word, float(rest.split()[2])))
  if not scores or scores[-1][0] != '</s>':
    raise RuntimeError(f'unexpected output from {query}: {output[:200]!r}')
  return [score for _, score in scores[:-1]]


def compare(export_dir: Path, kenlm_bin: Path, out: Path, orders: list[int]) -> dict:
  vocab, tokens = read_export(export_dir)
  out.mkdir(parents=True, exist_ok=True)
  one_line = {}
  for split, words in tokens.items():
    one_line[split] = out / f'{split}.one.txt'
    renamed = [KENLM_UNK if w == UNK else w for w in words]
    write_text_atomically(one_line[split], ' '.join(renamed) + '\n')
  ids = {split: vocab.encode(words) for split, words in tokens.items()}
  boundary = int(vocab.encode([TEXT_END])[0])
  results = {}
  for order in orders:
    arpa = out / f'kn{order}.arpa'
    with one_line['train'].open() as text, (out / f'kn{order}.log').open('w') as log:
      subprocess.run([str(kenlm_bin / 'lmplz'), '-o', str(order), '-S', '20%', '-T', str(out),
                      '--arpa', str(arpa)], stdin=text, stderr=log, check=True)
    ours = KneserNey.fit(ids['train'], order, vocab.size, boundary)
    for split in ('valid', 'test'):
      kenlm_scores = kenlm_log10_probs(kenlm_bin / 'query', arpa, one_line[split])
      if len(kenlm_scores) != len(ids[split]):
        raise RuntimeError(f'KenLM scored {len(kenlm_scores)} tokens of {split}, '
                           f'not {len(ids[split])}')
      kenlm_ppl = 10 ** (-sum(kenlm_scores) / len(kenlm_scores))
      nplm_ppl = perplexity(ours.log_prob_split(ids[split]))
      results[f'KN{order}/{split}'] = {'kenlm': kenlm_ppl, 'nplm': nplm_ppl,
                                       'relative_difference': nplm_ppl / kenlm_ppl - 1}
  report = {'vocab_size': vocab.size, 'tokens': {s: len(t) for s, t in tokens.items()},
            'results': results}
  write_json_atomically(out / 'kenlm_check.json', report)
  write_text_atomically(out / 'kenlm_check.md', markdown(report))
  return report


def markdown(report: dict) -> str:
  lines = [f'Modified Kneser-Ney, |V| = {report["vocab_size"]:,}: KenLM lmplz against nplm on '
           'the same exported tokens.', '',
           '| model / split | KenLM | nplm | nplm / KenLM - 1 |', '|---|---|---|---|']
  for name, row in report['results'].items():
    lines.append(f'| {name} | {row["kenlm"]:.3f} | {row["nplm"]:.3f} '
                 f'| {100 * row["relative_difference"]:+.4f}% |')
  return '\n'.join(lines) + '\n'


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
  options = flags.FLAGS
  kenlm_bin = Path(options.kenlm_bin)
  missing = [tool for tool in ('lmplz', 'query') if not (kenlm_bin / tool).exists()]
  if missing:
    print(f'error: {kenlm_bin} lacks {", ".join(missing)}; build KenLM and pass its bin/',
          file=sys.stderr)
    sys.exit(2)
  try:
    report = compare(Path(options.export_dir), kenlm_bin, Path(options.out),
                     [int(order) for order in options.orders])
  except (OSError, ValueError) as error:
    print(f'error: {error}', file=sys.stderr)
    sys.exit(2)
  print(markdown(report))
  worst = max(abs(row['relative_difference']) for row in report['results'].values())
  print(f'Largest difference: {100 * worst:.4f}% ({"within" if worst <= 0.01 else "beyond"} 1%).'
        if math.isfinite(worst) else 'No comparison made.')


if __name__ == '__main__':
  flags.DEFINE_string('export_dir', None, 'Output of `nplm export` (python -m nplm.cli.export).')
  flags.DEFINE_string('kenlm_bin', None, 'KenLM build/bin directory holding lmplz and query.')
  flags.DEFINE_string('out', '/tmp/kenlm_check', 'Receives the ARPA files and the report.')
  flags.DEFINE_list('orders', ['3', '4', '5'], 'Orders to compare.')
  flags.mark_flags_as_required(['export_dir', 'kenlm_bin'])
  run_experiment(main)
