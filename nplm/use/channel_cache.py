"""A learned spelling channel kept on disk: learning it from codespell's 68,800 pairs takes
seconds at every start of nplm correct, complete or serve; reading it back, a fraction of one.

One file per list and alphabet, $NPLM_CACHE_DIR/channels/<key>.json (nplm.paths.cache_dir),
the key the SHA-256 of what the rates depend on: the pairs in order, the alphabet, and the
source of the learning (learned_channel.py, spelling_channel.py), so that a change to either
learns anew. The file holds the SHA-256 of its content: a damaged one is said, learned again
and rewritten, never used. Written whole or not at all (nplm.files); a cache that cannot be
written is said, and the run goes on.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from nplm import paths
from nplm.files import write_json_atomically

SOURCES = ('learned_channel.py', 'spelling_channel.py')

log = logging.getLogger(__name__)


def key_of(pairs: Sequence[tuple[str, str]], alphabet: str, settings: dict) -> str:
  """The SHA-256 of the pairs, the alphabet, the learning's `settings` and its source."""
  digest = hashlib.sha256(json.dumps([list(pairs), alphabet, settings]).encode())
  for name in SOURCES:
    digest.update(Path(__file__).with_name(name).read_bytes())
  return digest.hexdigest()


def path_of(key: str) -> Path:
  return paths.cache_dir() / 'channels' / f'{key}.json'


def _digest(content) -> str:
  return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def read(key: str) -> dict | None:
  """The content kept under `key`; None where there is none, or it is damaged (said)."""
  path = path_of(key)
  try:
    kept = json.loads(path.read_text(encoding='utf-8'))
  except FileNotFoundError:
    return None
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
    log.warning('the cached channel %s cannot be read (%s): learning it again', path, error)
    return None
  if not isinstance(kept, dict) or kept.get('sha256') != _digest(kept.get('content')):
    log.warning('the cached channel %s is damaged (its SHA-256 does not match): learning it '
                'again', path)
    return None
  return kept['content']


def write(key: str, content: dict) -> None:
  """Keeps `content` under `key`, whole or not at all; a failure is said, not raised."""
  path = path_of(key)
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomically(path, {'sha256': _digest(content), 'content': content})
  except OSError as error:
    log.warning('the learned channel is not kept in %s (%s): it is learned again at the '
                'next start', path.parent, error.strerror or error)
