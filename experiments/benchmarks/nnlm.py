r"""Train-step throughput of nplm on the Brown vocabulary: FLOPs, matmul share, PyTorch.

  python -m experiments.benchmarks.nnlm --data_dir=/tmp/nplm_tfds --out=runs/benchmark
  python -m experiments.benchmarks.nnlm --data_dir=/tmp/nplm_tfds --repeats=2 --steps=5  # a look

For the MLP1 and MLP9 shapes of Table 1 it times the real jitted step of nplm's trainer on the
trainer's own batches (after an untimed compile, --repeats runs of --steps steps, each ended
by block_until_ready; median, min and max), counts the FLOPs of one step (XLA's cost analysis
and by hand), measures this machine's float32 matmul rate, and, when PyTorch is installed,
times the same model written plainly in PyTorch on the same batches; --torch_compile=inductor
also times it compiled (torch.compile(model), the compile left out of the timing, as JAX's).
With PyTorch, its own float32 matmul is timed beside XLA's, the square one and each output
layer's product: the libraries' kernels, which the step ratio rests on, differ by machine.
"""

from pathlib import Path

import jax.numpy as jnp
import numpy as np
from absl import flags

from experiments.benchmarks import harness, programs
from nplm.cli import run_experiment
from nplm.config import Config
from nplm.data import batching
from nplm.models.nnlm import NNLM


def analytic_step_flops(config: Config, vocab_size: int) -> int:
  """Matmul FLOPs of one update: forward 2·B·in·out for H and the output layer; backward
  twice that (gradients of the weights and of the inputs: x's gradient reaches C).
  Softmax, tanh and the AdamW update are left out (about 1% here)."""
  features = (config.order - 1) * config.feature_size
  output_inputs = NNLM.from_config(config, vocab_size).output_width
  forward = 2 * config.batch_size * (features * config.hidden_size + output_inputs * vocab_size)
  return 3 * forward


def xla_flops(compiled) -> float | None:
  """'flops' of XLA's cost analysis: a dict in jax 0.10, a list of dicts in older versions."""
  cost = compiled.cost_analysis()
  if isinstance(cost, (list, tuple)):
    cost = cost[0] if cost else None
  return float(cost['flops']) if cost and 'flops' in cost else None


def counted_flops(flops: dict) -> tuple[float, str]:
  """The step's FLOPs for its rate, and whose count: XLA's (the whole update) unless it is
  missing or below the matmuls' count by hand, a floor of the work. XLA's GPU cost analysis
  leaves out the products it hands to cuBLAS (jax 0.11.2 on an H200: 5.6 GFLOP counted for a
  201-GFLOP step at batch 8192, experiments/results/h200/)."""
  if flops['xla'] is None or flops['xla'] < flops['analytic']:
    return flops['analytic'], 'by hand'
  return flops['xla'], 'XLA'


def torch_runner(config, vocab_size, padded_split, compile_backend=''):
  """(run_steps, what ran it) or (None, why it was skipped): PyTorch is optional. With
  `compile_backend`, the model runs under torch.compile(backend=compile_backend)."""
  try:
    from experiments.benchmarks import torch_nnlm
  except ImportError as error:
    return None, f'PyTorch is not importable ({error}); `pip install torch==2.13.0` adds it'
  threads = harness.use_all_cores()
  run_steps = torch_nnlm.make_runner(config, vocab_size, padded_split, config.seed,
                                     compile_backend)
  return run_steps, {'threads': threads, 'version': torch_nnlm.torch.__version__,
                     'device': str(torch_nnlm.DEVICE), 'compile_backend': compile_backend}


def peer_matmul_gflops(dims: list, repeats: int) -> float | None:
  """PyTorch's float32 GFLOP/s of the [m, k]·[k, n] product `dims`, None without PyTorch."""
  try:
    from experiments.benchmarks import torch_nnlm
  except ImportError:
    return None
  return torch_nnlm.matmul_gflops(*dims, repeats)


