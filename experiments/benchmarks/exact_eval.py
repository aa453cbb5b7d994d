r"""Exact evaluation's speed against |V|: the per-token log-prob pass, and how near the output
layer's matmuls run to this machine's matmul rate.

  python -m experiments.benchmarks.exact_eval --out=experiments/results/exact_eval/exact_eval
  python -m experiments.benchmarks.exact_eval --vocab_sizes=10000,30000 --tokens=5000

An NNLM of Table 1's --shape (MLP9: n = 5, m = 30, h = 100, no direct connections, so the
output layer reads D = h = 100) under the softmax head scores a split of --tokens synthetic
tokens (Zipf's law over each |V| in --vocab_sizes) exactly: the feed's own jitted scoring
step over eval batches of --eval_batch_size positions, the pass that validation and
evaluation run (nplm.training.feed). One untimed pass compiles; the median of --repeats
timed passes gives tokens/s. Where [batch, |V|] scores would exceed the output layer's
plain_bytes(), the normalizer is summed over chunks of CHUNK_BYTES (nplm.heads.output_layer).

The output layer costs 2·D·|V| FLOPs per token (s(w,h) = b_w + o_w·h for every word), the
model 2·(n-1)·m·h more (tanh(d + Hx); 0 without hidden units); the achieved output-layer
FLOP/s (all of the pass's time charged to it) is set against two matmul rates measured in
the same run by a plain jitted float32 matmul: [eval batch, D] @ [D, rows of one chunk],
the output layer's own shape, and a square --square³ one. At the largest |V| the tree and
adaptive heads are timed too: their exact log p needs no full softmax (the tree reads a
path, the adaptive head a shortlist and narrow tails), so they have no FLOP figure here.
"""

import gc

import jax
import numpy as np
from absl import flags

from experiments.benchmarks import harness
from nplm import parallel
from nplm.cli import refuse_arguments, run_experiment
from nplm.heads.output_layer import chunk_rows
from nplm.lm import build_language_model
from nplm.training.window_feed import WindowFeed
from nplm.training.config_checks import validated

LARGEST_ONLY = ('tree', 'adaptive')
# One matmul is short and a shared machine noisy: its median over many calls, cheaply.
MATMUL_REPEATS = 15


def zipf_split(vocab_size: int, num_tokens: int, seed: int = 0):
  """(ids, counts): tokens drawn with P(id r) ∝ 1 / (r + 1), and counts in that order
  (frequency-sorted, none zero: the tree and the adaptive cutoffs are built from them)."""
  probs = 1.0 / np.arange(1, vocab_size + 1)
  ids = np.random.default_rng(seed).choice(vocab_size, num_tokens, p=probs / probs.sum())
  counts = np.maximum(1, np.round(1e9 * probs)).astype(np.int64)
  return ids.astype(np.int32), counts


def flops_per_token(config, output_width: int, vocab_size: int) -> tuple[int, int]:
  """(the output layer's, the NNLM's own) FLOPs per token scored."""
  context = (config.order - 1) * config.feature_size
  return 2 * output_width * vocab_size, 2 * context * config.hidden_size


def time_pass(config, counts, ids, repeats: int) -> dict:
  """The median seconds of the exact log-prob pass over `ids` (compiled first, untimed)."""
  lm = build_language_model(config, counts)
  mesh = parallel.make_mesh()
  feed = WindowFeed(config, lm, {'valid': ids}, boundary_id=0, mesh=mesh)
  params = jax.jit(lambda key: WindowFeed.initial_params(config, lm, key))(jax.random.key(0))

  def run_pass():
    pieces, _ = feed.scoring_pass(params, feed.splits['valid'], len(ids))
    return jax.block_until_ready([log_p for log_p, _ in pieces])

  run_pass()  # Compiles.
  seconds, _ = harness.timed_runs(run_pass, repeats)
  return {'seconds': float(np.median(seconds)), 'runs': seconds,
          'tokens_per_second': len(ids) / float(np.median(seconds)),
          'output_width': lm.model.output_width}


