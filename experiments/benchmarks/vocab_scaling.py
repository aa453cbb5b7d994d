r"""The train step's cost against the vocabulary size |V|, for every head and optimizer.

  python -m experiments.benchmarks.vocab_scaling --out=experiments/results/vocab_scaling

One model (an NNLM of Table 1's MLP9 shape: n = 5, m = 30, h = 100) under every head, with
each --optimizers, at each --vocab_sizes: |V| = 10k to 1M words. The training ids are
synthetic (Zipf's law over the vocabulary, as natural text roughly follows; the trees,
classes and proposals are built from their counts), since no corpus at hand has 1M types.
Each (|V|, optimizer) times every head on the trainer's own jitted step, its timed runs
interleaved round-robin across the heads, and reports the median seconds per step; the
table gives each head's step time and its speed-up over the softmax, and the PNG draws step
time against |V| on log axes. With row-sparse updates (sgd, lazy_adam) the sampled heads
read and write a few hundred rows per step whatever |V| is, so their lines should stay flat;
the softmax's grows with |V|, and AdamW's dense update makes every head's grow.
"""

import gc

import numpy as np
from absl import app, flags

from experiments.benchmarks.harness import (SHAPES, benchmark_batches, interleaved_rates,
                                            jax_runner, machine_info, machine_line,
                                            shape_config, table_lines, write_report)
from nplm.cli import refuse_arguments, run_experiment
from nplm.data import batching
from nplm.heads import HEADS, head_class
from nplm.training.config_checks import validated

BASELINE = 'softmax'
DEFAULT_HEADS = ('softmax', 'class', 'tree', 'is', 'nce', 'adaptive')


def zipf_ids(vocab_size: int, num_tokens: int, seed: int = 0):
  """(ids, counts): tokens drawn with P(rank r) ∝ 1 / (r + 1), and every word's count + 1
  (no word of the vocabulary has probability 0 under the trees, classes or proposals)."""
  probs = 1.0 / np.arange(1, vocab_size + 1)
  ids = np.random.default_rng(seed).choice(vocab_size, num_tokens, p=probs / probs.sum())
  counts = np.bincount(ids, minlength=vocab_size) + 1
  order = np.argsort(-counts, kind='stable')  # The vocabulary is sorted by frequency.
  rank = np.empty_like(order)
  rank[order] = np.arange(vocab_size)
  return rank[ids].astype(np.int32), counts[order]


def time_heads(vocab_size: int, optimizer: str, heads, settings: dict) -> dict:
  """{head: rate summary} at one |V| with one optimizer, the runs interleaved."""
  ids, counts = zipf_ids(vocab_size, settings['tokens'])
  runners = {}
  for head in heads:
    sampled = ({'num_samples': settings['num_samples']}
               if 'num_samples' in head_class(head).knobs else {})
    config = validated(shape_config(SHAPES['MLP9'], settings['batch_size']).replace(
        head=head, optimizer=optimizer, **sampled))
    padded = batching.pad_split(ids, config.order, boundary_id=0)
    runners[head], _ = jax_runner(config, counts, padded)
  batches = benchmark_batches(len(ids), settings['batch_size'], settings['steps'])
  rates = interleaved_rates(runners, batches, settings['repeats'])
  del runners
  gc.collect()  # The next |V|'s states need the memory: a 1M-row table and its moments.
  return rates


def format_report(report: dict, markdown: bool = False) -> str:
  heads = report['heads']
  lines = [machine_line(report['machine']),
           f'MLP9 NNLM, batch {report["batch_size"]}, {report["num_samples"]} samples; '
           f'median of {report["repeats"]} interleaved runs of {report["steps"]} steps; '
           'ms per step (speed-up over the softmax)']
  for optimizer, by_size in report['results'].items():
    rows = [[f'|V| ({optimizer})', *heads]]
    for size, times in by_size.items():
      size = int(size)
      base = times[BASELINE]['seconds_per_step'] if BASELINE in times else None
      rows.append([f'{size:,}'] + [
          f'{1e3 * times[h]["seconds_per_step"]:.1f}'
          + (f' ({base / times[h]["seconds_per_step"]:.1f}×)' if base and h != BASELINE
             else '') for h in heads])
    lines += [''] + table_lines(rows, markdown)
  lines += ['', 'Step time at the largest |V| timed over the smallest:'] + [
      f'  {o}: ' + ', '.join(f'{h} {ratio:.2f}×' for h, ratio in flatness(by_size).items())
      for o, by_size in report['results'].items()]
  if report['unfinished']:
    lines += ['', f'Unfinished: {report["unfinished"]}.']
  return '\n'.join(lines)


