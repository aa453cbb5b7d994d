"""nplm from Python: `nplm.train(...)` a model, `nplm.load(workdir)` one to use.

  import nplm
  summary = nplm.train(['--flagfile=mlp1', '--workdir=runs/mlp1', '--epochs=1'])
  model = nplm.load('runs/mlp1')
  model.perplexity('The jury said it did not know .')
  model.score('The jury said it did not know .').log_prob   # A list of sentences: a list.
  model.rank(['about 15 minutes from', 'about 15 minuets from'])[0].text
  model.predict('the jury said', k=5)
  model.complete('the jury said', k=5, max_words=2)[0].text

Every method is the function the command of the same name calls (nplm.cli), so the
numbers are the commands' numbers: one path from Python and from the shell.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from nplm import display, flagfiles, host_memory
from nplm.config import Config, ConfigError, config_class
from nplm.data.lines import read_lines
from nplm.use import (completion, correction, embeddings, evaluation, generation,
                      misspelling_lists, prediction, sentences)
from nplm.use.trained import load_trained

__all__ = ['Config', 'Model', 'load', 'train']


def train(config_or_flags: Config | Sequence[Config] | dict | Sequence[str] | str,
          quiet: bool = False):
  """Trains (or resumes) a run and returns its summary, as `nplm train` does, with its
  start-up and progress lines unless `quiet`. Takes a Config, a list of Configs (trained
  together, one summary each), a dict of knobs, or the command's flags: a list such as
  ['--flagfile=mlp9', '--workdir=runs/mlp9'] or one string of them."""
  from nplm import trainer  # Imports JAX and Flax: only when a run is trained.
  host_memory.keep_freed_blocks()  # Before the run's first computation (nplm.host_memory).
  configs = _configs(config_or_flags)
  with _progress_lines(quiet):
    return trainer.run(configs)


def _configs(given) -> Config | list[Config]:
  if isinstance(given, Config):
    return given
  if isinstance(given, dict):
    config = config_class(*(given.get(name, '') for name in ('model', 'head', 'dataset')))
    refuse_unknown(given, config, 'setting', '`nplm train --help` lists the settings')
    return config(**given)
  if isinstance(given, str):
    given = given.split()
  if isinstance(given, (list, tuple)) and given and all(isinstance(c, Config) for c in given):
    return list(given)
  if not (isinstance(given, (list, tuple))
          and all(isinstance(flag, str) and flag.startswith('-') for flag in given)):
    raise ConfigError('nplm.train takes a Config, a list of Configs, a dict of knobs or '
                      "flags such as ['--flagfile=mlp9', '--workdir=runs/mlp9']")
  return flagfiles.config_from_flags(given)


def refuse_unknown(given: dict, fields_of, what: str, listed_in: str = '') -> None:
  """A ConfigError naming the first key of `given` that is no field of the dataclass
  `fields_of`, with the nearest field: a typo in a dict or a keyword argument is then a
  one-line user error, as a mistyped flag is, not Python's bare TypeError."""
  known = [field.name for field in dataclasses.fields(fields_of)]
  for key in given:
    if key not in known:
      close = difflib.get_close_matches(str(key), known, n=1)
      guess = (f"; did you mean '{close[0]}'?" if close
               else f' ({listed_in or "known: " + ", ".join(known)})')
      raise ConfigError(f'unknown {what} {key!r}{guess}')


@contextlib.contextmanager
def _progress_lines(quiet: bool):
  logger = logging.getLogger('nplm')
  if not quiet:
    display.show_progress_lines()
    yield
    return
  level = logger.level
  logger.setLevel(logging.WARNING)
  try:
    yield
  finally:
    logger.setLevel(level)


def load(workdir: str | os.PathLike) -> Model:
  """The model a run (nplm train) or an n-gram fit (nplm ngram --out) left in `workdir`."""
  return Model(load_trained(workdir))


