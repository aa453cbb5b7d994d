r"""How much of a small model's update is the host's, and what K updates in one call save:
the scale row's NNLM (order 5, m = 64, h = 128, no direct connections, nce, SGD at 0.1,
batch 1024) on a Zipf vocabulary of --vocab_size words, one process, one device.

  python -m experiments.benchmarks.dispatch --out=/tmp/dispatch

- one a call: nplm's loop (nplm.training.loop) by default: the jitted update called once a batch, at
  most stop_requests.IN_FLIGHT calls queued behind the running one; and the median time the
  host spends in that call (its dispatch: arguments, launch), which an accelerator's update
  must outlast for the host not to set the pace (on a CPU the call also computes: 1.5 ms
  of a 5.1 ms update on a 2-core Xeon, not dispatch alone);
- K a call, for each K of --steps_per_call: the same update scanned over K batches in one
  jitted call (jax.lax.scan), the state donated from call to call: the loop's own programs,
  one a call (Feed.train_step) and under --updates_per_call=K (Feed.train_steps).
Each way trains the same --steps batches from the same state with the same keys, and their
losses are compared (max |difference|). Compilation is left out (an untimed run first);
the ways' timed runs alternate; medians of --repeats. At 281,015 words (the GPU check's row
7, |V| of its 10M-token corpus), an H200 trained this model at 820,677 tokens/s in nplm's
loop, 1.2 ms an update: the check's goal of 2M asks for 0.5 ms.
"""

import jax
import numpy as np
from absl import flags
from absl import logging as absl_logging

from experiments.benchmarks import harness
from nplm import parallel, stop_requests
from nplm.cli import fail, refuse_arguments, run_experiment
from nplm.data import batching
from nplm.lm import build_language_model
from nplm.training.window_feed import WindowFeed

SHAPE = dict(order=5, feature_size=64, hidden_size=128, direct=False)  # experiments.benchmarks.scale's


