"""The GPU check's report (experiments/benchmarks/gpu.py): each run's headline figures, read
from the JSON report or summary.json that its program wrote, with GPU.md's goal beside each;
and OUT/gpu.md. A reader is `reader(rows, run_id, seconds)`: rows is OUT/rows (a run's files
are in rows/<run_id>), seconds the run's process wall."""

import json
import shlex
from pathlib import Path

SAMPLED_HEADS = ('is', 'nce', 'negative_sampling')


def figure(name: str, value, unit: str = '', goal: str = '', note: str = '') -> dict:
  return {'name': name, 'value': None if value is None else float(value), 'unit': unit,
          'goal': goal, 'note': note}


def read(path: Path) -> dict:
  return json.loads(path.read_text())


def _phases(summary: dict, seconds: float, goal: str) -> list:
  """A training run's wall and phases (summary.json), the start-up being what the process
  spent outside the run's own clock (imports, flags, the backend)."""
  p = summary['phase_seconds']
  return [figure('wall, process', seconds, 's', goal, f'status {summary["status"]}'),
          figure('start-up (process wall − run wall)', seconds - summary['wall_seconds'], 's'),
          *(figure(f'{label} ({phase})', p[phase], 's') for label, phase in
            [('data', 'load'), ('model', 'build'), ('compile', 'compile'),
             ('training', 'train'), ('validations', 'validation')]),
          figure('final evaluation', sum(p['evaluation'].values()), 's'),
          figure('epochs', summary['epochs']), figure('test perplexity', summary['test_ppl'])]


def main_job(rows: Path, run_id: str, seconds: float) -> list:
  """Row 1: `python -m experiments.brown` end to end."""
  return _phases(read(rows / run_id / 'run' / 'summary.json'), seconds, 'under 60 s')


def kn5(rows: Path, run_id: str, seconds: float) -> list:
  row = read(rows / run_id / 'table1.json')['rows']['KN5']
  return [figure('KN5 test perplexity', row['test_ppl']),
          figure('KN5 fit and scoring', row['wall_seconds'], 's')]


def network(rows: Path, run_id: str, seconds: float) -> list:
  """Row 8: a network's run, and its test perplexity over KN5's (run 8a), Table 1's ratio."""
  summary = read(rows / run_id / 'run' / 'summary.json')
  reference = read(rows / '8a' / 'table1.json')['rows']['KN5']['test_ppl']
  return [*_phases(summary, seconds, 'under 600 s, to early stopping'),
          figure('test perplexity ÷ KN5\'s', summary['test_ppl'] / reference)]


def nnlm(rows: Path, run_id: str, seconds: float) -> list:
  found = []
  for r in read(rows / run_id / 'nnlm.json')['shapes']:
    shape = r['shape']
    found += [figure(f'{shape} JAX examples/s', r['jax']['median'], '/s'),
              figure(f'{shape} JAX / torch.compile', r['jax_over_torch_compiled'], '×',
                     '≥ 1.5×', r['torch_compiled_skipped'] or ''),
              figure(f'{shape} JAX / PyTorch eager', r['jax_over_torch'], '×', '',
                     r['torch_skipped'] or ''),
              figure(f'{shape} share of the matmul rate', r['share_of_matmul'], '%',
                     '≥ 50% at the filling batch'),
              _peer_matmul(shape, r['output_matmul'], r['torch_skipped'] or ''),
              _aligned_bfloat16(shape, r['output_matmul'].get('bfloat16')),
              _grouped(shape, r)]
  return found


def _grouped(shape: str, result: dict) -> dict:
  """The step run K updates a call (nplm train --updates_per_call) over torch.compile's."""
  grouped = result.get('grouped')
  if not grouped:
    return figure(f'{shape} JAX K updates a call / torch.compile', None, '×', '',
                  'not timed (--updates_per_call=1, or a report from before it was)')
  k, rate = grouped['updates_per_call'], grouped['median']
  peer_rate = (result.get('torch_compiled') or {}).get('median')
  return figure(f'{shape} JAX {k} updates a call / torch.compile',
                peer_rate and rate / peer_rate, '×', '≥ 1.5×',
                f'{rate:,.0f} examples/s, {grouped["over_one_a_call"]:.2f}× one a call'
                + ('' if peer_rate else f'; {result["torch_compiled_skipped"] or ""}'))


