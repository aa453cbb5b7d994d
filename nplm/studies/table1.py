"""Table 1 of Bengio et al. (2003) on identical tokens, beside the paper's numbers (the
program: nplm.cli.table1, `nplm table1`).

Rows: MLP1 … MLP10 (odd: a network trained from the recipe mlpK, nplm/recipes/mlpK.flags;
even: that network mixed with the interpolated trigram at weight 0.5, the paper's "mix"),
MLP1R and MLP2R (MLP1 regularized by dropout, the recipe mlp1_regularized, and its mix; beyond
the paper, which did not regularize beyond weight decay), RNN, LSTM and GRU (recurrent models
beyond the paper, the recipes rnn, lstm, gru), TRANSFORMER (a causal Transformer over the n-1
previous words, the recipe transformer), DelInt3 (the paper's interpolated trigram, weights by
EM on validation), KN3, KN4, KN5 (interpolated modified Kneser-Ney). Every perplexity is exact
over every token of its split; each row's test perplexity is also given as a ratio to KN5's,
the comparison that carries across vocabularies. build_table writes <workdir>/table1.md and
table1.json; rows already computed in the same workdir are reused, and an interrupted
network's training resumes. The paper's numbers: nplm/reference/bengio2003_table1.csv.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import time
from pathlib import Path

from nplm import flagfiles, ngram, trainer
from nplm.config import Config
from nplm.data.corpus import SPLITS, Corpus
from nplm.files import write_json_atomically, write_text_atomically
from nplm.models import model_class
from nplm.use.trained import load_trained
from nplm.run_files.summary import RunStatus, finished_summary
from nplm.training.config_checks import settled

log = logging.getLogger('nplm.studies.table1')

PAPER_TABLE = Path(__file__).parent.parent / 'reference' / 'bengio2003_table1.csv'


class Interrupted(Exception):
  """A network's training was stopped (Ctrl-C, SIGTERM) after saving a checkpoint."""


@dataclasses.dataclass(frozen=True)
class Row:
  name: str
  flagfile: str = ''  # A network trained from this recipe (nplm/recipes/<flagfile>.flags).
  mixes: str = ''  # A network row mixed with DelInt3.
  ngram: str = ''  # 'interpolated' or 'kneser_ney'.
  order: int = 0
  paper_row: str = ''  # The paper's row shown beside it (default: its own name's).


# Beyond the paper: the recipes rnn, lstm, gru, transformer.
BEYOND_THE_PAPER_ROWS = ('RNN', 'LSTM', 'GRU', 'TRANSFORMER')
# MLP1 with dropout, the regularization the paper's networks lacked (the recipe
# mlp1_regularized), and its mix.
REGULARIZED_ROWS = ('MLP1R', 'MLP2R')
ROWS = {row.name: row for row in [
    *(Row(f'MLP{k}', flagfile=f'mlp{k}') for k in (1, 3, 5, 7, 9)),
    *(Row(f'MLP{k + 1}', mixes=f'MLP{k}') for k in (1, 3, 5, 7, 9)),
    Row('MLP1R', flagfile='mlp1_regularized', paper_row='MLP1'),
    Row('MLP2R', mixes='MLP1R', paper_row='MLP2'),
    *(Row(name, flagfile=name.lower()) for name in BEYOND_THE_PAPER_ROWS),
    Row('DelInt3', ngram='interpolated', order=3),
    *(Row(f'KN{n}', ngram='kneser_ney', order=n) for n in (3, 4, 5)),
]}
ROW_ORDER = [*(f'MLP{k}' for k in range(1, 11)), *REGULARIZED_ROWS, *BEYOND_THE_PAPER_ROWS,
             'DelInt3', 'KN3', 'KN4', 'KN5']


def paper_rows(path: Path = PAPER_TABLE) -> dict[str, dict]:
  """The paper's Table 1 keyed like ours (its class-based back-off rows are not reproduced)."""
  lines = [line for line in path.read_text().splitlines() if not line.startswith('#')]
  rows = {}
  for entry in csv.DictReader(lines):
    name = {'Del. Int.': 'DelInt3', 'Kneser-Ney back-off': f'KN{entry["n"]}'}.get(
        entry['model'], entry['model'])
    if name in ROWS:
      rows[name] = {split: float(entry[f'{split}_ppl']) if entry[f'{split}_ppl'] else None
                    for split in SPLITS}
      rows[name].update({key: entry[key] for key in ('n', 'h', 'm', 'direct', 'mix')})
  return rows


def needed_rows(requested: list[str]) -> list[str]:
  """The requested rows, what they need (their network, DelInt3, KN5), in table order."""
  unknown = [name for name in requested if name not in ROWS]
  if unknown:
    raise ValueError(f'unknown rows {unknown}; known: {", ".join(ROW_ORDER)}')
  needed = set(requested) | {'KN5'}
  for name in requested:
    if ROWS[name].mixes:
      needed |= {ROWS[name].mixes, 'DelInt3'}
  return [name for name in ROW_ORDER if name in needed]


