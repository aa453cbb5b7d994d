r"""How probable a trained model finds each word of some sentences.

  nplm score --workdir=runs/mlp9 "about 15 minutes from" "about 15 minuets from"
  python -m experiments.score --workdir=runs/lstm --json "The jury said."

Per sentence: each word's natural-log probability given the words before it (a word outside
the vocabulary is read as `<unk>`, its typed form noted), the total log-probability and the
per-token perplexity exp(-mean log p). Each sentence starts as a split does (nplm.use.sentences)
and is tokenized as the model's dataset was (nplm.data.tokenize: Brown's punctuation apart).
"""

import json
from collections.abc import Sequence

from absl import flags

from nplm import cli
from nplm.data.vocab import UNK
from nplm.errors import ConfigError
from nplm.use.trained import load_trained
from nplm.use.sentences import SentenceScore, score_sentences
from nplm.stop_requests import Interrupted, interrupting


def _label(token) -> str:
  if token.token == UNK and token.word != UNK:
    return f'{UNK} ({token.word})'
  return '␣' if token.token == ' ' else token.token  # A character model's space, visible.


def report(scores: Sequence[SentenceScore]) -> str:
  """One block per sentence: a line per token, then the totals."""
  blocks = []
  for score in scores:
    width = max(12, *(len(_label(t)) for t in score.tokens))
    lines = [score.text]
    lines += [f'  {_label(t):{width}} {t.log_prob:9.4f}' for t in score.tokens]
    lines.append(f'  total log p {score.log_prob:.4f}   perplexity {score.perplexity:.2f} '
                 f'({len(score.tokens):,} token{"" if len(score.tokens) == 1 else "s"})')
    blocks.append('\n'.join(lines))
  return '\n\n'.join(blocks)


def as_json(scores: Sequence[SentenceScore]) -> str:
  return json.dumps([score.as_dict() for score in scores], indent=2)


def main(argv):
  cli.show_progress_lines()
  try:
    if len(argv) < 2:
      raise ConfigError('give one or more sentences to score, each one quoted argument')
    with interrupting(f'scoring with {flags.FLAGS.workdir}'):
      scores = score_sentences(load_trained(flags.FLAGS.workdir), argv[1:])
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)
  print(as_json(scores) if flags.FLAGS.json else report(scores))


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train).')
  flags.DEFINE_bool('json', False, 'Print the scores as JSON: per sentence its text, '
                    'log_prob, perplexity and tokens (word as typed, token read, log_prob).')
  flags.mark_flag_as_required('workdir')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