def benchmark_shape(name, shape, train_ids, counts, boundary_id, batch_size, steps,
                    repeats, with_torch=True, torch_compile='', programs_dir='',
                    updates_per_call=1) -> dict:
  """nplm's step (float32 and --dtype=bfloat16; float32 `updates_per_call` in one call too,
  if above 1) and PyTorch's (eager, and compiled with the torch.compile backend
  `torch_compile` if set) on the same batches, their timed runs interleaved; the float32
  step's FLOPs and its share of the matmul rate. `programs_dir`: each nplm step as compiled
  and where a run of it spent its time (`inspect_steps`)."""
  config = harness.shape_config(shape, batch_size)
  vocab_size = len(counts)
  padded = batching.pad_split(np.asarray(train_ids), config.order, boundary_id)
  batches = harness.benchmark_batches(len(train_ids), batch_size, steps, config.seed)
  run_steps, compiled = harness.jax_runner(config, counts, padded)
  run_bfloat16, compiled_bfloat16 = harness.jax_runner(config.replace(dtype='bfloat16'),
                                                       counts, padded)
  runners = {'jax': run_steps, 'jax_bfloat16': run_bfloat16}
  if updates_per_call > 1:
    runners['jax_grouped'] = harness.jax_runner(config, counts, padded,
                                                updates_per_call=updates_per_call)[0]
  torch_about = 'disabled by --notorch'
  if with_torch:
    torch_run, torch_about = torch_runner(config, vocab_size, padded)
    if torch_run:
      runners['torch'] = torch_run
  compiled_about = 'not asked (--torch_compile)' if with_torch else torch_about
  if with_torch and torch_compile:
    compiled_run, compiled_about = harness.compiled_first_step(
        *torch_runner(config, vocab_size, padded, torch_compile), batches)
    if compiled_run:
      runners['torch_compiled'] = compiled_run
  rates = harness.interleaved_rates(runners, batches, repeats)
  if programs_dir:  # Warm: the steps compiled and run.
    inspect_steps(Path(programs_dir), name, batches, {'float32': (run_steps, compiled),
                                                      'bfloat16': (run_bfloat16,
                                                                   compiled_bfloat16)})
  jax_rate = rates['jax']
  flops = {'xla': xla_flops(compiled), 'analytic': analytic_step_flops(config, vocab_size)}
  counted, flops['counted_by'] = counted_flops(flops)
  step_gflops = counted / jax_rate['seconds_per_step'] / 1e9
  # The forward output layer's dot: [B, D] x [D, |V|].
  dims = [batch_size, NNLM.from_config(config, vocab_size).output_width, vocab_size]
  matmul = harness.matmul_gflops(*dims, repeats)
  aligned = aligned_dims(dims)
  result = {'shape': name, 'config': {**shape, 'batch_size': batch_size}, 'jax': jax_rate,
            'jax_bfloat16': rates['jax_bfloat16'],
            'bfloat16_over_float32': rates['jax_bfloat16']['median'] / jax_rate['median'],
            'step_flops': flops, 'step_gflops_per_s': step_gflops,
            'output_matmul': {'dims': dims, 'gflops_per_s': matmul, 'bfloat16': {
                'gflops_per_s': harness.matmul_gflops(*dims, repeats, jnp.bfloat16),
                'aligned_dims': aligned,
                'aligned_gflops_per_s': harness.matmul_gflops(*aligned, repeats, jnp.bfloat16)}},
            'share_of_matmul': step_gflops / matmul, 'torch': None, 'jax_over_torch': None,
            'torch_skipped': None if 'torch' in rates else torch_about,
            'torch_compiled': None, 'jax_over_torch_compiled': None,
            'torch_compiled_skipped': None if 'torch_compiled' in rates else compiled_about,
            'grouped': None}
  if 'jax_grouped' in rates:
    result['grouped'] = {**rates['jax_grouped'], 'updates_per_call': updates_per_call,
                         'over_one_a_call': rates['jax_grouped']['median'] / jax_rate['median']}
    if 'torch' in rates:
      result['grouped']['over_torch'] = rates['jax_grouped']['median'] / rates['torch']['median']
  if 'torch' in rates:
    result['torch'] = {**rates['torch'], **torch_about}
    result['output_matmul']['torch_gflops_per_s'] = peer_matmul_gflops(dims, repeats)
    result['jax_over_torch'] = jax_rate['median'] / rates['torch']['median']
  if 'torch_compiled' in rates:
    result['torch_compiled'] = {**rates['torch_compiled'], **compiled_about}
    result['jax_over_torch_compiled'] = jax_rate['median'] / rates['torch_compiled']['median']
  return result