@dataclasses.dataclass(frozen=True)
class Model:
  """A trained language model (or word2vec model, for its vectors) read from its workdir.

  `read` is what the commands read (nplm.use.trained.TrainedModel, or an n-gram model):
  its config, vocabulary and tokenizer are there."""
  read: object

  @property
  def config(self) -> Config:
    return self.read.config

  @property
  def vocab(self):
    return self.read.vocab

  def perplexity(self, text_or_path: str | os.PathLike | Sequence[str | os.PathLike],
                 open_vocabulary: bool = False) -> float | list[float]:
    """The exact perplexity of a text (a string: one sentence per line) or of a text file
    (a Path, or a string naming an existing file), tokenized as the model's dataset was,
    every token once (`nplm evaluate --text_file`). One text or file gives one number; a
    list of them, a list of numbers, each text's own. Closed: an unknown word costs
    p(<unk> | h), the figure summaries report; `open_vocabulary`: p(<unk> | h) · q(word),
    its spelling paid for too (nplm.ngram.spelling; the closed figure where the model has
    no spelling model)."""
    if isinstance(text_or_path, (list, tuple)):  # Not a str, nor a Path.
      return [self._perplexity(one, open_vocabulary) for one in text_or_path]
    return self._perplexity(text_or_path, open_vocabulary)

  def _perplexity(self, text_or_path: str | os.PathLike, open_vocabulary: bool) -> float:
    if not isinstance(text_or_path, (str, os.PathLike)):
      raise ConfigError('perplexity takes a text, a path, or a list of them, not '
                        f'{type(text_or_path).__name__}')
    path = Path(text_or_path) if isinstance(text_or_path, os.PathLike) else None
    if path is None and '\n' not in text_or_path and os.path.isfile(text_or_path):
      path = Path(text_or_path)
    lines = read_lines(path) if path is not None else text_or_path.splitlines()
    types, splits = evaluation.file_types(lines, self.read)
    if not len(splits['file']):
      raise ConfigError(f'{path or "the text"} is empty: no text to score')
    result = evaluation.evaluate(self.read, types, splits)['file']
    return result.get('open_ppl', result['ppl']) if open_vocabulary else result['ppl']

  def score(self, sentences_: str | Sequence[str]
            ) -> sentences.SentenceScore | list[sentences.SentenceScore]:
    """A sentence's log-probability, token by token (`nplm score`): one sentence (a string)
    gives its SentenceScore, a list of sentences a list of them, in order."""
    scores = sentences.score_sentences(self.read, _listed(sentences_))
    return scores[0] if isinstance(sentences_, str) else scores

  def rank(self, sentences_: Sequence[str]) -> list[sentences.SentenceScore]:
    """The sentences' scores, the most probable first (`nplm rank`): a list of alternative
    sentences in, a list out. One string ranks nothing (a ConfigError): score it instead."""
    if isinstance(sentences_, str):
      raise ConfigError('rank orders alternatives: give a list of sentences, not one string '
                        '(model.score gives the score of one)')
    return sentences.rank_sentences(self.read, _listed(sentences_))

  def predict(self, prefix: str | Sequence[str] = '', k: int = 10, typos: bool = False,
              alpha: float | None = None, second_edit: float = correction.SECOND_EDIT,
              misspellings: str | os.PathLike | Sequence[tuple[str, str]] = ()
              ) -> list[prediction.Prediction] | list[list[prediction.Prediction]]:
    """The k most probable next tokens after `prefix`, with exact probabilities
    (`nplm predict`): a list of k Predictions for one prefix (a string), a list of such
    lists for a list of prefixes. `typos`: after the prefix with its misspelt words
    corrected, and a misspelt word being typed read as `complete` reads it (each
    Prediction's channel_log_prob), through the channel of `alpha`, `second_edit` and
    `misspellings` (`correct`'s)."""
    corrector = self._typo_corrector(typos, alpha, second_edit, misspellings)
    if isinstance(prefix, str):
      return prediction.predict(self.read, prefix, k, corrector)
    return [prediction.predict(self.read, one, k, corrector) for one in _listed(prefix)]

  def complete(self, prefix: str | Sequence[str] = '', k: int = 10,
               max_words: int = completion.DEFAULT_MAX_WORDS, typos: bool = True,
               alpha: float | None = None, second_edit: float = correction.SECOND_EDIT,
               misspellings: str | os.PathLike | Sequence[tuple[str, str]] = ()
               ) -> list[completion.Completion] | list[list[completion.Completion]]:
    """The k most probable continuations of `prefix`, of up to max_words words each, with
    exact probabilities (`nplm complete`): a list of Completions for one prefix (a string),
    a list of such lists for a list of prefixes. `typos`: a word being typed may be
    misspelt, read through the channel of `alpha`, `second_edit` and `misspellings`
    (`correct`'s)."""
    completer = completion.Completer(self.read, typos, alpha, second_edit, _pairs(misspellings))
    if isinstance(prefix, str):
      return completer.complete(prefix, k, max_words)
    return [completer.complete(one, k, max_words) for one in _listed(prefix)]

  def correct(self, sentences_: str | Sequence[str], alpha: float | None = None,
              max_changes: int = correction.MAX_CHANGES,
              second_edit: float = correction.SECOND_EDIT,
              misspellings: str | os.PathLike | Sequence[tuple[str, str]] = ()
              ) -> correction.Correction | list[correction.Correction]:
    """Each sentence with its misspelt words corrected (`nplm correct`; `.corrected` its
    text, `.changes` what changed): one Correction for a string, a list for a list.
    `misspellings`: (typed, meant) pairs, or a file of them (`--misspellings`), to learn
    the channel's edits from; `alpha` None: 0.99, 0.999 with them (`nplm correct`'s)."""
    corrector = correction.Corrector(self.read, alpha, max_changes, second_edit,
                                     _pairs(misspellings))
    corrected = [corrector.correct(one) for one in _listed(sentences_)]
    return corrected[0] if isinstance(sentences_, str) else corrected

  def generate(self, prompt: str = '', seed: int = 0, typos: bool = False,
               alpha: float | None = None, second_edit: float = correction.SECOND_EDIT,
               misspellings: str | os.PathLike | Sequence[tuple[str, str]] = (),
               **sampling) -> str | list[str]:
    """Text continuing `prompt` (`nplm generate`); `sampling`: the fields of
    nplm.use.generation.Sampling (length, sentences, temperature, top_k, top_p, no_unk,
    spell_unk, samples). One text, or a list when samples > 1. `typos`: continuing the
    prompt with its misspelt words corrected, as `predict` reads them."""
    refuse_unknown(sampling, generation.Sampling, 'sampling setting')
    corrector = self._typo_corrector(typos, alpha, second_edit, misspellings)
    texts = generation.generate_text(self.read, prompt, generation.Sampling(**sampling), seed,
                                     corrector)
    return texts[0] if len(texts) == 1 else texts

  def _typo_corrector(self, typos: bool, alpha: float | None, second_edit: float,
                      misspellings: str | os.PathLike | Sequence[tuple[str, str]]
                      ) -> correction.Corrector | None:
    """predict's and generate's reader of typos (`correct`'s channel), None without them."""
    if not typos:
      return None
    return correction.Corrector(self.read, alpha, correction.MAX_CHANGES, second_edit,
                                _pairs(misspellings))

  def vectors(self):
    """The word feature vectors C as gensim KeyedVectors (most_similar, similarity, …)."""
    return embeddings.keyed_vectors(self.read)


def _pairs(misspellings: str | os.PathLike | Sequence[tuple[str, str]]
           ) -> Sequence[tuple[str, str]]:
  """(typed, meant) pairs as given, or read from a file of them (`--misspellings`)."""
  if isinstance(misspellings, (str, os.PathLike)):
    return misspelling_lists.read_pairs(os.fspath(misspellings))
  return misspellings


def _listed(sentences_: str | Sequence[str]) -> list[str]:
  """One string as a list of one; a list of strings as it is; anything else a ConfigError
  (a bare TypeError deep in the tokenizer would not say what was wrong)."""
  if isinstance(sentences_, str):
    return [sentences_]
  listed = list(sentences_) if isinstance(sentences_, Iterable) else None
  if listed is None or not all(isinstance(s, str) for s in listed):
    raise ConfigError('give a string, or a list of strings, not '
                      f'{type(sentences_).__name__}')
  return listed
