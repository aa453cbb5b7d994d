r"""Output heads compared on the Brown vocabulary: train-step speed and exact perplexity.

  python -m experiments.benchmarks.heads --out=runs/heads      # timings and 1 epoch per head
  python -m experiments.benchmarks.heads --epochs=0 --steps=20 --repeats=3 --out=/tmp/hb

For an MLP9-like and an MLP1-like shape, every head of nplm.heads is timed on the trainer's
own jitted step and batches exactly as experiments/benchmarks/nnlm.py times the softmax (untimed
warm-up, then --repeats runs of --steps updates, each ended by block_until_ready), and its
speed-up over the full softmax is taken from the same process. The repeats are interleaved
across heads (repeat r of every head, then repeat r+1) so that a busy spell of a shared
machine slows all heads alike instead of one head's whole measurement.

With --epochs=E > 0 each head is also trained for exactly E epochs through nplm.trainer.run
(patience = E: nothing stops early) in <out>/runs/<shape>_<head>, and its exact validation and
test perplexities are reported. A rerun with the same --out reuses each finished run whose
summary.json has the same config, and resumes an unfinished one.
"""

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from absl import logging as absl_logging

from experiments.benchmarks.harness import (SHAPES as TABLE1_SHAPES, CorpusNotPrepared,
                                            benchmark_batches, examples_per_second,
                                            interleaved_rates, jax_runner, load_training_ids,
                                            machine_info, shape_config)
from nplm import trainer
from nplm.cli import run_experiment
from nplm.data import batching, load_corpus
from nplm.files import write_json_atomically, write_text_atomically
from nplm.config import HEAD, group_of
from nplm.heads import HEADS, head_class
from nplm.lm import build_language_model
from nplm.training.config_checks import validated

SHAPES = {'mlp9': TABLE1_SHAPES['MLP9'], 'mlp1': TABLE1_SHAPES['MLP1']}
NOT_A_LM = {'negative_sampling'}  # Its scores are not log-probabilities (nplm/heads/nce.py).
BASELINE = 'softmax'


def head_config(shape: dict, head: str, settings: dict):
  """The config a head is timed with and trained with (then with a workdir and epochs): of
  the head knobs in the settings (k, an override such as adaptive_cutoffs), those it reads."""
  knobs = {'num_samples': settings['num_samples'], **settings['overrides']}
  read = head_class(head).knobs
  return validated(shape_config(shape, settings['batch_size']).replace(
      head=head, optimizer=settings['optimizer'], learning_rate=settings['learning_rate'],
      **{name: value for name, value in knobs.items()
         if name in read or group_of(name) != HEAD}))


def output_layer_runner(config, counts, padded_split: np.ndarray):
  """run_steps timing the head alone: the forward and backward passes of the output layer on
  fixed hidden vectors and each batch's real targets, without the model or the optimizer
  (Morin & Bengio 2005 compare output layers this way)."""
  lm = build_language_model(config, counts)
  init_rng, hidden_rng, step_rng = jax.random.split(jax.random.key(config.seed), 3)
  hidden = jax.random.uniform(hidden_rng, (config.batch_size, lm.model.output_width),
                              minval=-1.0, maxval=1.0)  # tanh's range
  params = lm.head.init(init_rng, hidden, method=lm.head.log_probs)

  @jax.jit
  def loss_and_grads(params, hidden, targets, mask, rng):
    def mean_loss(params, hidden):
      losses = lm.head.apply(params, hidden, targets, rng, method=lm.head.loss)
      return jnp.sum(jnp.where(mask > 0, losses, 0.0)) / jnp.maximum(jnp.sum(mask), 1.0)
    return jax.value_and_grad(mean_loss, argnums=(0, 1))(params, hidden)

  def run_steps(batches) -> float:
    loss = None
    for step, (positions, mask) in enumerate(batches):
      targets = batching.windows(padded_split, positions, config.order)[1]
      loss, grads = loss_and_grads(params, hidden, targets, mask,
                                   jax.random.fold_in(step_rng, step))
    jax.block_until_ready((loss, grads))
    return float(loss)

  return run_steps


def time_heads(configs: dict, counts, train_ids, boundary_id, steps: int, repeats: int,
               interleave: bool) -> dict:
  """{'step' | 'output_layer': {head: examples/s dict}} for the configs of one shape, all
  timed in this process: the trainer's whole update, and the head's passes alone."""
  first = next(iter(configs.values()))
  padded = batching.pad_split(np.asarray(train_ids), first.order, boundary_id)
  batches = benchmark_batches(len(train_ids), first.batch_size, steps, first.seed)
  makers = {'step': lambda config: jax_runner(config, counts, padded)[0],
            'output_layer': lambda config: output_layer_runner(config, counts, padded)}
  rates = {}
  for kind, make_runner in makers.items():
    runners = {head: make_runner(config) for head, config in configs.items()}
    rates[kind] = (interleaved_rates(runners, batches, repeats) if interleave else
                   {head: examples_per_second(run, batches, repeats)
                    for head, run in runners.items()})
  return rates