def aligned_dims(dims: list) -> list:
  """[B, D, |V|] with D and |V| rounded up to multiples of 8 (16 bytes of bfloat16), which
  tensor cores want: MLP1's D = 290, MLP9's 100 and Brown's |V| = 14,039 are not (bfloat16
  ran at 0.21× of float32 at batch 8192 on an H200), and the product timed both ways says
  whether that matters."""
  batch, inner, cols = dims
  return [batch, -(-inner // 8) * 8, -(-cols // 8) * 8]


def inspect_steps(directory: Path, shape: str, batches, steps: dict) -> None:
  """For each {dtype: (run_steps, compiled)}: SHAPE_DTYPE.hlo.txt, the step as XLA compiled
  it, and SHAPE_DTYPE.profile.txt, where a run of the batches spent its time: what a timing
  alone cannot say (bfloat16 ran at 0.21× of float32 at batch 8192 on an H200)."""
  for dtype, (run_steps, compiled) in steps.items():
    programs.write_program(directory / f'{shape}_{dtype}.hlo.txt', compiled)
    programs.write_profile(directory / f'{shape}_{dtype}.profile.txt', run_steps, batches)


def run_benchmark(train_ids, counts, boundary_id, batch_size=256, steps=50, repeats=5,
                  shapes=None, with_torch=True, square=2048, torch_compile='',
                  programs_dir='', updates_per_call=1) -> dict:
  """Everything the CLI reports, as a dict: importable, and runnable on any ids."""
  shapes = harness.SHAPES if shapes is None else shapes
  results = [benchmark_shape(name, shape, train_ids, counts, boundary_id, batch_size,
                             steps, repeats, with_torch, torch_compile, programs_dir,
                             updates_per_call)
             for name, shape in shapes.items()]
  square_matmul = {'size': square,
                   'gflops_per_s': harness.matmul_gflops(square, square, square, repeats)}
  if any(result['torch'] for result in results):
    square_matmul['torch_gflops_per_s'] = peer_matmul_gflops([square] * 3, repeats)
  return {'machine': harness.machine_info(), 'vocab_size': len(counts),
          'settings': {'batch_size': batch_size, 'steps': steps, 'repeats': repeats,
                       'torch_compile': torch_compile, 'updates_per_call': updates_per_call},
          'square_matmul': square_matmul, 'shapes': results}


def _table(report: dict) -> list[list[str]]:
  rows = [['shape', 'JAX examples/s median [min–max]', 'step GFLOP XLA / by hand',
           'step GFLOP/s', 'output matmul GFLOP/s', 'share', 'PyTorch examples/s',
           'JAX/PyTorch', 'JAX bf16 examples/s', 'bf16/f32']]
  for r in report['shapes']:
    j, t, f, b = r['jax'], r['torch'], r['step_flops'], r['jax_bfloat16']
    xla = 'n/a' if f['xla'] is None else f'{f["xla"] / 1e9:.3f}'
    rows.append([r['shape'], f'{j["median"]:,.0f} [{j["min"]:,.0f}–{j["max"]:,.0f}]',
                 f'{xla} / {f["analytic"] / 1e9:.3f}', f'{r["step_gflops_per_s"]:.1f}',
                 f'{r["output_matmul"]["gflops_per_s"]:.1f}', f'{r["share_of_matmul"]:.0%}',
                 f'{t["median"]:,.0f}' if t else 'skipped',
                 f'{r["jax_over_torch"]:.2f}' if t else '–', f'{b["median"]:,.0f}',
                 f'{r["bfloat16_over_float32"]:.2f}'])
  return rows


def format_report(report: dict, markdown: bool = False) -> str:
  m, s, square = report['machine'], report['settings'], report['square_matmul']
  lines = [harness.machine_line(m),
           f'Batch {s["batch_size"]}, |V| = {report["vocab_size"]}, AdamW, median of '
           f'{s["repeats"]} runs of {s["steps"]} steps, interleaved across implementations. '
           f'Float32 matmul {square["size"]}²: {square["gflops_per_s"]:.1f} GFLOP/s'
           + (f' (PyTorch\'s: {square["torch_gflops_per_s"]:.1f})'
              if square.get('torch_gflops_per_s') else '') + '.', '']
  lines += harness.table_lines(_table(report), markdown)
  torch_runs = [r['torch'] for r in report['shapes'] if r['torch']]
  skipped = {r['torch_skipped'] for r in report['shapes'] if not r['torch']}
  lines += [''] + [f'PyTorch comparison skipped: {why}.' for why in skipped]
  if torch_runs:
    lines.append(f'PyTorch {torch_runs[0]["version"]} on {torch_runs[0]["device"]}, '
                 f'torch.set_num_threads({torch_runs[0]["threads"]}); its default AdamW.')
  peer_rates = [f'{r["shape"]} {r["output_matmul"]["torch_gflops_per_s"]:.1f}'
                for r in report['shapes'] if r['output_matmul'].get('torch_gflops_per_s')]
  if peer_rates:
    lines.append("PyTorch's float32 matmul of each output layer [B, D]·[D, |V|] timed alone: "
                 f"{', '.join(peer_rates)} GFLOP/s (XLA's: the table's output matmul).")
  aligned = [f'{r["shape"]} {b["gflops_per_s"]:.1f}, at [{", ".join(map(str, b["aligned_dims"]))}] '
             f'{b["aligned_gflops_per_s"]:.1f}' for r in report['shapes']
             if (b := r['output_matmul'].get('bfloat16'))]
  if aligned:
    lines.append('bfloat16 output-layer matmul [B, D]·[D, |V|] timed alone, as is and with D and '
                 f'|V| rounded up to multiples of 8: {"; ".join(aligned)} GFLOP/s.')
  grouped = [f'{r["shape"]} {g["median"]:,.0f} examples/s [{g["min"]:,.0f}–{g["max"]:,.0f}], '
             f'{g["over_one_a_call"]:.2f}× one a call'
             + (f', {g["over_torch"]:.2f}× PyTorch' if 'over_torch' in g else '')
             for r in report['shapes'] if (g := r.get('grouped'))]
  if grouped:
    lines.append(f'nplm {report["settings"]["updates_per_call"]} updates a call '
                 f'(nplm train --updates_per_call), float32: {"; ".join(grouped)}.')
  lines += _compiled_lines(report)
  lines.append("share = step GFLOP/s ÷ GFLOP/s of the step's forward output-layer matmul "
               '[B, D]·[D, |V|] timed alone; step GFLOP/s from XLA\'s count, or by hand where '
               'XLA\'s is below the matmuls\' (' + ', '.join(
                   f'{r["shape"]}: {r["step_flops"].get("counted_by", "XLA")}'
                   for r in report['shapes']) + ').')
  return '\n'.join(lines) + '\n'


def _compiled_lines(report: dict) -> list[str]:
  """The compiled PyTorch model's rates, when --torch_compile asked for them."""
  backend = report['settings'].get('torch_compile')
  if not backend:
    return []
  lines = []
  for r in report['shapes']:
    c = r['torch_compiled']
    lines.append(f'{r["shape"]}: torch.compile(model, backend={backend!r}) '
                 + (f'{c["median"]:,.0f} examples/s [{c["min"]:,.0f}–{c["max"]:,.0f}], '
                    f'JAX/compiled {r["jax_over_torch_compiled"]:.2f}.' if c else
                    f'skipped: {r["torch_compiled_skipped"]}.'))
  return lines


def write_report(report: dict, out: str) -> None:
  """OUT.json and OUT.md of this benchmark's report."""
  harness.write_report(report, out, format_report)


def define_flags() -> None:
  harness.define_common_flags(steps=50)
  flags.DEFINE_integer('batch_size', 256, 'Examples per update (the flagfiles use 256).')
  flags.DEFINE_bool('torch', True, 'Also time the PyTorch version (if PyTorch is installed).')
  flags.DEFINE_string('torch_compile', '', 'Also time the PyTorch model under '
                      'torch.compile(model, backend=THIS): inductor (torch.compile\'s default, '
                      'the real figure) or eager / aot_eager (a cheap check of the code path, '
                      'not a speed); empty: not.')
  flags.DEFINE_integer('matmul_size', 2048, 'The square float32 matmul whose rate is printed.')
  flags.DEFINE_string('programs_dir', '', 'Writes into this directory each nplm step as XLA '
                      'compiled it (SHAPE_DTYPE.hlo.txt) and where a run of it spent its '
                      'time (SHAPE_DTYPE.profile.txt, the profiler\'s events summed by '
                      'name); empty: not.')
  flags.DEFINE_integer('updates_per_call', 8, 'Also times the float32 step this many '
                       'updates a call, as `nplm train --updates_per_call` runs them (1: '
                       'not).', lower_bound=1)


def main(argv):
  train_ids, counts, boundary_id = harness.training_ids_or_exit(argv)
  FLAGS = flags.FLAGS
  report = run_benchmark(train_ids, counts, boundary_id, FLAGS.batch_size, FLAGS.steps,
                         FLAGS.repeats, with_torch=FLAGS.torch, square=FLAGS.matmul_size,
                         torch_compile=FLAGS.torch_compile, programs_dir=FLAGS.programs_dir,
                         updates_per_call=FLAGS.updates_per_call)
  harness.report(report, format_report, FLAGS.out)


if __name__ == '__main__':
  define_flags()
  run_experiment(main)
