"""Contiguous streams for recurrent models: a split cut into B streams of T-word segments.

Truncated BPTT reads the training split as B parallel streams, each a contiguous stretch of
the text; update s reads segment s of every stream, [B, T] words, and the state after it
starts segment s+1. Word t of a split is predicted from the words before it, starting from
the text-boundary token, as the feed-forward models' first window is: inputs are the split
shifted right by one behind a `</text>`, targets the split itself. Every target appears
exactly once; the grid's tail beyond the split is padding, masked out.
"""

import numpy as np


def num_segments(num_tokens: int, num_streams: int, segment_length: int) -> int:
  stream_length = -(-num_tokens // num_streams)
  return -(-stream_length // segment_length)


def streams(ids: np.ndarray, num_streams: int, segment_length: int, boundary_id: int):
  """(words, targets, mask), each [B, S·T]: stream b holds tokens b·L … (b+1)·L - 1 of the
  split, L = ⌈N / B⌉, with words[b, j] the token before targets[b, j]."""
  ids = np.asarray(ids, np.int32)
  inputs = np.concatenate([[boundary_id], ids[:-1]]).astype(np.int32)
  stream_length = -(-len(ids) // num_streams)
  width = num_segments(len(ids), num_streams, segment_length) * segment_length

  def grid(values: np.ndarray, dtype) -> np.ndarray:
    flat = np.zeros(num_streams * stream_length, dtype)
    flat[:len(values)] = values
    out = np.zeros((num_streams, width), dtype)
    out[:, :stream_length] = flat.reshape(num_streams, stream_length)
    return out

  return (grid(inputs, np.int32), grid(ids, np.int32),
          grid(np.ones(len(ids), np.float32), np.float32))