def flatness(by_size: dict) -> dict:
  """Each head's step time at the largest |V| timed over its time at the smallest."""
  sizes = sorted(by_size, key=int)
  first, last = by_size[sizes[0]], by_size[sizes[-1]]
  return {h: last[h]['seconds_per_step'] / first[h]['seconds_per_step'] for h in first}


def plot(report: dict, path: str) -> None:
  """Step time against |V| on log axes, one panel per optimizer, one line per head."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  results = report['results']
  fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4.2),
                           sharey=True, squeeze=False)
  for ax, (optimizer, by_size) in zip(axes[0], results.items()):
    sizes = sorted(by_size, key=int)
    for head in report['heads']:
      times = [1e3 * by_size[s][head]['seconds_per_step'] for s in sizes]
      sizes_int = [int(s) for s in sizes]
      ax.plot(sizes_int, times, marker='o', label=head)
    ax.set(xscale='log', yscale='log', xlabel='|V| (words)', title=f'--optimizer={optimizer}')
    ax.grid(True, which='both', alpha=0.3)
  axes[0][0].set_ylabel('ms per train step (median)')
  axes[0][-1].legend(loc='upper left', fontsize=8)
  device = report['machine']['device'] if report['machine']['backend'] != 'cpu' else (
      f'{report["machine"]["cpu"]}, {report["machine"]["cores"]} cores')
  fig.suptitle(f'Train step against |V|: MLP9, batch {report["batch_size"]} ({device})',
               fontsize=10)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def main(argv):
  refuse_arguments(argv)
  f = flags.FLAGS
  unknown = sorted(set(f.heads) - set(HEADS))
  if unknown:
    raise app.UsageError(f'unknown --heads {", ".join(unknown)}; known: {", ".join(HEADS)}')
  heads = [BASELINE] + [h for h in f.heads if h != BASELINE]
  sizes = sorted(int(s) for s in f.vocab_sizes)
  settings = dict(batch_size=f.batch_size, steps=f.steps, repeats=f.repeats,
                  num_samples=f.num_samples, tokens=f.tokens)
  results, machine = {}, machine_info()
  for optimizer in f.optimizers:
    results[optimizer] = {}
    for size in sizes:
      results[optimizer][str(size)] = time_heads(size, optimizer, heads, settings)
      times = results[optimizer][str(size)]
      print(f'{optimizer} |V|={size:,}: ' + ', '.join(
          f'{h} {1e3 * times[h]["seconds_per_step"]:.1f} ms' for h in heads), flush=True)
      done = sum(len(by_size) for by_size in results.values())
      left = len(f.optimizers) * len(sizes) - done
      result = {'machine': machine, 'heads': heads, 'optimizers': list(f.optimizers),
                'vocab_sizes': sizes, 'results': results, **settings,
                'unfinished': f'{left} (optimizer, |V|) points not yet timed' if left else ''}
      if f.out:  # After every point: a run cut short keeps what it measured.
        write_report(result, f.out, format_report)
        plot(result, f'{f.out}.png')
  print(format_report(result))


if __name__ == '__main__':
  flags.DEFINE_list('vocab_sizes', ['10000', '30000', '100000', '300000', '1000000'],
                    'Vocabulary sizes |V| to time.')
  flags.DEFINE_list('heads', list(DEFAULT_HEADS), 'Heads to time (the softmax always).')
  flags.DEFINE_list('optimizers', ['sgd', 'lazy_adam'], 'Optimizers (sgd, lazy_adam, adamw).')
  flags.DEFINE_integer('batch_size', 256, 'Examples per update.')
  flags.DEFINE_integer('steps', 10, 'Consecutive updates in one timed run.')
  flags.DEFINE_integer('repeats', 3, 'Timed runs per head; the median is reported.')
  flags.DEFINE_integer('num_samples', 100, 'k of the sampling heads.')
  flags.DEFINE_integer('tokens', 200_000, 'Synthetic training tokens per |V|.')
  flags.DEFINE_string('out', '', 'If set, writes OUT.json, OUT.md and OUT.png.')
  run_experiment(main)
