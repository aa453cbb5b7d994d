"""The learned feature vectors C(w): nearest words by cosine similarity, and a 2-D picture.

C is the model's input embedding (the paper's shared matrix of word features, [|V|, m]);
feed-forward and recurrent models alike keep it at params['model']['C']['embedding']. Words
used alike get alike vectors (the paper's section 1: "similar" words nearby), so a word's
nearest neighbours show what the model learned about it. Cosine similarity compares
directions only: a vector's length mostly tracks the word's frequency, not its use.
Analogies are answered as word2vec and gensim answer them: king - man + woman, 3CosAdd over
unit vectors, the query words excluded [Mikolov et al. 2013a, section 4.1].
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from nplm import paths
from nplm.data.vocab import SPECIAL_TOKENS, UNK, Vocabulary
from nplm.errors import ConfigError
from nplm.files import save_figure_atomically
from nplm.use.spelling_channel import near_words
from nplm.use.trained import TrainedModel


def feature_vectors(trained: TrainedModel) -> np.ndarray:
  """C, [|V|, m], in float64 so that a word's similarity to itself is 1 to ~1e-15."""
  params = getattr(trained, 'params', None)  # An n-gram run counts words; it has no C.
  if params is None:
    raise ConfigError(f'{paths.shown(trained.config.workdir)} is a count model, not a '
                      'network: it has no word vectors; name the workdir of a trained network')
  return np.asarray(params['model']['C']['embedding'], np.float64)


def known_and_unknown(vocab: Vocabulary, words: Sequence[str]) -> tuple[list[str], list[str]]:
  """The words with a vector of their own, and those without (read as `<unk>`), in order."""
  known = [w for w in words if w == UNK or vocab.id_of(w) != vocab.unk_id]
  return known, [w for w in words if w not in known]


def as_read(trained, word: str) -> str:
  """A typed query word as the model reads typed text: the word itself where the vocabulary
  holds it, else the one token the model's tokenizer makes of it (a --lowercase model reads
  'Paris' as 'paris', as score and predict do; a subword model 'the' as '▁the'), else the
  word as typed, which then has no vector of its own."""
  vocab = trained.vocab
  if word == UNK or vocab.id_of(word) != vocab.unk_id:
    return word
  tokens = trained.tokenizer.tokens(word)
  return tokens[0] if len(tokens) == 1 else word


def with_suggestion(vocab: Vocabulary, word: str) -> str:
  """A word outside the vocabulary as an error names it: with the vocabulary's word one
  edit of a letter from it (else two, for a word of seven characters or more) that training
  saw most, "presidnet (did you mean president?)", where there is one. A word of one or
  two characters gets none: an edit is most of it."""
  if len(word) < 3:
    return word
  words = [w for w in vocab.words if w not in SPECIAL_TOKENS]
  near = near_words(word, words, 1) or (near_words(word, words, 2) if len(word) >= 7 else ())
  if not near:
    return word
  return f'{word} (did you mean {max(near, key=lambda w: vocab.counts[vocab.id_of(w)])}?)'


def ids_of(vocab: Vocabulary, words: Sequence[str]) -> list[int]:
  """The words' ids; a word outside the vocabulary has no vector of its own (it was read as
  `<unk>`), so it is an error that names it."""
  _, unknown = known_and_unknown(vocab, words)
  if unknown:
    raise ConfigError(f'not in the vocabulary (|V| = {vocab.size}): '
                      f'{", ".join(with_suggestion(vocab, w) for w in unknown)}')
  return [vocab.id_of(w) for w in words]


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
  norms = np.linalg.norm(vectors, axis=1, keepdims=True)
  return vectors / np.maximum(norms, np.finfo(vectors.dtype).tiny)