class Table:
  """Computes the rows of one workdir, reusing those already there."""

  def __init__(self, workdir: Path, corpus: Corpus, overrides: dict | None = None):
    self.workdir, self.corpus, self.overrides = Path(workdir), corpus, overrides or {}
    self.boundary = corpus.boundary_id
    self.data_identity = {'vocab': corpus.vocab.fingerprint(),
                          'tokens': {s: len(ids) for s, ids in corpus.splits.items()}}
    self._trigram = None

  def row(self, name: str) -> dict:
    row = ROWS[name]
    if row.flagfile:
      return self.network_row(row)
    spec = {'row': dataclasses.asdict(row), **self.data_identity}
    if row.mixes:
      base = self.network_summary(row.mixes)
      spec['network'] = {key: base[key] for key in ('config', 'steps', 'best_epoch')}
    path = self.workdir / 'rows' / f'{name}.json'
    if path.exists() and (saved := json.loads(path.read_text()))['spec'] == spec:
      log.info('%s: reused from %s', name, path)
      return saved['result']
    started = time.perf_counter()
    result = self.mixed_row(row) if row.mixes else self.ngram_row(row)
    result['wall_seconds'] = time.perf_counter() - started
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomically(path, {'spec': spec, 'result': result})
    return result

  def trigram(self) -> ngram.InterpolatedTrigram:
    if self._trigram is None:
      splits = self.corpus.splits
      self._trigram = ngram.InterpolatedTrigram.fit(splits['train'], splits['valid'],
                                                    self.corpus.vocab.size, self.boundary)
    return self._trigram

  def ngram_row(self, row: Row) -> dict:
    log.info('%s: fitting on %d training tokens', row.name, len(self.corpus.splits['train']))
    if row.ngram == 'interpolated':
      model = self.trigram()
      details = {'weights': model.weights.tolist(), 'em_iterations': model.fitted.iterations}
    else:
      model = ngram.KneserNey.fit(self.corpus.splits['train'], row.order,
                                  self.corpus.vocab.size, self.boundary)
      details = {'discounts': [list(d) for d in model.discounts],
                 'discount_fallback': list(model.fallback_orders)}
    ppl = {split: ngram.perplexity(model.log_prob_split(ids))
           for split, ids in self.corpus.splits.items()}
    return {**self.description(row), **{f'{s}_ppl': ppl[s] for s in SPLITS}, **details}

  def network_config(self, name: str) -> Config:
    """The row's recipe in <workdir>/<name>; its final evaluation scores every split, as
    the table has a train column (whatever a recipe or --eval_splits=auto would choose)."""
    config = flagfiles.config_from_flagfile(ROWS[name].flagfile, workdir=str(self.workdir / name))
    return settled(config.replace(**{**self.overrides, 'eval_splits': ','.join(SPLITS)}))

  def network_summary(self, name: str) -> dict:
    """The finished run of a network row in <workdir>/<name>, trained or resumed if need be."""
    config = self.network_config(name)
    summary = finished_summary(config)
    if summary is not None:
      return summary
    log.info('%s: training in %s', name, config.workdir)
    summary = trainer.run(config, self.corpus)
    if not RunStatus(summary['status']).finished:
      raise Interrupted(f'{name} was interrupted at step {summary["steps"]}; '
                        'rerun the same command to resume it')
    return summary

  def network_row(self, row: Row) -> dict:
    summary = self.network_summary(row.name)
    return {**self.description(row), **{f'{s}_ppl': summary[f'{s}_ppl'] for s in SPLITS},
            'epochs': summary['epochs'], 'best_epoch': summary['best_epoch'],
            'wall_seconds': summary['wall_seconds'], 'status': summary['status']}

  def mixed_row(self, row: Row) -> dict:
    network = load_trained(self.workdir / row.mixes)
    splits = {s: self.corpus.splits[s] for s in ('valid', 'test')}
    log.info('%s: scoring %s token by token to mix it with DelInt3', row.name, row.mixes)
    log_probs = {s: network.split_log_probs(ids) for s, ids in splits.items()}
    mixes = self.trigram().mix_with(log_probs, splits)
    fixed = mixes['fixed']['ppl']
    return {**self.description(row), 'train_ppl': None, 'valid_ppl': fixed['valid'],
            'test_ppl': fixed['test'],
            'mixtures': {way: {'weights': m['weights'].tolist(), **m['ppl']}
                         for way, m in mixes.items()}}

  def description(self, row: Row) -> dict:
    if row.ngram:
      return {'model': row.name, 'n': row.order, 'mix': False}
    config = self.network_config(row.mixes or row.name)
    windows = 'order' in model_class(config.model).knobs  # n: the window's order.
    return {'model': row.name, 'n': config.order if windows else None,
            'h': config.hidden_size,
            'm': config.feature_size, 'direct': config.direct, 'mix': bool(row.mixes),
            'head': config.head}


