r"""Where the NNLM's train step spends its time: its parts timed alone, against the FLOPs each
does, and the step as one program against the same step as two (gradients, then update).

  python -m experiments.benchmarks.nnlm_step --data_dir=/tmp/nplm_tfds --out=/tmp/nnlm_step

On Brown's prepared training split, for --shape (Table 1's MLP1 or MLP9) at --batch_size: the
trainer's own compiled step (its state donated, as the loop runs it); the loss and its
gradients alone; the AdamW update alone; the output layer's forward matmul [B, D]·[D, |V|], the
two of its gradient ([|V|, B]·[B, D] and [B, |V|]·[|V|, D]) and its log-softmax with the NLL's
gradient, each its own program, every array an argument (a constant would be folded: with the
batch's positions compiled in, "the gradients" took a third of their time). Then the step as one program and as two (the gradients, then
the update, donated), alternated block by block so that a busy machine slows both alike.
Medians of --repeats blocks of --steps updates.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from experiments.benchmarks import harness
from nplm import parallel
from nplm.cli import run_experiment
from nplm.data import batching
from nplm.lm import build_language_model
from nplm.training import optimizer
from nplm.training.window_feed import WindowFeed, loss_and_grads

FLAGS = flags.FLAGS


def seconds_per_call(call, steps: int, repeats: int) -> float:
  """The median over `repeats` blocks of `steps` calls of `call()`, after one untimed call."""
  jax.block_until_ready(call())
  blocks = []
  for _ in range(repeats):
    started = time.perf_counter()
    for _ in range(steps):
      out = call()
    jax.block_until_ready(out)
    blocks.append((time.perf_counter() - started) / steps)
  return float(np.median(blocks))


def gradients(lm, config):
  """(state, padded split, positions, mask, key) -> (loss, gradients): the step's first part,
  its data arguments (not constants the compiler could fold)."""
  def loss_and_gradients(state, padded, positions, mask, rng):
    context, targets = batching.windows(padded, positions, config.order)
    return loss_and_grads(lm, config, state, context, targets, mask, rng)[:2]
  return loss_and_gradients


def one_or_two_programs(feed, config, lm, state, data, rng, steps: int, repeats: int) -> dict:
  """Seconds per update of the trainer's step (one program) and of the same update as two
  programs, alternated block by block."""
  grads_of = jax.jit(gradients(lm, config))
  update = jax.jit(lambda st, grads: optimizer.apply_gradients(config, st, grads),
                   donate_argnums=0)

  def two(st):
    loss, grads = grads_of(st, *data, rng)
    return update(st, grads), loss

  ways = {'one program': lambda st: feed.train_step(st, *data, rng), 'two programs': two}
  seconds = {name: [] for name in ways}
  for name, way in ways.items():  # Compiled, untimed.
    state, loss = way(state)
  jax.block_until_ready(loss)
  for _ in range(repeats):
    for name, way in ways.items():
      started = time.perf_counter()
      for _ in range(steps):
        state, loss = way(state)
      jax.block_until_ready((state.params, loss))
      seconds[name].append((time.perf_counter() - started) / steps)
  return {name: float(np.median(times)) for name, times in seconds.items()}


def measure(ids, counts, boundary: int, shape: str, batch_size: int, steps: int,
            repeats: int) -> dict:
  config = harness.shape_config(harness.SHAPES[shape], batch_size)
  mesh = parallel.make_mesh()
  lm = build_language_model(config, counts, mesh)
  feed = WindowFeed(config, lm, {}, boundary_id=None, mesh=mesh)
  state = feed.create_state(jax.random.key(config.seed))
  values = optimizer.hyperparameters_of(config, len(ids) // batch_size)
  state = optimizer.with_hyperparameters(
      state, {name: parallel.put(value, mesh) for name, value in values.items()})
  padded = parallel.put(batching.pad_split(np.asarray(ids), config.order, boundary), mesh)
  positions = jnp.asarray(np.random.default_rng(0).integers(0, len(ids), batch_size), jnp.int32)
  data, rng = (padded, positions, jnp.ones(batch_size, jnp.float32)), jax.random.key(1)
  vocab, width = len(counts), lm.model.output_width
  out = state.params['head']['output']
  hidden = jnp.asarray(np.random.default_rng(1).normal(size=(batch_size, width)), jnp.float32)
  scores = jnp.asarray(np.random.default_rng(2).normal(size=(batch_size, vocab)), jnp.float32)
  targets = batching.windows(padded, positions, config.order)[1]
  grads_of = jax.jit(gradients(lm, config))
  grads = grads_of(state, *data, rng)[1]
  update = jax.jit(lambda st, g: optimizer.apply_gradients(config, st, g).params)
  nll = jax.jit(jax.grad(lambda y, t: -jnp.mean(jnp.take_along_axis(
      jax.nn.log_softmax(y), t[:, None], 1))))
  forward = jax.jit(lambda h, w: h @ w.T)
  output_gradient = jax.jit(lambda g, h: g.T @ h)
  hidden_gradient = jax.jit(lambda g, w: g @ w)
  matmul = 2 * batch_size * width * vocab
  parts = {  # name: (call, FLOPs)
      'loss and gradients': (lambda: grads_of(state, *data, rng), None),
      'AdamW update': (lambda: update(state, grads), None),
      'output forward [B,D]·[D,|V|]': (lambda: forward(hidden, out['embedding']), matmul),
      'output gradient [|V|,B]·[B,D]': (lambda: output_gradient(scores, hidden), matmul),
      'hidden gradient [B,|V|]·[|V|,D]': (lambda: hidden_gradient(scores, out['embedding']),
                                           matmul),
      'log-softmax and NLL, forward and gradient': (lambda: nll(scores, targets), None)}
  timed = {}
  for name, (call, flops) in parts.items():
    seconds = seconds_per_call(call, steps, repeats)
    timed[name] = {'seconds': seconds, 'gflops_per_s': flops and flops / seconds / 1e9}
  whole = one_or_two_programs(feed, config, lm, state, data, rng, steps, repeats)
  return {'machine': harness.machine_info(), 'shape': shape, 'batch_size': batch_size,
          'vocab_size': vocab, 'output_width': width, 'steps': steps, 'repeats': repeats,
          'parts': timed, 'whole_step': whole}


def format_report(report: dict, markdown: bool = False) -> str:
  rows = [['part', 'ms per update', 'GFLOP/s']]
  rows += [[name, f'{1e3 * part["seconds"]:.2f}',
            f'{part["gflops_per_s"]:.1f}' if part['gflops_per_s'] else '']
           for name, part in report['parts'].items()]
  rows += [[f'whole step, {name}', f'{1e3 * seconds:.2f}', '']
           for name, seconds in report['whole_step'].items()]
  return '\n'.join([harness.machine_line(report['machine']),
                    f'{report["shape"]}, batch {report["batch_size"]}, |V| = '
                    f'{report["vocab_size"]:,}, D = {report["output_width"]}; median of '
                    f'{report["repeats"]} blocks of {report["steps"]} calls.', '',
                    *harness.table_lines(rows, markdown)]) + '\n'


def main(argv):
  ids, counts, boundary = harness.training_ids_or_exit(argv)
  report = measure(ids, counts, boundary, FLAGS.shape, FLAGS.batch_size, FLAGS.steps,
                   FLAGS.repeats)
  harness.report(report, format_report, FLAGS.out)


if __name__ == '__main__':
  harness.define_common_flags(steps=20, shape=True)
  flags.DEFINE_integer('batch_size', 256, 'Examples per update.')
  run_experiment(main)
