"""A trained model behind HTTP: JSON answers to score, rank, predict, complete, generate and
correct (the same numbers as those commands), and a page that completes as you type.

  nplm serve --workdir=runs/mlp9                   # http://127.0.0.1:8080/
  curl -s localhost:8080/predict -d '{"prefix": "The jury said", "k": 5}'

The model is read once. Requests are JSON objects (docs/serving.md lists each endpoint's
fields); every refusal is a 4xx with {"error": one line}. Localhost only unless --host says
otherwise (--host=0.0.0.0: every interface; the server has no authentication). SIGTERM or
Ctrl-C: it stops listening, finishes the requests in flight and exits 0.
"""

import asyncio
import logging

from absl import flags

from nplm import cli
from nplm.errors import ConfigError
from nplm.serve.app import Service, serve
from nplm.serve.requests import Limits
from nplm.stop_requests import Interrupted, interrupting
from nplm.use.misspelling_lists import read_pairs
from nplm.use.trained import load_trained

FLAGS = flags.FLAGS
# The flag of each Limits field.
LIMIT_FLAGS = {'max_body_bytes': 'body_bytes', 'max_text_chars': 'text_chars',
               'max_texts': 'texts', 'max_k': 'k', 'max_completion_words': 'max_words',
               'max_length': 'length', 'max_samples': 'samples', 'max_pending': 'pending',
               'max_corrected_words': 'changes'}


def limits_from_flags() -> Limits:
  limits = Limits(**{field: FLAGS[flag].value for flag, field in LIMIT_FLAGS.items()})
  for flag, field in LIMIT_FLAGS.items():
    if getattr(limits, field) < 1:
      raise ConfigError(f'--{flag} must be at least 1, not {getattr(limits, field)}')
  return limits


def main(argv):
  cli.refuse_arguments(argv)
  cli.show_progress_lines()
  try:
    if not 0 <= FLAGS.port <= 65535:
      raise ConfigError(f'--port must be from 0 (any free port) to 65535, not {FLAGS.port}')
    limits = limits_from_flags()
    misspellings = tuple(read_pairs(FLAGS.misspellings)) if FLAGS.misspellings else ()
    with interrupting(f'loading {FLAGS.workdir}'):
      model = load_trained(FLAGS.workdir)
      service = Service(model, limits, misspellings)
      service.warm()
  except Interrupted as stop:
    cli.stop_interrupted(str(stop))
  except (*cli.USER_ERRORS, OSError) as error:
    cli.fail(error)

  def ready(url: str) -> None:
    print(f'serving {model.name} from {FLAGS.workdir} at {url} (Ctrl-C stops)', flush=True)

  try:
    asyncio.run(serve(service, FLAGS.host, FLAGS.port, ready))
  except OSError as error:  # The port taken, an address not on this machine.
    cli.fail(f'cannot listen on {FLAGS.host}:{FLAGS.port}: {error.strerror or error}')
  logging.getLogger(__name__).info('stopped')


def run_program(argv=None) -> None:
  flags.DEFINE_string('workdir', None, 'Workdir of a trained run (nplm train or nplm ngram).')
  flags.DEFINE_string('host', '127.0.0.1', 'Address to listen on: 127.0.0.1 (this machine '
                      'only), or 0.0.0.0 for every interface (no authentication).')
  flags.DEFINE_integer('port', 8080, 'Port to listen on; 0: any free one (printed).')
  flags.DEFINE_string('misspellings', '', '/correct\'s channel learned from this file of '
                      'misspellings (or "codespell"), as nplm correct --misspellings.')
  defaults = Limits()
  for flag, field, text in [
      ('max_body_bytes', 'body_bytes', "A request's JSON body, in bytes."),
      ('max_text_chars', 'text_chars', 'Characters of one text, prefix or prompt.'),
      ('max_texts', 'texts', 'Sentences in one /score, /rank or /correct request.'),
      ('max_k', 'k', 'Predictions or completions one request may list (its "k").'),
      ('max_completion_words', 'max_words', 'Words a completion may add ("max_words").'),
      ('max_length', 'length', 'Tokens a sample may draw ("length").'),
      ('max_samples', 'samples', 'Samples in one /generate request.'),
      ('max_corrected_words', 'changes', 'Words /correct may change in a sentence '
       '("max_changes").'),
      ('max_pending', 'pending', 'Requests waiting for the model at once; beyond, 503.')]:
    flags.DEFINE_integer(flag, getattr(defaults, field), text)
  flags.mark_flag_as_required('workdir')
  cli.start(main, argv)


if __name__ == '__main__':
  run_program()