def build_table(workdir: str | Path, corpus: Corpus, requested: list[str] | None = None,
                overrides: dict | None = None) -> dict:
  """Computes (or reuses) the rows and writes <workdir>/table1.json and table1.md."""
  requested = requested or ROW_ORDER
  names = needed_rows(requested)
  table = Table(Path(workdir), corpus, overrides)
  # The n-gram rows first: DelInt3's fit, timed in its row, then serves every mix.
  by_kind = sorted(names, key=lambda name: (not ROWS[name].ngram, bool(ROWS[name].mixes)))
  results = {name: table.row(name) for name in by_kind}
  paper = paper_rows()
  kn5, paper_kn5 = results['KN5']['test_ppl'], paper['KN5']['test']
  for name, result in results.items():
    result['test_over_kn5'] = result['test_ppl'] / kn5
    paper_name = ROWS[name].paper_row or name
    if paper_name in paper:
      result['paper'] = {**paper[paper_name],
                         'test_over_kn5': paper[paper_name]['test'] / paper_kn5}
    else:
      result['paper'] = {'valid': None, 'test': None, 'test_over_kn5': None}
  stats = corpus.stats
  report = {'rows': {name: results[name] for name in names if name in requested},
            'vocab_size': corpus.vocab.size,
            'tokens': {s: stats[s]['tokens'] for s in SPLITS},
            'unk_rate': {s: stats[s]['unk_rate'] for s in SPLITS},
            'kn5_test_ppl': kn5, 'paper_kn5_test_ppl': paper_kn5}
  workdir = Path(workdir)
  write_json_atomically(workdir / 'table1.json', report)
  write_text_atomically(workdir / 'table1.md', markdown(report))
  return report


def _number(value, digits: int = 1) -> str:
  if value is None:
    return ''
  if isinstance(value, bool):
    return 'yes' if value else 'no'
  return f'{value:.{digits}f}' if isinstance(value, float) else str(value)


def _duration(seconds: float) -> str:
  return f'{seconds / 60:.1f} min' if seconds >= 60 else f'{seconds:.1f} s'


def markdown(report: dict) -> str:
  rate = ', '.join(f'{s} {100 * report["unk_rate"][s]:.2f}%' for s in SPLITS)
  tokens = ', '.join(f'{s} {report["tokens"][s]:,}' for s in SPLITS)
  lines = [
      '# Table 1 of Bengio et al. (2003), reproduced on identical tokens', '',
      f'Brown: |V| = {report["vocab_size"]:,} (the paper: 16,383); tokens {tokens}; '
      f'<unk> rate {rate}.',
      'Perplexities are exact over every token of each split. The paper\'s numbers are on '
      'its own vocabulary, so compare the ratios to KN5, not the perplexities. Wall: a '
      'network\'s training to early stopping; a mix, scoring the network and fitting its '
      'weights; an n-gram model, fitting and scoring. RNN, LSTM and GRU (beyond the paper) '
      'read the whole history (n blank); their h is the state size, m the embedding size. '
      'TRANSFORMER (beyond the paper) reads the n-1 previous words; its h is the feed-forward '
      'width, m = d_model. MLP1R is MLP1 with dropout (the recipe mlp1_regularized), '
      'MLP2R its mix: beyond the paper, which stopped early but did not regularize further; '
      'the paper\'s columns beside them are its MLP1 and MLP2, the same networks unregularized.',
      '',
      '| model | n | h | m | direct | mix | train | valid | test | test / KN5 '
      '| paper valid | paper test | paper test / KN5 | wall |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|']
  for name, row in report['rows'].items():
    paper = row['paper']
    cells = [name, row['n'], row.get('h'), row.get('m'), row.get('direct'), row['mix'],
             row['train_ppl'], row['valid_ppl'], row['test_ppl']]
    lines.append('| ' + ' | '.join(_number(c) for c in cells) +
                 f' | {row["test_over_kn5"]:.3f} | {_number(paper["valid"], 0)} '
                 f'| {_number(paper["test"], 0)} | {_number(paper["test_over_kn5"], 3)} '
                 f'| {_duration(row["wall_seconds"])} |')
  mixed = {name: row for name, row in report['rows'].items() if 'mixtures' in row}
  if mixed:
    lines += ['', 'Mixing the network with DelInt3, p = λ p_network + (1 - λ) p_trigram; λ '
              'learned by EM on valid (binned: one λ per bin of the context\'s training '
              'frequency). The table above uses λ = 0.5, as the paper.', '',
              '| model | λ = 0.5 valid | test | learned λ | valid | test '
              '| binned valid | test | test / KN5 (binned) |',
              '|---|---|---|---|---|---|---|---|---|']
    for name, row in mixed.items():
      ways = row['mixtures']
      lines.append(
          f'| {name} | {ways["fixed"]["valid"]:.1f} | {ways["fixed"]["test"]:.1f} '
          f'| {ways["learned"]["weights"][0][0]:.3f} | {ways["learned"]["valid"]:.1f} '
          f'| {ways["learned"]["test"]:.1f} | {ways["binned"]["valid"]:.1f} '
          f'| {ways["binned"]["test"]:.1f} '
          f'| {ways["binned"]["test"] / report["kn5_test_ppl"]:.3f} |')
  return '\n'.join(lines) + '\n'