def finished_summary(workdir: Path, config) -> dict | None:
  """summary.json of a finished run with this very config: nplm.trainer.run would not retrain
  it, but it would evaluate every split again (about a minute per head on a CPU)."""
  path = workdir / 'summary.json'
  if not path.exists():
    return None
  summary = json.loads(path.read_text())
  return summary if summary.get('config') == json.loads(json.dumps(config.to_dict())) else None


def train_head(config, corpus, epochs: int, workdir: Path) -> dict:
  """The summary of exactly `epochs` epochs (patience = epochs), reused when finished."""
  config = validated(config.replace(workdir=str(workdir), epochs=epochs, patience=epochs))
  summary = finished_summary(workdir, config)
  if summary is not None:
    return {**summary, 'reused': True}
  print(f'training {workdir.name} for {epochs} epoch(s) …', file=sys.stderr, flush=True)
  summary = trainer.run(config, corpus)
  if summary.get('status') == 'interrupted':
    raise KeyboardInterrupt(f'{workdir} was interrupted; rerun the same command to resume it')
  if summary['epochs'] != epochs:  # A workdir trained longer by an earlier, larger --epochs.
    raise RuntimeError(f'{workdir} holds {summary["epochs"]} epochs, not {epochs}: '
                       'use another --out')
  return {**summary, 'reused': False}


def benchmark_shape(name, shape, heads, train_ids, counts, boundary_id, corpus, settings,
                    out: Path) -> dict:
  s = settings
  configs = {head: head_config(shape, head, s) for head in heads}
  rates = time_heads(configs, counts, train_ids, boundary_id, s['steps'], s['repeats'],
                     s['interleave'])
  results = []
  for head, config in configs.items():
    summary = None
    if s['epochs'] and corpus is not None:
      summary = train_head(config, corpus, s['epochs'], out / 'runs' / f'{name}_{head}')
    results.append({'head': head, 'config': config.to_dict(), 'summary': summary,
                    'rate': rates['step'][head],
                    'speedup': rates['step'][head]['median'] / rates['step'][BASELINE]['median'],
                    'output_layer_rate': rates['output_layer'][head],
                    'output_layer_speedup': (rates['output_layer'][head]['median']
                                             / rates['output_layer'][BASELINE]['median'])})
  add_ppl_ratios(results)
  return {'shape': name, 'config': dict(shape), 'heads': results}


def add_ppl_ratios(results: list[dict]) -> None:
  """Sets each result's test_ppl_ratio: its test ppl ÷ the softmax's (None if untrained)."""
  baseline = next(r['summary'] for r in results if r['head'] == BASELINE)
  for result in results:
    result['test_ppl_ratio'] = (result['summary']['test_ppl'] / baseline['test_ppl']
                                if result['summary'] and baseline else None)


def run_heads_benchmark(train_ids, counts, boundary_id, corpus=None, heads=tuple(HEADS),
                        shapes=None, batch_size=256, steps=50, repeats=5, epochs=1,
                        num_samples=100, optimizer='adamw', learning_rate=1e-3,
                        out='runs/heads_benchmark',
                        overrides=None, interleave=True, command='') -> dict:
  """Everything the CLI reports, as a dict. The softmax, the baseline, is always timed first.
  Training needs `corpus` (whose training counts must be `counts`) and epochs > 0.
  `overrides` go into every Config: e.g. adaptive_cutoffs for a vocabulary too small for
  the default cutoffs, or the corpus's unk_max_count / train_tokens / valid_tokens so that
  the run.json of each workdir tells the truth about its corpus."""
  if corpus is not None and len(corpus.vocab.counts) != len(counts):
    raise ValueError('the corpus and the counts describe different vocabularies')
  shapes = SHAPES if shapes is None else shapes
  heads = [BASELINE] + [h for h in heads if h != BASELINE]
  settings = {'batch_size': batch_size, 'steps': steps, 'repeats': repeats, 'epochs': epochs,
              'num_samples': num_samples, 'optimizer': optimizer,
              'learning_rate': learning_rate,
              'interleave': interleave, 'overrides': dict(overrides or {})}
  results = [benchmark_shape(name, shape, heads, train_ids, counts, boundary_id, corpus,
                             settings, Path(out)) for name, shape in shapes.items()]
  return {'machine': machine_info(), 'vocab_size': len(counts), 'settings': settings,
          'command': command, 'trained': bool(epochs and corpus is not None),
          'shapes': results}


def _row(result: dict) -> list[str]:
  rate, summary, ratio = result['rate'], result['summary'], result['test_ppl_ratio']
  head = result['head'] + (' (not a LM)' if result['head'] in NOT_A_LM else '')
  layer = result['output_layer_rate']
  return [head, f'{rate["median"]:,.0f} [{rate["min"]:,.0f}–{rate["max"]:,.0f}]',
          f'{result["speedup"]:.2f}×',
          f'{layer["median"]:,.0f}', f'{result["output_layer_speedup"]:.1f}×',
          f'{summary["valid_ppl"]:.1f}' if summary else '—',
          f'{summary["test_ppl"]:.1f}' if summary else '—',
          f'{ratio:.3f}' if ratio is not None else '—']


