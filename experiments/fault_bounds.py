"""Issue 42's cases for experiments.fault_injection --mode=cases: requests that cannot fit
(an n-gram order, a batch larger than an epoch, a memory cap set by ulimit -v), word2vec on
a text of one repeated line, and nplm clean on a workdir and a data dir."""

import shutil
import sys

import numpy as np

from experiments.fault_harness import nplm, run
from experiments.fault_inputs import watched

CAP_KB = 4_000_000  # ulimit -v: 4 GB of address space, JAX's own ~2 GB of mappings included.


def _capped(argv: list[str], kilobytes: int) -> list[str]:
  """argv run under `ulimit -v` (bash, then exec: the same process is watched)."""
  quoted = ' '.join(f"'{a}'" for a in argv)
  return ['bash', '-c', f'ulimit -v {kilobytes} && exec {quoted}', sys.executable]


def case_ngram_order(c) -> None:
  """42.1: nplm ngram --order=20 on 200,000 tokens of 50,000 types: said before, per order."""
  text = c.out / 'ngram_big.txt'
  rng = np.random.default_rng(0)
  ranks = 1 / np.arange(1, 200_001)
  words = rng.choice(len(ranks), 200_000, p=ranks / ranks.sum())
  text.write_text(''.join(' '.join(f'w{w}' for w in words[i:i + 20]) + '\n'
                          for i in range(0, len(words), 20)))
  common = [f'--dataset=text:{text}', f'--data_dir={c.out / "data_ngram"}', '--unk_max_count=0']
  argv = nplm('ngram', *common, '--order=20', f'--out={c.out / "kn20"}')
  result, seen = watched(argv, c.checkout)
  lines = sum('counted the' in line for line in result['stderr'])
  c.row('42.1 nplm ngram --order=20 (200k tokens)', argv, result,
        f'{seen}; {lines} per-order lines')
  argv = _capped(nplm('ngram', *common, '--order=20', f'--out={c.out / "kn20_capped"}'),
                 2_300_000)
  result, seen = watched(argv, c.checkout)
  c.row('42.1 the same under ulimit -v 2.3 GB', argv, result, seen)


def case_batch_over_epoch(c) -> None:
  """42.2: --batch_size larger than an epoch's examples, per family."""
  # The knobs a family does not read at their defaults (the cases' flags set --order 3).
  for label, flags in (('nnlm', {}), ('lstm', {'model': 'lstm', 'bptt_length': 35, 'order': 5}),
                       ('skipgram', {'model': 'skipgram', 'head': 'negative_sampling',
                                     'optimizer': 'sgd', 'order': 5, 'hidden_size': 100,
                                     'chunk_positions': 0})):
    argv = c.train_argv(f'batch_{label}', batch_size=1_000_000, **flags)
    result, seen = watched(argv, c.checkout)
    c.row(f'42.2 {label} --batch_size=1000000', argv, result, seen)


def case_ulimit(c) -> None:
  """42.3: a request within MemAvailable but over ulimit -v."""
  argv = _capped(c.train_argv('ulimit', hidden_size=1_200_000, eval_batch_size=64), CAP_KB)
  result, seen = watched(argv, c.checkout)
  c.row(f'42.3 --hidden_size=1200000 (~8 GB) under ulimit -v {CAP_KB // 1_000_000} GB',
        argv, result, seen)


def case_repeated_line(c) -> None:
  """42.4: skipgram_ns on a text of one repeated 8-word line."""
  text = c.out / 'one_line.txt'
  text.write_text('alpha bravo charlie delta echo foxtrot golf hotel\n' * 5000)
  argv = nplm('train', '--flagfile=skipgram_ns', f'--dataset=text:{text}', '--epochs=1',
              f'--data_dir={c.out / "data_one_line"}', f'--workdir={c.out / "one_line"}')
  result = run(argv, c.checkout)
  c.row('42.4 skipgram_ns on one repeated line', argv, result,
        next((l.strip() for l in result['stdout'].splitlines() if 'valid' in l), 'no valid'))


def case_clean(c) -> None:
  """42.5: nplm clean lists and removes what is not needed, never what is."""
  copy = c.out / 'clean_copy'
  shutil.copytree(c.out / 'reference', copy)
  for label, extra in (('list', []), ('--remove_unneeded', ['--remove_unneeded']),
                       ('--remove=best/* (needed)',
                        [f'--remove=best/{next((copy / "best").iterdir()).name}'])):
    argv = nplm('clean', f'--workdir={copy}', *extra)
    result = run(argv, c.checkout)
    c.row(f'42.5 nplm clean --workdir {label}', argv, result,
          result['stdout'].strip().splitlines()[-1][:120] if result['stdout'].strip() else '')
  argv = nplm('clean', f'--data_dir={c.data}')
  result = run(argv, c.checkout)
  c.row('42.5 nplm clean --data_dir', argv, result,
        result['stdout'].strip().splitlines()[-1][:120] if result['stdout'].strip() else '')


CASES = (case_ngram_order, case_batch_over_epoch, case_ulimit, case_repeated_line, case_clean)
