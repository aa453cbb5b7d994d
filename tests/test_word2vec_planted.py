"""Every word2vec variant learns a similarity planted in a tiny corpus: words that occur in
the same contexts end up with nearly parallel vectors, nearer each other than words that never
share a context."""

import numpy as np
import pytest

from nplm.config import Config
from nplm.data.corpus import corpus_from_tokens
from nplm.trainer import run
from nplm.use import embeddings

pytestmark = pytest.mark.slow

# Two families of interchangeable words, each with its own context words: 'cat' and 'dog'
# are only ever seen between pet-context words, 'car' and 'bus' between road-context words.
FAMILIES = {('cat', 'dog'): ('feed', 'pet', 'groom', 'walk'),
            ('car', 'bus'): ('drive', 'park', 'fuel', 'wash')}


def planted_tokens(sentences: int, rng: np.random.Generator) -> list[str]:
  """Sentences 'context word context' (a family's word between two of its context words),
  families and words drawn at random."""
  tokens = []
  for _ in range(sentences):
    words, contexts = list(FAMILIES.items())[rng.integers(len(FAMILIES))]
    tokens += [contexts[rng.integers(4)], words[rng.integers(2)], contexts[rng.integers(4)]]
  return tokens


def cosine(vectors, a: str, b: str) -> float:
  u, v = vectors[a], vectors[b]
  return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


@pytest.fixture(scope='module')
def planted_corpus():
  rng = np.random.default_rng(0)
  splits = {'train': planted_tokens(1500, rng), 'valid': planted_tokens(30, rng),
            'test': planted_tokens(30, rng)}
  return corpus_from_tokens(splits, unk_max_count=0, max_vocab_size=0, reserved=('<unk>',),
                            boundary='feed')


@pytest.mark.parametrize('model', ['cbow', 'skipgram'])
@pytest.mark.parametrize('head', ['negative_sampling', 'tree'])
def test_every_variant_learns_the_planted_similarity(model, head, planted_corpus, tmp_path):
  """word2vec's own rates (0.05 for CBOW, 0.025 per pair for skip-gram) and window; the words
  of one family end up nearer each other than any word of the other family."""
  sampled = dict(num_samples=5, proposal_power=0.75) if head == 'negative_sampling' else {}
  config = Config(workdir=str(tmp_path / 'run'), model=model, head=head, **sampled,
                  feature_size=10, window=2, optimizer='sgd', lr_schedule='linear',
                  learning_rate={'cbow': 0.05, 'skipgram': 0.025}[model],
                  min_learning_rate=1e-4, batch_size=64, chunk_positions=16, epochs=10,
                  patience=0, eval_splits='valid', log_every=1000, checkpoint_every=10 ** 6)
  run(config, planted_corpus)
  vectors = embeddings.keyed_vectors(embeddings.of_workdir(config.workdir))
  for (a, b), _ in FAMILIES.items():
    other = next(word for pair in FAMILIES if pair != (a, b) for word in pair)
    # Random 10-dimensional vectors, as the run starts, have cosines of about 0 ± 0.3.
    assert cosine(vectors, a, b) > 0.9, (a, b)
    assert cosine(vectors, a, b) > cosine(vectors, a, other) + 0.2, (a, b, other)
