"""`nplm serve`: one trained model behind HTTP, answering POST /score, /rank, /predict,
/complete, /generate and /correct as the commands answer (nplm.use.answers: one function
behind both), with GET /health, GET /info and the page at / (nplm/serve/page).

aiohttp (docs/decisions.md says why): the event loop reads requests and writes answers, so a
slow client holds no one else up; the model runs on one worker thread, requests in turn
(never two at once in its state), at most Limits.pending of them waiting. Every refusal is
a 4xx (503 when too many wait) with {"error": one line naming the limit or the mistake}.
On SIGTERM or Ctrl-C the server stops listening, finishes the requests in flight (at most
SHUTDOWN_SECONDS) and returns.
"""

import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import signal
from pathlib import Path

from aiohttp import web

from nplm import paths
from nplm.errors import ConfigError
from nplm.run_files.summary import read_summary
from nplm.use.ngram_run import is_ngram_dir
from nplm.serve.requests import Limits, RequestError, fields_of, parsed
from nplm.use import answers
from nplm.use.completion import Completer
from nplm.use.correction import DEFAULT_SETTINGS, Corrector, default_alpha
from nplm.use.generation import Sampling

log = logging.getLogger(__name__)

PAGE = Path(__file__).with_name('page')
PAGE_FILES = {'/': 'index.html', '/page.js': 'page.js', '/page.css': 'page.css'}
SHUTDOWN_SECONDS = 5.0
# The page's /complete request (page.js): what Service.warm compiles the beam search for.
PAGE_COMPLETION = {'k': 8, 'max_words': 3}


class Service:
  """The model, read once, and the one thread that runs it."""

  def __init__(self, model, limits: Limits, misspellings: tuple[tuple[str, str], ...] = ()):
    model.require_language_model()
    # /correct's settings where a request gives none, α the channel's.
    self.correct_defaults = {**DEFAULT_SETTINGS, 'alpha': default_alpha(bool(misspellings))}
    self.model, self.limits = model, limits
    self.fields = fields_of(limits, self.correct_defaults['alpha'])
    self.misspellings = misspellings  # The channel's to learn from (nplm serve --misspellings).
    # Built at the first /correct (a character model refuses it), or now to learn from them.
    self._corrector = Corrector(model, misspellings=misspellings) if misspellings else None
    # /complete's, by typos: the word being typed read through the channel, or as typed.
    self.completers = {True: Completer(model, misspellings=misspellings),
                       False: Completer(model, typos=False)}
    self.worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix='nplm-model')
    self.pending = 0
    self.perplexities = recorded_perplexities(Path(model.config.workdir))

  def warm(self) -> None:
    """What the first requests would compile, compiled before the server says it is ready: a
    window model's scoring of a correction's variants at each row count it pads to (each
    met at a word boundary of the first sentences typed, 0.15 to 0.3 s each under the
    MLP9: TrainedModel.compile_window_rows), and the page's completion of a letter being
    typed, with typos and without."""
    self.model.compile_window_rows()
    for completer in self.completers.values():
      completer.complete('T', **PAGE_COMPLETION)

  def answer(self, endpoint: str, request: dict) -> dict:
    """What the endpoint answers (on the worker thread)."""
    model = self.model
    if endpoint == 'score':
      return {'scores': list(answers.scores(model, request['texts'], request['tokens']))}
    if endpoint == 'rank':
      return {'ranked': answers.rank(model, request['texts'])}
    if endpoint == 'predict':
      return answers.predict(model, request['prefix'], request['k'], self.typos(request))
    if endpoint == 'complete':
      return answers.complete(self.completers[request['typos']], request['prefix'],
                              request['k'], request['max_words'])
    if endpoint == 'correct':
      return answers.corrections(self.corrector(
          **{name: request[name] for name in DEFAULT_SETTINGS}),
                                 request['texts'])
    sampling = Sampling(**{name: request[name] for name in (
        'length', 'temperature', 'top_k', 'top_p', 'no_unk', 'spell_unk', 'samples',
        'sentences')})
    return answers.samples(model, request['prompt'], sampling, request['seed'],
                           self.typos(request))

  def typos(self, request: dict) -> Corrector | None:
    """/predict's and /generate's reader of typos: /correct's corrector of the default
    settings (nplm serve --misspellings' channel), where the request asks for typos."""
    return self.corrector(**self.correct_defaults) if request['typos'] else None

  def corrector(self, **settings) -> Corrector:
    """The corrector of the default settings, built once (the words' candidates it found
    kept for later requests); other settings (Corrector's), one of their own."""
    if settings != self.correct_defaults:
      return Corrector(self.model, **settings, misspellings=self.misspellings)
    if self._corrector is None:
      self._corrector = Corrector(self.model)
    return self._corrector

  def info(self) -> dict:
    """The run: where, on what, which model, its exact perplexities, and the limits."""
    config = self.model.config
    return {'workdir': paths.shown(config.workdir), 'dataset': config.dataset,
            'vocab_size': self.model.vocab.size, 'model': self.model.name,
            'context_length': self.model.context_length, 'perplexities': self.perplexities,
            'limits': dataclasses.asdict(self.limits)}

  async def run(self, endpoint: str, request: dict) -> dict:
    if self.pending >= self.limits.pending:
      raise RequestError(503, f'{self.pending} requests are waiting for the model, the limit '
                              '(nplm serve --max_pending): retry later')
    self.pending += 1
    try:
      return await asyncio.get_running_loop().run_in_executor(
          self.worker, self.answer, endpoint, request)
    finally:
      self.pending -= 1


