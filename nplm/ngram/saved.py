"""A fitted n-gram model as one .npz file: the arrays that define it, written whole or not at
all, and its SHA-256, which the caller records elsewhere (ngram.json) so that a damaged file
is refused, never silently read.

Kneser-Ney keeps its table (n-gram codes and counts) and discounts, from which its adjusted
counts and per-context sums follow; the interpolated trigram its table and its EM weights
per bin. Only
numeric arrays are stored (`allow_pickle=False` reads them back).
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import numpy as np

from nplm.ngram import mixture
from nplm.ngram.interpolated import InterpolatedTrigram
from nplm.ngram.kneser_ney import KneserNey
from nplm.ngram.table import NgramTable
from nplm.files import write_bytes_atomically

KINDS = {'kn': KneserNey, 'delint': InterpolatedTrigram}


class DamagedModelError(ValueError):
  """The saved file is not the one recorded (its checksum differs) or cannot be read."""


def kind_of(model) -> str:
  return next(kind for kind, cls in KINDS.items() if isinstance(model, cls))


def save(model, path: str | os.PathLike) -> str:
  """Writes `model` to `path` atomically; returns the file's SHA-256 (hex)."""
  arrays = _table_arrays(model.table) | {'boundary_id': np.int64(model.boundary_id)}
  if isinstance(model, KneserNey):  # Its counts and sums follow from the table.
    arrays |= {'discounts': np.array(model.discounts, np.float64),
               'fallback_orders': np.array(model.fallback_orders, np.int64)}
  else:
    fitted = model.fitted
    arrays |= {'num_bins': np.int64(model.num_bins), 'weights': fitted.weights,
               'log_likelihoods': np.array(fitted.log_likelihoods, np.float64),
               'tokens_per_bin': fitted.tokens_per_bin}
  buffer = io.BytesIO()
  np.savez_compressed(buffer, **arrays)
  data = buffer.getvalue()
  write_bytes_atomically(Path(path), data)
  return hashlib.sha256(data).hexdigest()


def load(path: str | os.PathLike, kind: str, sha256: str):
  """The model saved at `path`, a DamagedModelError if its checksum is not `sha256`."""
  data = Path(path).read_bytes()
  if hashlib.sha256(data).hexdigest() != sha256:
    raise DamagedModelError(f'{Path(path).name}: its checksum differs from the one recorded')
  try:
    with np.load(io.BytesIO(data), allow_pickle=False) as stored:
      arrays = dict(stored)
    return _model(kind, arrays)
  except (ValueError, KeyError, OSError) as error:  # Recorded checksum, wrong contents.
    raise DamagedModelError(f'{Path(path).name}: unreadable ({error})') from None


def _model(kind: str, arrays: dict):
  order = int(arrays['order'])
  table = NgramTable(order, int(arrays['vocab_size']),
                     tuple(arrays[f'keys_{k}'] for k in range(1, order + 1)),
                     tuple(arrays[f'counts_{k}'] for k in range(1, order + 1)))
  boundary = int(arrays['boundary_id'])
  if kind == 'kn':
    return KneserNey.from_table(table, boundary, arrays['discounts'].tolist(),
                                arrays['fallback_orders'].tolist())
  fitted = mixture.FittedWeights(arrays['weights'], tuple(arrays['log_likelihoods'].tolist()),
                                 arrays['tokens_per_bin'])
  return InterpolatedTrigram(table, boundary, int(arrays['num_bins']), fitted)


def _table_arrays(table: NgramTable) -> dict[str, np.ndarray]:
  arrays = {'order': np.int64(table.order), 'vocab_size': np.int64(table.vocab_size)}
  for k in range(1, table.order + 1):
    arrays |= {f'keys_{k}': table.keys[k - 1], f'counts_{k}': table.counts[k - 1]}
  return arrays