def softmax_row(config, vocab_size: int, settings: dict) -> dict:
  """One |V| under the softmax head: tokens/s, FLOP/s and their shares of the matmul rates."""
  ids, counts = zipf_split(vocab_size, settings['tokens'])
  timed = time_pass(config.replace(head='softmax'), counts, ids, settings['repeats'])
  width, batch = timed['output_width'], config.eval_batch_size
  rows = chunk_rows(batch, vocab_size)
  output, model = flops_per_token(config, width, vocab_size)
  chunk_rate = harness.matmul_flops_per_second(batch, width, rows, MATMUL_REPEATS)
  output_rate = output * timed['tokens_per_second']
  return {'head': 'softmax', 'vocab_size': vocab_size, 'chunk_rows': rows,
          'chunks': -(-vocab_size // rows), **timed,
          'output_flops_per_token': output, 'model_flops_per_token': model,
          'output_flops_per_second': output_rate,
          'total_flops_per_second': (output + model) * timed['tokens_per_second'],
          'chunk_matmul_flops_per_second': chunk_rate,
          'share_of_chunk_matmul': output_rate / chunk_rate,
          'share_of_square_matmul': output_rate / settings['square_rate']}


def structured_row(config, head: str, vocab_size: int, settings: dict) -> dict:
  """One |V| under a head whose exact log p reads part of the vocabulary: tokens/s."""
  ids, counts = zipf_split(vocab_size, settings['tokens'])
  timed = time_pass(validated(config.replace(head=head)), counts, ids, settings['repeats'])
  return {'head': head, 'vocab_size': vocab_size, **timed}


def format_report(report: dict, markdown: bool = False) -> str:
  lines = [harness.machine_line(report['machine']),
           f'{report["shape"]} NNLM (output layer reads D = {report["output_width"]}), '
           f'exact log p of {report["tokens"]:,} Zipf tokens in eval batches of '
           f'{report["eval_batch_size"]:,}; median of {report["repeats"]} passes, compile '
           f'excluded. Square {report["square"]}³ float32 matmul: '
           f'{report["square_flops_per_second"] / 1e9:,.1f} GFLOP/s.']
  vocabulary = r'\|V\|' if markdown else '|V|'  # A bare | would split a markdown cell.
  rows = [['head', vocabulary, 'rows per chunk', 'tokens/s', 'output GFLOP/s',
           'chunk matmul GFLOP/s', 'share of chunk matmul', 'share of square matmul']]
  for row in report['rows']:
    flops = 'output_flops_per_second' in row
    rows.append([row['head'], f'{row["vocab_size"]:,}',
                 f'{row["chunk_rows"]:,} × {row["chunks"]}' if flops else '',
                 f'{row["tokens_per_second"]:,.0f}',
                 f'{row["output_flops_per_second"] / 1e9:,.1f}' if flops else '',
                 f'{row["chunk_matmul_flops_per_second"] / 1e9:,.1f}' if flops else '',
                 f'{row["share_of_chunk_matmul"]:.0%}' if flops else '',
                 f'{row["share_of_square_matmul"]:.0%}' if flops else ''])
  return '\n'.join(lines + [''] + harness.table_lines(rows, markdown))


def main(argv):
  refuse_arguments(argv)
  f = flags.FLAGS
  config = harness.shape_config(harness.SHAPES[f.shape], batch_size=f.eval_batch_size).replace(
      eval_batch_size=f.eval_batch_size)
  square_rate = harness.matmul_flops_per_second(f.square, f.square, f.square, MATMUL_REPEATS)
  settings = dict(tokens=f.tokens, repeats=f.repeats, square_rate=square_rate)
  sizes = sorted(int(s) for s in f.vocab_sizes)
  report = {'machine': harness.machine_info(), 'shape': f.shape, 'tokens': f.tokens,
            'eval_batch_size': f.eval_batch_size, 'repeats': f.repeats, 'square': f.square,
            'square_flops_per_second': square_rate, 'rows': []}
  for size in sizes:
    report['rows'].append(softmax_row(config, size, settings))
    print(f'softmax |V|={size:,}: {report["rows"][-1]["tokens_per_second"]:,.0f} tokens/s',
          flush=True)
    gc.collect()  # The next |V|'s tables need the memory.
  for head in LARGEST_ONLY:
    report['rows'].append(structured_row(config, head, sizes[-1], settings))
    gc.collect()
  report['output_width'] = report['rows'][0]['output_width']
  harness.report(report, format_report, f.out)


if __name__ == '__main__':
  flags.DEFINE_list('vocab_sizes', ['10000', '30000', '100000', '300000', '1000000'],
                    'Vocabulary sizes |V| to time under the softmax head.')
  flags.DEFINE_enum('shape', 'MLP9', list(harness.SHAPES), 'Table 1 shape of the NNLM.')
  flags.DEFINE_integer('tokens', 20_000, 'Synthetic tokens scored per |V|.')
  flags.DEFINE_integer('eval_batch_size', 2048, 'Positions per evaluation batch.')
  flags.DEFINE_integer('repeats', 5, 'Timed passes per |V|; the median is reported.')
  flags.DEFINE_integer('square', 2048, 'Side of the square matmul timed as the machine rate.')
  flags.DEFINE_string('out', '', 'If set, also writes OUT.json and OUT.md.')
  run_experiment(main)
