r"""Sentence scoring throughput: nplm's batched `score_sentences` on a file of sentences,
beside KenLM's query (`kenlm.Model.score`, one sentence at a time) on the same file.

  python -m experiments.benchmarks.scoring --workdir=runs/mlp9 --out=/tmp/scoring

The file (--tokens tokens, --file or a temporary one) is sentences of 5 to 40 words drawn
from the trained model's vocabulary with its training frequencies (a Zipf-like text whose
every word the model knows), one per line. nplm's first pass compiles (its time is reported
apart); the figure is the median tokens/s of --repeats passes after it, the tokens counted
as nplm scores them (the sentence end too, where the dataset has one). Where `import kenlm`
works, a 5-gram modified Kneser-Ney model of the same sentences (nplm.ngram, written as ARPA)
is queried sentence by sentence, in the same tokens, and the ratio printed.
"""

import importlib.util
import math
import tempfile
from pathlib import Path

import numpy as np
from absl import flags
from absl import logging as absl_logging

from experiments.benchmarks.harness import machine_info, machine_line, timed_runs, write_report
from nplm.cli import fail, refuse_arguments, run_experiment
from nplm.errors import ConfigError
from nplm.files import write_text_atomically
from nplm.ngram.arpa import write_arpa
from nplm.ngram.kneser_ney import KneserNey
from nplm.use.sentences import score_sentences
from nplm.use.ngram_run import NgramRun
from nplm.use.trained import NoTrainedModelError, load_trained

KENLM_ORDER = 5
SENTENCE_WORDS = (5, 40)  # Each sentence's length, drawn uniformly.