def _aligned_bfloat16(shape: str, bfloat16: dict | None) -> dict:
  """The bfloat16 output product with D and |V| rounded up to multiples of 8, over it as is."""
  name = f'{shape} bfloat16 output matmul, D and |V| to multiples of 8 / as is'
  if not bfloat16:
    return figure(name, None, '×', '', 'not timed (a report from before it was)')
  return figure(name, bfloat16['aligned_gflops_per_s'] / bfloat16['gflops_per_s'], '×', '',
                f'{bfloat16["gflops_per_s"]:,.0f} GFLOP/s as is, '
                f'{bfloat16["aligned_gflops_per_s"]:,.0f} at {bfloat16["aligned_dims"]}')


def _peer_matmul(shape: str, matmul: dict, torch_skipped: str) -> dict:
  """PyTorch's float32 output-layer product over XLA's, each timed alone: the kernels the
  step ratio rests on (cuBLAS's through each, in float32 or TF32 as each chose)."""
  xla, peer = matmul['gflops_per_s'], matmul.get('torch_gflops_per_s')
  return figure(f"{shape} PyTorch's output matmul / XLA's", peer and peer / xla, '×', '',
                f'XLA {xla:,.0f}, PyTorch {peer:,.0f} GFLOP/s' if peer else torch_skipped)


def lstm(rows: Path, run_id: str, seconds: float) -> list:
  r = read(rows / run_id / 'rnn_benchmark.json')
  return [figure('nplm tokens/s', r['nplm']['median'], '/s'),
          figure('nplm / nn.LSTM eager (cuDNN on a GPU)', r['nplm_over_torch'], '×', '≥ 1.5×',
                 r['torch_skipped'] or ''),
          figure('nplm / torch.compile', r['nplm_over_torch_compiled'], '×', '≥ 1.5×',
                 r['torch_compiled_skipped'] or '')]


def vocab_scaling(rows: Path, run_id: str, seconds: float) -> list:
  """Each head's step at the largest |V| timed, and over its step at the smallest (a run
  stopped early keeps the points it timed: the program writes after each)."""
  found = []
  for optimizer, by_size in read(rows / run_id / 'vocab_scaling.json')['results'].items():
    first, last = sorted(by_size, key=int)[0], sorted(by_size, key=int)[-1]
    for head, times in by_size[last].items():
      ratio = times['seconds_per_step'] / by_size[first][head]['seconds_per_step']
      found += [figure(f'{optimizer} {head}: ms per step at {int(last):,} words',
                       1e3 * times['seconds_per_step'], 'ms'),
                figure(f'{optimizer} {head}: step at {int(last):,} words ÷ at {int(first):,}',
                       ratio, '×', '≤ 2× (sampled heads)' if head in SAMPLED_HEADS else '')]
  return found


def vmapped(rows: Path, run_id: str, seconds: float) -> list:
  most = max(read(rows / run_id / 'vmapped.json')['rows'], key=lambda row: row['models'])
  k = most['models']
  return [figure(f'{k} together, aggregate examples/s', most['together']['median'], '/s'),
          figure(f'{k} together ÷ one model', most['together_over_one_model'], '×', '> 8×'),
          figure(f'{k} together ÷ {k} one by one', most['together_over_one_by_one'], '×')]


def word2vec(rows: Path, run_id: str, seconds: float) -> list:
  found = []
  for name, c in read(rows / run_id / 'word2vec.json')['configs'].items():
    speed = {who: c['over_seeds'][who]['words_per_second']['median']
             for who in ('nplm', 'gensim')}
    found += [figure(f'{name} nplm words/s', speed['nplm'], '/s'),
              figure(f'{name} gensim words/s', speed['gensim'], '/s'),
              figure(f'{name} nplm / gensim', c['nplm_minus_gensim']['speed_ratio'], '×',
                     '≥ 5×')]
  return found