def nearest(vectors: np.ndarray, vocab: Vocabulary, word: str, k: int) -> list[tuple[str, float]]:
  """The k words most cosine-similar to `word`, most similar first: the word itself, with
  similarity 1 (first even where another word points the very same way), then k-1 others."""
  if k < 1:
    raise ConfigError(f'--k must be at least 1, not {k}')
  (word_id,) = ids_of(vocab, [word])
  unit = _unit_rows(vectors)
  similarity = unit @ unit[word_id]  # cos(C(w), C(v)) for every v
  others = [i for i in np.argsort(-similarity, kind='stable').tolist() if i != word_id]
  chosen = [word_id] + others[:k - 1]
  return [(vocab.words[i], float(similarity[i])) for i in chosen]


def analogy(vectors: np.ndarray, vocab: Vocabulary, positive: str, negative: str,
            added: str, k: int) -> list[tuple[str, float]]:
  """The k words nearest by cosine to positive - negative + added, computed on unit vectors
  (3CosAdd: king - man + woman ≈ queen), the three query words excluded, as gensim's
  `most_similar(positive=[positive, added], negative=[negative])` and word2vec's
  compute-accuracy answer it [Mikolov et al. 2013a, section 4.1]."""
  if k < 1:
    raise ConfigError(f'--k must be at least 1, not {k}')
  ids = ids_of(vocab, [positive, negative, added])
  unit = _unit_rows(vectors)
  target = unit[ids[0]] - unit[ids[1]] + unit[ids[2]]
  similarity = unit @ (target / max(np.linalg.norm(target), np.finfo(target.dtype).tiny))
  ranked = [i for i in np.argsort(-similarity, kind='stable').tolist() if i not in ids]
  return [(vocab.words[i], float(similarity[i])) for i in ranked[:k]]


def projection(vectors: np.ndarray) -> np.ndarray:
  """2-D coordinates [N, 2] of N vectors: their unit directions (the geometry cosine
  similarity sees) projected on the two principal axes, by SVD of the centred rows.

  PCA rather than t-SNE or UMAP: it is linear and deterministic, the least-squares best 2-D
  view, so distances in the picture are a faithful (if compressed) shadow of the real ones,
  and it needs no more words than the few chosen.
  """
  centred = _unit_rows(vectors)
  centred = centred - centred.mean(axis=0)
  u, s, _ = np.linalg.svd(centred, full_matrices=False)
  coordinates = u[:, :2] * s[:2]
  return np.pad(coordinates, ((0, 0), (0, 2 - coordinates.shape[1])))  # m = 1: a line.


def plot_words(vectors: np.ndarray, vocab: Vocabulary, words: Sequence[str],
               path: str | os.PathLike, queries: Sequence[str] = ()) -> None:
  """The words' projection, each point labelled (labels pushed apart), the `queries` drawn
  larger and in bold; saved as a PNG whole or not at all."""
  if len(words) < 2:
    raise ConfigError(f'a projection needs at least 2 words to plot, not {len(words)}')
  if not Path(path).parent.is_dir():
    raise ConfigError(f'no directory {Path(path).parent} to save the plot in')
  points = projection(vectors[ids_of(vocab, words)])
  from adjustText import adjust_text
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure  # Only plotting pays for matplotlib; no pyplot state.
  figure = Figure(figsize=(8, 7), layout='constrained')
  FigureCanvasAgg(figure)  # adjust_text measures the labels with the canvas's renderer.
  axes = figure.add_subplot()
  is_query = np.array([word in queries for word in words])
  axes.scatter(*points[~is_query].T, s=14, color='tab:blue', label='neighbour')
  if is_query.any():
    axes.scatter(*points[is_query].T, s=90, marker='*', color='tab:red', label='query word')
    axes.legend(fontsize=9, loc='best')
  labels = [axes.text(x, y, word, fontsize=10 if query else 8,
                      fontweight='bold' if query else 'normal',
                      color='tab:red' if query else 'black')
            for word, (x, y), query in zip(words, points, is_query)]
  adjust_text(labels, ax=axes, arrowprops={'arrowstyle': '-', 'color': '0.6', 'lw': 0.5})
  axes.set_title('Feature vectors C(w): first two principal axes of their directions')
  axes.set_xlabel('PC 1')
  axes.set_ylabel('PC 2')
  save_figure_atomically(figure, path)