def zipf_counts(vocab_size: int) -> np.ndarray:
  """Word counts ∝ 1/rank, at least 1: the proposal nce draws its noise from."""
  return np.maximum(1, 10_000_000 // np.arange(1, vocab_size + 1)).astype(np.int64)


def paced(call, state, calls_of, host_seconds: list):
  """run_steps(batches) -> their losses: `call(state, *arguments)` for each of
  calls_of(batches), paced as nplm's loop paces its updates (stop_requests.pace), each call's
  host time appended to `host_seconds`."""
  loop = {'state': state}

  def run_steps(batches) -> np.ndarray:
    state, losses = loop['state'], []
    for arguments in calls_of(batches):
      (seconds,), (state, loss) = harness.timed_runs(lambda: call(state, *arguments), 1)  # pylint: disable=cell-var-from-loop
      host_seconds.append(seconds)
      losses.append(loss)
      stop_requests.pace(losses)
    loop['state'] = jax.block_until_ready(state)
    return np.concatenate([np.atleast_1d(loss) for loss in losses])

  return run_steps


def k_at_once(k: int):
  """calls_of(batches): K batches stacked a call, for the feed's train_steps."""
  def calls_of(batches):
    return [tuple(np.stack(part) for part in zip(*batches[start:start + k]))
            for start in range(0, len(batches), k)]

  return calls_of


def measure(vocab_size: int, batch_size: int, steps: int, repeats: int, tokens: int,
            steps_per_call: list[int]) -> dict:
  config = harness.shape_config(SHAPE, batch_size).replace(
      head='nce', optimizer='sgd', learning_rate=0.1,
      updates_per_call=max(2, *steps_per_call))  # The loop's train_steps compiled.
  counts = zipf_counts(vocab_size)
  mesh = parallel.make_mesh()
  feed = WindowFeed(config, build_language_model(config, counts, mesh), {}, boundary_id=None,
                    mesh=mesh)
  ids = np.random.default_rng(0).choice(vocab_size, tokens, p=counts / counts.sum())
  padded = jax.device_put(batching.pad_split(ids.astype(np.int32), config.order, 1))
  batches = harness.benchmark_batches(tokens, batch_size, steps)
  rng = jax.random.key(1)
  feed.create_state(jax.random.key(0))  # Lays out the loop's programs: train_step(s).
  ways = {'one a call': (feed.train_step, lambda batches: batches),
          **{f'{k} a call': (feed.train_steps, k_at_once(k)) for k in steps_per_call}}
  host_seconds = {name: [] for name in ways}

  def runners():  # Each way from the same first state.
    return {name: paced(lambda state, *arguments, call=call: call(state, padded, *arguments, rng),
                        feed.create_state(jax.random.key(0)), calls_of, host_seconds[name])
            for name, (call, calls_of) in ways.items()}

  losses = {name: run(batches) for name, run in runners().items()}  # Compiles too.
  host_seconds['one a call'].clear()
  rates = harness.interleaved_rates(runners(), batches, repeats)
  one = rates['one a call']
  return {'machine': harness.machine_info(), 'vocab_size': vocab_size, 'steps': steps,
          'batch_size': batch_size, 'repeats': repeats, 'shape': SHAPE,
          'dispatch_seconds': float(np.median(host_seconds['one a call'])),
          'ways': {name: {**rate, 'last_loss': float(rate['last_loss'][-1]),
                          'over_one_a_call': rate['median'] / one['median'],
                          'max_loss_difference': float(np.max(np.abs(
                              losses[name] - losses['one a call'])))}
                   for name, rate in rates.items()}}


def format_report(report: dict, markdown: bool = False) -> str:
  table = [['way', 'tokens/s median [min–max]', 'µs an update', 'over one a call',
            'max |loss − one a call\'s|']]
  for name, way in report['ways'].items():
    table.append([name, f'{way["median"]:,.0f} [{way["min"]:,.0f}–{way["max"]:,.0f}]',
                  f'{way["seconds_per_step"] * 1e6:,.0f}', f'{way["over_one_a_call"]:.2f}×',
                  f'{way["max_loss_difference"]:.3g}'])
  return '\n'.join([
      harness.machine_line(report['machine']),
      f'NNLM (order {report["shape"]["order"]}, m = {report["shape"]["feature_size"]}, h = '
      f'{report["shape"]["hidden_size"]}), nce, SGD, batch {report["batch_size"]:,}, |V| = '
      f'{report["vocab_size"]:,}; {report["steps"]} updates a run, median of '
      f'{report["repeats"]} runs, the ways in turn.', '',
      *harness.table_lines(table, markdown), '',
      f'The host\'s time in a call of one update (its dispatch), median: '
      f'{report["dispatch_seconds"] * 1e6:,.0f} µs.'])


def main(argv):
  refuse_arguments(argv)
  absl_logging.set_verbosity(absl_logging.WARNING)
  f = flags.FLAGS
  for name, least in (('vocab_size', 2), ('batch_size', 1), ('steps', 1), ('repeats', 1)):
    if f[name].value < least:  # nce's noise needs a word beside the target.
      fail(f'--{name} must be a whole number of at least {least}, got {f[name].value}')
  ks = [int(k) if k.isdigit() else 0 for k in f.steps_per_call]
  if any(k < 1 or f.steps % k for k in ks):
    fail(f'each of --steps_per_call must be a whole number dividing --steps={f.steps}, '
         f'got {",".join(f.steps_per_call)}')
  if f.tokens < f.batch_size + SHAPE['order']:
    fail(f'--tokens={f.tokens} must exceed --batch_size={f.batch_size}: a batch of windows')
  harness.report(measure(f.vocab_size, f.batch_size, f.steps, f.repeats, f.tokens, ks),
                 format_report, f.out)


if __name__ == '__main__':
  flags.DEFINE_integer('vocab_size', 281_015, '|V|: the GPU check\'s row 7 corpus\'s.')
  flags.DEFINE_integer('batch_size', 1024, 'Windows an update (row 7\'s).')
  flags.DEFINE_integer('steps', 512, 'Updates a timed run.')
  flags.DEFINE_integer('repeats', 3, 'Timed runs a way; the median is reported.')
  flags.DEFINE_integer('tokens', 1_000_000, 'Tokens of the generated training split.')
  flags.DEFINE_list('steps_per_call', ['8', '32'], 'K: updates scanned in one call.')
  flags.DEFINE_string('out', '', 'If set, also writes OUT.json and OUT.md.')
  run_experiment(main)