def sentences_file(model, path: Path, tokens: int, seed: int = 0) -> list[str]:
  """Sentences of the model's own words, about `tokens` tokens as nplm scores them, written
  to `path` one per line."""
  vocab, tokenizer = model.vocab, model.tokenizer
  # Words that the tokenizer reads back as themselves, each drawn as often as in training;
  # no marks (<unk>, </p>, </text>, <eos>).
  words = [w for w in vocab.words if not (w.startswith('<') and w.endswith('>'))
           and tokenizer.tokens(w) == [w]]
  counts = vocab.counts[vocab.encode(words)].astype(np.float64)
  rng = np.random.default_rng(seed)
  end = 1 if model.sentence_end is not None else 0
  drawn_lengths = rng.integers(SENTENCE_WORDS[0], SENTENCE_WORDS[1] + 1,
                               size=tokens // SENTENCE_WORDS[0] + 1)
  # Enough sentences to reach `tokens`, counting each one's end token.
  enough = int(np.searchsorted(np.cumsum(drawn_lengths + end), tokens)) + 1
  lengths = drawn_lengths[:enough]
  drawn = rng.choice(len(words), size=int(lengths.sum()), p=counts / counts.sum())
  cuts = np.cumsum(lengths)[:-1]
  sentences = [tokenizer.detokenize([words[i] for i in chunk]) for chunk in np.split(drawn, cuts)]
  write_text_atomically(path, ''.join(s + '\n' for s in sentences))
  return sentences


def nplm_rates(model, sentences: list[str], repeats: int) -> dict:
  """The first pass's seconds (it compiles), then the median tokens/s of `repeats` more."""
  (first,), scores = timed_runs(lambda: score_sentences(model, sentences), 1)
  seconds, _ = timed_runs(lambda: score_sentences(model, sentences), repeats)
  tokens = sum(score.num_tokens for score in scores)
  median = float(np.median(seconds))
  return {'tokens': tokens, 'first_pass_seconds': first, 'median_seconds': median,
          'compile_seconds': max(0.0, first - median), 'tokens_per_second': tokens / median,
          'log10_prob': math.fsum(score.log10_prob for score in scores)}


def fitted_kn5(model, sentences: list[str]):
  """(a KN5 of the sentences in the model's vocabulary, as an n-gram model every nplm tool
  reads; the sentences as the lines of tokens KenLM is given: the dataset's end token typed,
  no <s> </s> of KenLM's own)."""
  end = model.sentence_end
  tokenized = [model.tokenizer.tokens(s) + ([end] if end is not None else []) for s in sentences]
  ids = model.vocab.encode([token for sentence in tokenized for token in sentence])
  kn5 = KneserNey.fit(ids, KENLM_ORDER, model.vocab.size, model.boundary_id)
  return NgramRun(model.config, model.vocab, kn5, None), [' '.join(t) for t in tokenized]


def kenlm_rates(kn5: NgramRun, lines: list[str], repeats: int, directory: Path) -> dict:
  """The same KN5 written as ARPA and queried with KenLM one sentence at a time. Each line
  starts with the order-1 boundary tokens nplm reads a sentence after (KenLM's own <s> is
  not in nplm's model); their fixed log10 p is taken off the total, which is then nplm's."""
  import kenlm  # The peer, optional: only this comparison needs it.
  arpa = directory / f'kn{KENLM_ORDER}.arpa'
  write_arpa(kn5.model, kn5.vocab, arpa)
  query = kenlm.Model(str(arpa))
  start = ' '.join([kn5.vocab.words[kn5.boundary_id]] * (KENLM_ORDER - 1))
  started = [f'{start} {line}' for line in lines]
  score = lambda: sum(query.score(line, bos=False, eos=False) for line in started)  # noqa: E731
  score()
  seconds, total = timed_runs(score, repeats)
  median = float(np.median(seconds))
  tokens = sum(len(line.split()) for line in lines)
  start_log10_prob = query.score(start, bos=False, eos=False)
  return {'tokens': tokens, 'median_seconds': median, 'tokens_per_second': tokens / median,
          'log10_prob': total - len(lines) * start_log10_prob}


def benchmark(workdir: str, tokens: int, repeats: int, file: str | None, directory: Path) -> dict:
  model = load_trained(workdir)
  model.require_language_model()
  path = Path(file) if file else directory / 'sentences.txt'
  sentences = sentences_file(model, path, tokens)
  report = {'machine': machine_info(), 'model': model.name, 'workdir': str(workdir),
            'file': str(path), 'sentences': len(sentences), 'repeats': repeats,
            'nplm': nplm_rates(model, sentences, repeats)}
  kn5, lines = fitted_kn5(model, sentences)
  report['nplm_kn5'] = nplm_rates(kn5, sentences, repeats)
  report['kenlm'] = (kenlm_rates(kn5, lines, repeats, directory)
                     if importlib.util.find_spec('kenlm') else None)
  return report


def formatted(report: dict, markdown: bool = False) -> str:
  del markdown  # The same lines in both.
  ours, kn5, theirs = report['nplm'], report['nplm_kn5'], report['kenlm']
  rate = lambda r: f'{r["tokens_per_second"]:,.0f} tokens/s'  # noqa: E731
  lines = [machine_line(report['machine']),
           f'{report["file"]}: {report["sentences"]:,} sentences, {ours["tokens"]:,} tokens',
           f'nplm score_sentences, {report["model"]}: {rate(ours)} (median of '
           f'{report["repeats"]}; first pass {ours["first_pass_seconds"]:.2f} s, compiling '
           f'about {ours["compile_seconds"]:.2f} s)',
           f'nplm score_sentences, KN{KENLM_ORDER} of the same sentences: {rate(kn5)}, '
           f'total log10 p {kn5["log10_prob"]:.2f}']
  if theirs is None:
    lines.append('KenLM: not installed (pip install kenlm), no comparison')
  else:
    lines += [f'KenLM Model.score, that KN{KENLM_ORDER} as ARPA, per sentence: {rate(theirs)}, '
              f'total log10 p {theirs["log10_prob"]:.2f}',
              f'nplm KN{KENLM_ORDER} / KenLM: '
              f'{kn5["tokens_per_second"] / theirs["tokens_per_second"]:.3g}; '
              f'nplm {report["model"]} / KenLM: '
              f'{ours["tokens_per_second"] / theirs["tokens_per_second"]:.3g}']
  return '\n'.join(lines)


def main(argv):
  refuse_arguments(argv)
  absl_logging.set_verbosity(absl_logging.WARNING)  # Orbax's INFO lines would bury it.
  options = flags.FLAGS
  with tempfile.TemporaryDirectory() as scratch:
    try:
      report = benchmark(options.workdir, options.tokens, options.repeats, options.file,
                         Path(scratch))
    except (ConfigError, NoTrainedModelError) as error:
      fail(error)
  print(formatted(report))
  if options.out:
    write_report(report, options.out, formatted)


if __name__ == '__main__':
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run to score with.')
  flags.DEFINE_integer('tokens', 1_000_000, 'Tokens in the file of sentences.')
  flags.DEFINE_integer('repeats', 3, 'Timed passes; the median is reported.')
  flags.DEFINE_string('file', None, 'Where to write the sentences (default: a temporary file).')
  flags.DEFINE_string('out', '', 'If set, also writes OUT.json and OUT.md.')
  flags.mark_flag_as_required('workdir')
  run_experiment(main)