def recorded_perplexities(workdir: Path) -> dict[str, float]:
  """The exact perplexities the run recorded, by split: a training run's summary.json, an
  n-gram DIR's ngram.json (each read and checked when the model was)."""
  record = (json.loads((workdir / 'ngram.json').read_text()) if is_ngram_dir(workdir)
            else read_summary(workdir) or {})
  return {split: record[f'{split}_ppl'] for split in ('train', 'valid', 'test')
          if f'{split}_ppl' in record}


def error(status: int, message: str) -> web.Response:
  return web.json_response({'error': message}, status=status)


@web.middleware
async def one_line_errors(request: web.Request, handler):
  """Every refusal and failure as {"error": one line}, never an HTML page or a traceback."""
  try:
    return await handler(request)
  except RequestError as refused:
    return error(refused.status, str(refused))
  except ConfigError as refused:  # What the commands refuse too (nplm.use).
    return error(400, str(refused))
  except web.HTTPRequestEntityTooLarge:
    limit = request.app['service'].limits.body_bytes
    return error(413, f'the body is larger than {limit:,} bytes, the limit (nplm serve '
                      '--max_body_bytes)')
  except web.HTTPNotFound:
    return error(404, f'no {request.method} {request.path}: POST /score, /rank, /predict, '
                      '/complete, /generate or /correct; GET /, /health or /info')
  except web.HTTPMethodNotAllowed as refused:
    return error(405, f'{request.path} takes {", ".join(sorted(refused.allowed_methods))}, '
                      f'not {request.method}')
  except web.HTTPException as refused:
    if refused.status < 400:
      raise
    return error(refused.status, refused.reason)
  except Exception as failure:  # pylint: disable=broad-except
    log.exception('%s %s failed', request.method, request.path)
    return error(500, f'the server failed on this request: {type(failure).__name__}: '
                      f'{failure}'.splitlines()[0])


async def model_request(request: web.Request) -> web.Response:
  service, endpoint = request.app['service'], request.match_info['endpoint']
  if endpoint not in service.fields:
    raise web.HTTPNotFound()
  try:
    body = await asyncio.wait_for(request.read(), service.limits.read_seconds)
  except asyncio.TimeoutError:
    raise RequestError(408, f'the body took more than {service.limits.read_seconds:g} s to '
                            'arrive') from None
  answer = await service.run(endpoint, parsed(body, service.fields[endpoint]))
  return web.json_response(answer)


async def health(_: web.Request) -> web.Response:
  return web.json_response({'status': 'ok'})


async def info(request: web.Request) -> web.Response:
  return web.json_response(request.app['service'].info())


async def no_icon(_: web.Request) -> web.Response:
  return web.Response(status=204)  # A browser asks; the page has none.


async def page(request: web.Request) -> web.FileResponse:
  return web.FileResponse(PAGE / PAGE_FILES[request.path])


def application(service: Service) -> web.Application:
  app = web.Application(client_max_size=service.limits.body_bytes,
                        middlewares=[one_line_errors])
  app['service'] = service
  app.add_routes([web.get('/health', health), web.get('/info', info),
                  web.get('/favicon.ico', no_icon), *(web.get(path, page) for path in PAGE_FILES),
                  web.post('/{endpoint}', model_request)])
  # Requests still queued at the end of the grace period are dropped; the one the model is
  # computing finishes (a thread cannot be stopped) before the process exits.
  app.on_cleanup.append(lambda _: asyncio.to_thread(service.worker.shutdown,
                                                    cancel_futures=True))
  return app


async def serve(service: Service, host: str, port: int, ready) -> None:
  """Serves until SIGTERM or SIGINT; `ready(url)` once listening (port 0: the one given)."""
  runner = web.AppRunner(application(service), access_log=None,
                         shutdown_timeout=SHUTDOWN_SECONDS)
  await runner.setup()
  site = web.TCPSite(runner, host, port)
  await site.start()
  stop = asyncio.Event()
  loop = asyncio.get_running_loop()
  for signum in (signal.SIGTERM, signal.SIGINT):
    loop.add_signal_handler(signum, stop.set)
  bound_host, bound_port = runner.addresses[0][:2]
  ready(f'http://{bound_host if ":" not in bound_host else f"[{bound_host}]"}:{bound_port}/')
  try:
    await stop.wait()
  finally:
    log.info('stopping: finishing the requests in flight')
    await runner.cleanup()
