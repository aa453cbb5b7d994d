"""Every model family and head trained on a fixed short config: their perplexities to every digit.

For a change that must leave the numbers as they are (a refactoring): run it on the checkout
before and after, and compare. It drives only the `nplm train` command (the interface that
stays), each run in a child, on a text corpus written from the tiny Brown fixture and on the
tiny Brown itself (through tests/readme_substitutions).

  python -m experiments.same_numbers --out=/tmp/same/after [--compare=/tmp/same/before/numbers.json]

`--checkout=DIR` runs another checkout's nplm (its directory first on PYTHONPATH), so one copy
of this script measures both sides.
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / 'tests' / 'fixtures' / 'brown_tiny'
SHORT = ['--feature_size=8', '--batch_size=16', '--eval_batch_size=64',
         '--epochs=3', '--patience=2', '--log_every=10', '--learning_rate=0.01']
NNLM = ['--model=nnlm', '--order=3', '--hidden_size=16']
# (name, corpus, flags): every family (window, stream, word2vec), every head and optimizer.
# Word vectors score no perplexity unless asked (nplm.config's --eval_splits=auto).
WORD_VECTORS_SCORED = '--eval_splits=train,valid,test'
CASES = [
    *[(f'nnlm {head}', 'text', [*NNLM, f'--head={head}'])
      for head in ('softmax', 'class', 'tree')],
    *[(f'nnlm {head}', 'text', [*NNLM, f'--head={head}', '--num_samples=8'])
      for head in ('is', 'nce', 'negative_sampling')],
    ('nnlm adaptive', 'text', [*NNLM, '--head=adaptive']),
    ('nnlm tree balanced', 'text', [*NNLM, '--head=tree', '--tree=balanced']),
    ('nnlm direct dropout', 'text', [*NNLM, '--direct', '--dropout=0.2', '--weight_decay=0.01']),
    ('nnlm sgd decay', 'text', [*NNLM, '--optimizer=sgd', '--learning_rate=0.1',
                                '--lr_decay=1e-3', '--weight_decay=1e-4']),
    ('nnlm sgd nce', 'text', [*NNLM, '--optimizer=sgd', '--learning_rate=0.1', '--head=nce',
                              '--num_samples=8', '--weight_decay=1e-4']),
    ('nnlm lazy_adam tree', 'text', [*NNLM, '--optimizer=lazy_adam', '--head=tree']),
    ('nnlm bfloat16 clip', 'text', [*NNLM, '--dtype=bfloat16', '--clip_norm=1']),
    ('nnlm tied linear', 'text', [*NNLM, '--hidden_size=8', '--tie_embeddings',
                                  '--lr_schedule=linear']),
    ('nnlm sgd plateau', 'text', [*NNLM, '--optimizer=sgd', '--learning_rate=0.5',
                                  '--lr_schedule=plateau', '--lr_factor=0.7',
                                  '--plateau_threshold=0.5', '--epochs=4', '--patience=4']),
    ('nnlm cosine warmup', 'text', [*NNLM, '--lr_schedule=cosine', '--warmup_steps=10',
                                    '--min_learning_rate=0.001', '--weight_decay=0.01']),
    ('nnlm chars', 'text', [*NNLM, '--tokens=chars']),
    ('nnlm vocab-parallel', 'text', [*NNLM, '--mesh=data:1,model:2']),
    ('transformer', 'text', ['--model=transformer', '--hidden_size=16', '--order=5', '--num_heads=2',
                             '--dropout=0.1']),
    ('rnn', 'text', ['--model=rnn', '--hidden_size=16', '--bptt_length=8', '--batch_size=4']),
    ('lstm is', 'text', ['--model=lstm', '--hidden_size=16', '--bptt_length=8', '--batch_size=4', '--head=is',
                         '--num_samples=8']),
    ('gru sgd', 'text', ['--model=gru', '--hidden_size=16', '--bptt_length=8', '--batch_size=4',
                         '--optimizer=sgd', '--learning_rate=0.5', '--num_layers=2']),
    ('cbow negative_sampling', 'text', ['--model=cbow', '--head=negative_sampling', '--optimizer=sgd',
                                        '--num_samples=4', '--window=2', '--subsample=1e-2',
                                        '--patience=0', WORD_VECTORS_SCORED]),
    ('skipgram tree', 'text', ['--model=skipgram', '--head=tree', '--optimizer=sgd', '--window=2',
                               '--patience=0', WORD_VECTORS_SCORED]),
    ('brown nnlm', 'brown', [*NNLM, '--unk_max_count=1']),
    ('brown lstm', 'brown', ['--model=lstm', '--hidden_size=16', '--bptt_length=8', '--batch_size=4']),
]
SPLITS = ('train', 'valid', 'test')


def write_text_corpus(directory: Path) -> str:
  """The fixture's paragraphs, tags stripped, one per line: 60% train, 20% valid, 20% test."""
  lines = []
  for path in sorted(FIXTURE.iterdir()):
    for paragraph in path.read_text().split('\n\n'):
      words = [token.rsplit('/', 1)[0] for token in paragraph.split()]
      if words:
        lines.append(' '.join(words))
  cuts = {'train': lines[:len(lines) * 6 // 10],
          'valid': lines[len(lines) * 6 // 10:len(lines) * 8 // 10],
          'test': lines[len(lines) * 8 // 10:]}
  directory.mkdir(parents=True, exist_ok=True)
  for split, split_lines in cuts.items():
    (directory / f'{split}.txt').write_text(''.join(line + '\n' for line in split_lines))
  return f'text:{directory}'


def train(case, out: Path, checkout: Path, text_dataset: str) -> tuple[str, dict]:
  name, corpus, flags = case
  workdir = out / 'runs' / name.replace(' ', '_')
  env = {**os.environ, 'PYTHONPATH': f'{checkout}{os.pathsep}{os.environ.get("PYTHONPATH", "")}',
         'JAX_NUM_CPU_DEVICES': '2', 'JAX_PLATFORMS': 'cpu'}
  if corpus == 'brown':
    command = [sys.executable, '-m', 'tests.readme_substitutions', 'nplm', 'train',
               '--dataset=brown']
  else:
    command = [sys.executable, '-m', 'nplm.cli', 'train', f'--dataset={text_dataset}']
  command += [*SHORT, *flags, f'--data_dir={out / "data"}', f'--workdir={workdir}']
  done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
  if done.returncode != 0:
    return name, {'error': (done.stderr.strip().splitlines() or ['?'])[-1]}
  summary = json.loads((workdir / 'summary.json').read_text())
  return name, {split: summary.get(f'{split}_ppl') for split in SPLITS}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--out', required=True, help='Receives runs/, data/, numbers.json.')
  parser.add_argument('--checkout', default=str(Path(__file__).resolve().parents[1]),
                      help='The checkout whose nplm trains (default: this one).')
  parser.add_argument('--compare', default='', help='numbers.json of another side.')
  parser.add_argument('--jobs', type=int, default=2)
  args = parser.parse_args()
  out, checkout = Path(args.out).resolve(), Path(args.checkout).resolve()
  out.mkdir(parents=True, exist_ok=True)
  text_dataset = write_text_corpus(out / 'corpus')
  # One preparation of each corpus before the parallel runs, so that they only read it.
  with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
    numbers = dict(pool.map(lambda case: train(case, out, checkout, text_dataset),
                            CASES[:1] + [c for c in CASES if c[1] == 'brown'][:1]))
    numbers.update(pool.map(lambda case: train(case, out, checkout, text_dataset),
                            [c for c in CASES if c[0] not in numbers]))
  numbers = {name: numbers[name] for name, _, _ in CASES}
  (out / 'numbers.json').write_text(json.dumps(numbers, indent=2) + '\n')
  other = json.loads(Path(args.compare).read_text()) if args.compare else {}
  print(f'| case | {" | ".join(SPLITS)} |' + (' same |' if other else ''))
  print('|---' * (len(SPLITS) + 1 + bool(other)) + '|')
  for name, result in numbers.items():
    cells = ([result['error']] + [''] * 2 if 'error' in result
             else [repr(result[split]) for split in SPLITS])
    same = f' {"yes" if other.get(name) == result else "NO: " + str(other.get(name))} |'
    print(f'| {name} | {" | ".join(cells)} |' + (same if other else ''))
  if other:
    print(f'{sum(other.get(n) == r for n, r in numbers.items())} of {len(numbers)} the same '
          'to every digit')


if __name__ == '__main__':
  main()
