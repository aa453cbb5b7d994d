"""A trained model (or an n-gram model: anything nplm.use.trained.load_trained reads) on
other text: any dataset's splits, or a text file, read through the
model's own vocabulary and tokenization, scored exactly (every token once, the head's
normalized log_prob), with what fell to `<unk>` counted.

A run is read against its own data unless told otherwise: `own_dataset_types` reads the
dataset its run.json records (at its absolute location) and refuses, in one line, data
that is not what the run was trained on (the data fingerprint differs: the files were
edited) or that is no longer there (moved). Other data is named explicitly (`nplm evaluate
--dataset=...`), and `same_data` says whether it is the run's own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from nplm import paths
from nplm.config import Config, ConfigError
from nplm.data import corpus as corpus_lib
from nplm.data.acquire import CorpusNotFoundError
from nplm.data.sources import source_of
from nplm.data.lines import words_of_line
from nplm.data.tokenizers import Tokenization
from nplm.data.typed_text import file_tokens
from nplm.data.vocab import Vocabulary
from nplm.perplexity import perplexity
from nplm.use.ngram_run import NgramRun
from nplm.use.open_vocabulary import unknown_counts
from nplm.use.trained import TrainedModel
from nplm.run_files.summary import bits_per_token
from nplm.data.config_checks import settled_data

Model = TrainedModel | NgramRun  # What nplm.use.trained.load_trained reads.


def dataset_types(config: Config, tokenizer_model: bytes | None = None
                  ) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
  """(every type, each split as type indices) of the dataset `config` names, before any
  vocabulary cut: what another model's vocabulary then maps (cut by that model's learned
  tokenizer, `tokenizer_model`, if it has one)."""
  config = settled_data(config)
  return source_of(config.dataset).types_and_splits(config, tokenizer_model)


def data_fingerprint(vocab: Vocabulary, types, splits: dict[str, np.ndarray]) -> str:
  """The fingerprint a run records of its data (nplm.data.corpus.Corpus.fingerprint: the
  vocabulary and every split's ids), of these splits read through `vocab`: equal to the
  recorded one exactly when the model sees the ids it was trained and validated on."""
  remap = vocab.encode(types)
  ids = {name: remap[splits[name]] for name in corpus_lib.SPLITS}
  return corpus_lib.Corpus(vocab, ids, stats={}, train_types=0, boundary_id=0).fingerprint


def same_data(trained: Model, types, splits: dict[str, np.ndarray]) -> bool | None:
  """Whether a dataset's splits are the data `trained` was trained on (None: its run
  recorded no fingerprint, an older nplm's)."""
  if trained.data_fingerprint is None:
    return None
  return data_fingerprint(trained.vocab, types, splits) == trained.data_fingerprint


def own_dataset_types(trained: Model, data_dir: str = ''):
  """(types, splits) of the dataset the run of `trained` records, read at its recorded
  (absolute) location, the prepared copy in `data_dir` if given; a ConfigError if it is not
  there or no longer holds the data the run was trained on."""
  config = trained.config.resolved()
  if data_dir:
    config = config.replace(data_dir=paths.absolute(data_dir))
  workdir, dataset = paths.shown(trained.config.workdir), paths.shown_dataset(config.dataset)
  try:
    types, splits = dataset_types(config)
  except CorpusNotFoundError as error:
    moved = ('--dataset=text:NEW_PATH' if config.dataset.startswith('text:')
             else '--data_dir=NEW_DIR (--corpus_dir too for brown)')
    raise ConfigError(f'{workdir} was trained on --dataset={dataset}, which cannot be '
                      f'read now ({error}); if it moved, say where: {moved}') from None
  if same_data(trained, types, splits) is False:
    raise ConfigError(
        f'--dataset={dataset} holds other data than {workdir} was trained on (its '
        'fingerprint differs from the one its workdir recorded: the files changed since); to score '
        f'what it holds now, name it: --dataset={dataset}')
  return types, splits


def file_types(lines: Iterable[str], trained: Model):
  """A text file as one split 'file', tokenized as the dataset of `trained` was (by its
  tokenizer: a learned one is read from its workdir)."""
  return corpus_lib.index_types(
      {'file': file_tokens(lines, trained.config.dataset, trained.tokenizer)})


def file_words(lines: Iterable[str]) -> int:
  """What a per-word perplexity divides by: the words_of_line of every line, as preparation
  counts a split's."""
  return sum(map(words_of_line, lines))


def unknown_words(counts: dict[str, int], top: int) -> list:
  """The `top` most frequent (word, count) of unknown_counts'."""
  return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:top]


def evaluate(trained: Model, types, splits: dict[str, np.ndarray], top_unknown: int = 10,
             words: dict[str, int] | None = None) -> dict[str, dict]:
  """Per split: tokens, exact perplexity (bits per token for a character model), <unk> rate
  and the most frequent words that fell to <unk>; the open vocabulary's perplexity
  (`open_ppl`, each unknown word spelt: nplm.ngram.spelling) and the share of its NLL that
  spelling costs (`spelling_share`) where the model has a spelling model; the perplexity per
  word too (open) for a split whose `words` (file_words) are given, where the model's tokens
  are not whitespace words and its text's lines end with a sentence end (not Brown's
  paragraphs and texts)."""
  per_word = (words or {}) if (trained.sentence_end is not None and
                               not Tokenization.of(trained.config).whitespace_words) else {}
  remap = trained.vocab.encode(types)
  results = {}
  for name, type_ids in splits.items():
    if not len(type_ids):
      raise ConfigError(f'{name}: holds no tokens, nothing to score')
    ids = remap[type_ids]
    nll = -math.fsum(trained.split_log_probs(ids).tolist())
    unknown = unknown_counts(types, type_ids, trained.vocab)
    result = {**perplexity(nll, len(ids)),
              'unk_rate': float(np.mean(ids == trained.vocab.unk_id)),
              'unknown_words': unknown_words(unknown, top_unknown)}
    open_nll = nll
    if trained.spelling is not None:
      spelling_nll = trained.spelling.cost(unknown)
      open_nll = nll + spelling_nll
      result |= {'open_ppl': perplexity(open_nll, len(ids))['ppl'],
                 'spelling_nll': spelling_nll,
                 'spelling_share': spelling_nll / open_nll if open_nll else 0.0}
    if trained.config.tokens == 'chars':
      result['bpc'] = bits_per_token(result)
    if name in per_word:
      result['word_ppl'] = perplexity(open_nll, per_word[name])['ppl']
    results[name] = result
  return results
