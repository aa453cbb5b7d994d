"""A trained model read back from its workdir, and the exact log-probability of each token.

Mixtures and analyses need per-token log-probabilities rather than the sums that training
evaluates; they come from the head's exact, normalized `log_prob`, whatever head trained it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from nplm import parallel, stream_training
from nplm.checkpoint import read_identity, saved_params
from nplm.config import Config
from nplm.data import batching, datasets
from nplm.data.vocab import Vocabulary
from nplm.lm import LanguageModel, build_language_model


class NoTrainedModelError(FileNotFoundError):
  """The workdir holds no finished training run to read a model from."""


@dataclasses.dataclass(frozen=True, eq=False)
class TrainedModel:
  config: Config
  vocab: Vocabulary
  lm: LanguageModel
  params: dict

  @property
  def boundary_id(self) -> int:
    """The token before a split's first: its dataset's (</text> for Brown, else <eos>)."""
    return self.vocab.id_of(datasets.boundary_token(self.config.dataset))

  def split_log_probs(self, ids: np.ndarray, batch_size: int | None = None) -> np.ndarray:
    """log p(w_t | its context) for every token of a split, in order (float64): the n-1
    previous words for a feed-forward model, every earlier word of the split for a
    recurrent one (one stream, `batch_size` words per segment)."""
    order, boundary = self.config.order, self.boundary_id
    batch_size = batch_size or self.config.eval_batch_size
    if self.lm.model.recurrent:
      return stream_training.split_log_probs(self.lm, self.params, ids, boundary, batch_size)
    padded = jnp.asarray(batching.pad_split(np.asarray(ids), order, boundary))

    @jax.jit
    def batch_log_probs(params, positions):
      context, targets = batching.windows(padded, positions, order)
      return self.lm.apply(self.lm.variables_of(params), context, targets,
                           method=self.lm.log_prob)

    pieces = [np.asarray(batch_log_probs(self.params, positions))[mask > 0]
              for positions, mask in batching.eval_batches(len(ids), batch_size)]
    return np.concatenate(pieces).astype(np.float64)


def load_trained(workdir: str | Path) -> TrainedModel:
  """The model of a run's workdir with the parameters its summary reports: the best on
  validation, or the latest where no epoch has finished (a run cut short by --max_steps)."""
  workdir = Path(workdir)
  identity, vocab_path = read_identity(workdir), workdir / 'vocab.txt'
  if identity is None or not vocab_path.exists():
    raise NoTrainedModelError(f'{workdir} holds no training run (no run.json or vocab.txt); '
                              'train one there first')
  config = Config.from_saved(identity['config'])
  vocab = Vocabulary.load(vocab_path)
  if vocab.fingerprint() != identity['vocab_fingerprint']:
    raise NoTrainedModelError(f'{vocab_path} does not match the vocabulary recorded in '
                              f'{workdir / "run.json"}; the workdir was altered')
  params = saved_params(workdir)
  if params is None:
    raise NoTrainedModelError(f'{workdir} has no checkpoint yet; let training save one')
  # A vocabulary-parallel run saved its output rows padded; read here on one device.
  params = parallel.unpadded_output_rows(params, vocab.size)
  return TrainedModel(config, vocab, build_language_model(config, vocab.counts), params)