def word2vec_loop(rows: Path, run_id: str, seconds: float) -> list:
  found = []
  for r in read(rows / run_id / 'word2vec_loop.json')['rows']:
    found.append(figure(f'{r["variant"]}, {r["chunk"]} positions a chunk, {r["form"]}: '
                        'ms a step', r['ms_per_step'], 'ms'))
  return found


def scale(rows: Path, run_id: str, seconds: float) -> list:
  r = read(rows / run_id / 'scale.json')
  corpus = r['scale']
  found = [figure('corpus tokens', corpus['tokens'], '', '100M (GPU.md)'),
           figure('preparation (one process)', corpus['prepare']['seconds'], 's')]
  for head in r['heads']:
    run = corpus['runs'][head]
    found += [figure(f'{head}: training tokens/s', r['figures'][head]['examples_per_second'],
                     '/s', '≥ 2,000,000/s'),
              figure(f'{head}: one epoch\'s training', run['phase_seconds']['train'], 's'),
              figure(f'{head}: wall of its nplm train', run['seconds'], 's')]
  return found


def dispatch(rows: Path, run_id: str, seconds: float) -> list:
  """Row 7's update one a call (nplm's loop) and K a call, and the host's time in a call."""
  r = read(rows / run_id / 'dispatch.json')
  found = [figure("the host's time in a call of one update", r['dispatch_seconds'] * 1e3, 'ms')]
  for name, way in r['ways'].items():
    found += [figure(f'{name}: tokens/s', way['median'], '/s', '≥ 2,000,000/s'),
              figure(f'{name}: over one a call', way['over_one_a_call'], '×', '',
                     f'max |loss difference| {way["max_loss_difference"]:.3g}')]
  return found


def format_value(f: dict) -> str:
  value, unit = f['value'], f['unit']
  if value is None:
    return 'n/a'
  return {'%': f'{100 * value:.0f}%', '×': f'{value:.2f}×', 's': f'{value:.1f} s',
          'ms': f'{value:.2f} ms', '/s': f'{value:,.0f}/s'}.get(unit, f'{value:,.6g}')


def format_report(report: dict) -> str:
  """OUT/gpu.md: the machine, a table of the runs, then each run's command and figures."""
  m = report['machine']
  torch = (f'PyTorch {m["torch"]} (CUDA: {"yes" if m.get("torch_cuda") else "no"})'
           if m.get('torch') else 'PyTorch not importable')
  environment = ' '.join(f'{k}={shlex.quote(v)}' for k, v in report['environment'].items())
  lines = [f'# GPU check: {m["device_kind"]}', '',
           f'{report["date"]}; {m["device_count"]} × {m["device_kind"]} ({m["platform"]}); '
           f'jax {m["jax"]}, jaxlib {m["jaxlib"]}; {torch}; gensim {m.get("gensim") or "no"}.',
           f'{"Dry run: toy sizes on the CPU" if report["dry_run"] else "GPU sizes"}; '
           f'budget {report["budget_s"]:.0f} s, took {report["seconds"]:.0f} s; Brown in '
           f'--data_dir={report["data_dir"]}. Ran: `{report["command"]}`',
           *([f'Every command ran with {environment}.'] if environment else []), '',
           '| row | run | status | wall s | CPU s | limit s |', '|---|---|---|---|---|---|']
  lines += [f'| {r["row"]} | {r["name"]} | {r["status"]} | {r["seconds"]:.1f} | '
            f'{r["cpu_seconds"]:.1f} | {r["limit_s"]:.0f} |' for r in report['runs']]
  for r in report['runs']:
    lines += ['', f'## Row {r["row"]}: {r["name"]}: {r["status"]}, {r["seconds"]:.1f} s',
              '', f'In {r["cwd"]}: `{r["command"]}`', '']
    if r['reason']:
      lines += [f'{r["status"]}: {r["reason"]}', '']
    if r['printed']:
      lines += ['It printed last:', '```', *r['printed'], '```', '']
    if r['figures']:
      lines += ['| figure | value | goal | note |', '|---|---|---|---|']
      lines += [f'| {f["name"]} | {format_value(f)} | {f["goal"]} | {f["note"]} |'
                for f in r['figures']]
  return '\n'.join(lines) + '\n'