def format_report(report: dict) -> str:
  """The markdown: a header naming machine and settings, then one table per shape."""
  m, s = report['machine'], report['settings']
  machine = f'{m["cpu"]}, {m["cores"]} cores' if m['backend'] == 'cpu' else m['device']
  epochs = s['epochs'] if report['trained'] else 0
  lines = [f'Machine: {machine}; jax {m["jax"]} ({m["backend"]}). |V| = '
           f'{report["vocab_size"]:,}, batch {s["batch_size"]}, {s["steps"]} steps per timed '
           f'run, {s["repeats"]} repeats{" (interleaved across heads)" if s["interleave"] else ""}'
           f', {s["optimizer"]}, {epochs} epochs, num_samples {s["num_samples"]}.', '']
  if report['command']:
    lines += [f'Command: `{report["command"]}`', '']
  columns = ['head', 'train step ex/s (median, [min–max])', 'step speed-up vs softmax',
             'output layer fwd+bwd ex/s', 'output layer speed-up',
             f'valid ppl after {epochs} epochs', 'test ppl', "test ppl / softmax's"]
  for shape in report['shapes']:
    config = ', '.join(f'{k}={v}' for k, v in shape['config'].items())
    lines += [f'### {shape["shape"]} ({config})', '', '| ' + ' | '.join(columns) + ' |',
              '|' + '---|' * len(columns)]
    lines += ['| ' + ' | '.join(_row(r)) + ' |' for r in shape['heads']] + ['']
  lines += ['speed-up = median ex/s of the head ÷ median ex/s of the softmax, same process. '
            'A train step is the whole update (model, head, optimizer); the output layer is '
            "the head's forward and backward passes alone on the same targets. "
            'Perplexities are exact (normalized over |V|) with the best-on-validation '
            'parameters; — = not trained (--epochs=0).']
  return '\n'.join(lines) + '\n'


def write_report(report: dict, out: str) -> None:
  out = Path(out)
  out.mkdir(parents=True, exist_ok=True)
  write_json_atomically(out / 'heads_benchmark.json', report)
  write_text_atomically(out / 'heads_benchmark.md', format_report(report))


def define_flags() -> None:
  """Only when run as a program: absl refuses a flag defined twice in one process."""
  flags.DEFINE_string('data_dir', '', 'TFDS data dir of the prepared corpus (empty: TFDS default).')
  flags.DEFINE_string('out', 'runs/heads_benchmark',
                      'Receives heads_benchmark.{json,md} and runs/<shape>_<head>/.')
  flags.DEFINE_list('heads', list(HEADS), 'Heads to compare (the softmax is always included).')
  flags.DEFINE_list('shapes', list(SHAPES), f'Shapes among {", ".join(SHAPES)}.')
  flags.DEFINE_integer('batch_size', 256, 'Examples per update.')
  flags.DEFINE_integer('steps', 50, 'Consecutive updates in one timed run.')
  flags.DEFINE_integer('repeats', 5, 'Timed runs per head; the median is reported.')
  flags.DEFINE_integer('epochs', 1, 'Epochs of training per head for the perplexities (0: none).')
  flags.DEFINE_integer('num_samples', 100, 'k of the sampling heads (is, nce, negative_sampling).')
  flags.DEFINE_enum('optimizer', 'adamw', ['adamw', 'sgd', 'lazy_adam'],
                    'Optimizer of the timed steps and the training runs.')
  flags.DEFINE_float('learning_rate', 1e-3, 'Learning rate of the training runs.')
  flags.DEFINE_bool('interleave', True, 'Take the timed runs round-robin across heads.')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
  FLAGS = flags.FLAGS
  absl_logging.set_verbosity(absl_logging.WARNING)  # TFDS's INFO lines would bury the table.
  unknown = sorted(set(FLAGS.heads) - set(HEADS)) + sorted(set(FLAGS.shapes) - set(SHAPES))
  if unknown:
    raise app.UsageError(f'unknown heads or shapes: {", ".join(unknown)}')
  try:
    train_ids, counts, boundary_id = load_training_ids(FLAGS.data_dir)
  except CorpusNotPrepared as error:
    print(f'error: {error}', file=sys.stderr)
    sys.exit(2)
  # Loaded once more (about a second) for the trainer, which needs every split.
  corpus = load_corpus(data_dir=FLAGS.data_dir or None) if FLAGS.epochs else None
  report = run_heads_benchmark(
      train_ids, counts, boundary_id, corpus, heads=FLAGS.heads,
      shapes={name: SHAPES[name] for name in FLAGS.shapes}, batch_size=FLAGS.batch_size,
      steps=FLAGS.steps, repeats=FLAGS.repeats, epochs=FLAGS.epochs,
      num_samples=FLAGS.num_samples, optimizer=FLAGS.optimizer,
      learning_rate=FLAGS.learning_rate, out=FLAGS.out,
      overrides={'data_dir': FLAGS.data_dir}, interleave=FLAGS.interleave,
      command='python -m experiments.benchmarks.heads ' + ' '.join(sys.argv[1:]))
  print(format_report(report))
  write_report(report, FLAGS.out)


if __name__ == '__main__':
  define_flags()
  run_experiment(main)
