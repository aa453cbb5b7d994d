"""The word2vec benchmark's report (experiments/benchmarks/word2vec.py): per variant, nplm's
and gensim's figures as mean ± spread over the seeds, their differences and the goals met;
the speed section's table."""

from experiments.benchmarks.harness import machine_line, table_lines

# The most |nplm - gensim| of the seeds' means for a goal met (ρ; analogies in points).
GOALS = {'wordsim353': 0.02, 'simlex999': 0.02, 'analogies_points': 1.0}
MIN_SPEED_RATIO = 1.0  # nplm's median words/s over gensim's (issue 45: at least gensim's).


def _number(value, percent: bool = False) -> str:
  if value is None:
    return 'n/a'
  return f'{100 * value:.1f}%' if percent else f'{value:.3f}'


def score_cells(scores: dict) -> list[str]:
  analogies = scores['analogies']
  return [_number(scores['wordsim353']['spearman']), _number(scores['simlex999']['spearman']),
          f'{_number(analogies["accuracy"], True)} ({_number(analogies["coverage"], True)})']


def seed_cells(summary: dict, coverage: float) -> list[str]:
  """mean ± spread of each figure (analogies in %, its spread in points)."""
  def cell(figure: dict, scale: float = 1.0, form: str = '.3f') -> str:
    if figure['mean'] is None:
      return 'n/a'
    return f'{scale * figure["mean"]:{form}} ± {scale * figure["spread"]:{form}}'
  return [cell(summary['wordsim353']), cell(summary['simlex999']),
          f'{cell(summary["analogies"], 100.0, ".1f")} ({100 * coverage:.1f}%)',
          cell(summary['words_per_second'], 1.0, ',.0f')]


def difference_cells(difference: dict) -> list[str]:
  signed = ['n/a' if difference[name] is None else f'{difference[name]:+.3f}'
            for name in ('wordsim353', 'simlex999')]
  points = difference['analogies_points']
  return [*signed, 'n/a' if points is None else f'{points:+.1f} points',
          f'{difference["speed_ratio"]:.2f}×']


def goal_cells(goals_met: dict) -> list[str]:
  return [{True: 'met', False: 'not met', None: 'n/a'}[goals_met[name]]
          for name in ('wordsim353', 'simlex999', 'analogies_points', 'speed_ratio')]


def variant_rows(result: dict) -> list[list[str]]:
  rows = [['config', 'trained by', 'WordSim-353 ρ', 'SimLex-999 ρ', 'analogies', 'words/s']]
  for name, entry in result['configs'].items():
    coverage = entry['runs']['gensim'][0]['scores']['analogies']['coverage']
    for who in ('nplm', 'gensim'):
      rows.append([name, who, *seed_cells(entry['over_seeds'][who], coverage)])
    rows.append([name, 'nplm − gensim', *difference_cells(entry['nplm_minus_gensim'])])
    rows.append([name, 'goal', *goal_cells(entry['goals_met'])])
  for workdir, entry in result['workdirs'].items():
    rows.append([f'{entry["model"]} ({entry["head"]}, m={entry["dim"]})', workdir,
                 *score_cells(entry['scores']), ''])
  return rows


def speed_lines(speed: dict, markdown: bool) -> list[str]:
  rows = [['config', 'nplm words/s', 'gensim words/s', 'nplm / gensim',
           f'goal (≥ {MIN_SPEED_RATIO})']]
  for name, entry in speed['configs'].items():
    rows.append([name, f'{entry["nplm"]["words_per_second"]:,.0f}',
                 f'{entry["gensim"]["words_per_second"]:,.0f}', f'{entry["speed_ratio"]:.2f}×',
                 'met' if entry['speed_ratio_met'] else 'not met'])
  return ['', f'Speed at scale, 1 epoch, seed 0, on a generated corpus of {speed["tokens"]:,} '
          f'i.i.d. Zipf words over {speed["types"]:,} types: {speed["train_words"]:,} training '
          f'tokens (<eos> ending each line), |V| = {speed["vocab_size"]:,}.', '',
          *table_lines(rows, markdown)]


def format_report(result: dict, markdown: bool = False) -> str:
  m = result['machine']
  seeds = next((entry['seeds'] for entry in result['configs'].values()), [])
  lines = [machine_line(m) + f'; {m["usable_cores"]} cores usable, gensim {result["gensim"]} '
           f'({result["workers"]} workers)',
           f'Brown training split: {result["train_words"]:,} words, |V| = '
           f'{result["vocab_size"]:,}. Each figure: mean ± spread (max − min) over seeds '
           f'{", ".join(map(str, seeds))}; analogies: accuracy ± points (coverage).',
           f'Goals: |Δρ| ≤ {GOALS["wordsim353"]} (WordSim-353), ≤ {GOALS["simlex999"]} '
           f'(SimLex-999); |Δ analogies| ≤ {GOALS["analogies_points"]:g} point; words/s nplm '
           f'/ gensim ≥ {MIN_SPEED_RATIO} (of the medians over the seeds).', '']
  lines += table_lines(variant_rows(result), markdown)
  entry = next(iter(result['configs'].values()), None)
  if entry:  # The words are nplm's on both sides: the same pairs and questions count.
    scores = entry['runs']['gensim'][0]['scores']
    lines += ['', 'Coverage: ' + ', '.join(
        f'{title} {scores[name]["covered"]:,} of {scores[name]["pairs"]:,} pairs'
        for name, title in (('wordsim353', 'WordSim-353'), ('simlex999', 'SimLex-999')))
        + f', analogies {scores["analogies"]["answered"]:,} of '
        f'{scores["analogies"]["questions"]:,} questions.']
  if result.get('speed'):
    lines += speed_lines(result['speed'], markdown)
  return '\n'.join(lines) + '\n'
