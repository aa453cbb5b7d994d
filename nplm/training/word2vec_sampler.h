// Negative sampling's draws for word2vec's compiled update (word2vec_update.cc).

#ifndef NPLM_TRAINING_WORD2VEC_SAMPLER_H_
#define NPLM_TRAINING_WORD2VEC_SAMPLER_H_

#include <cstdint>

namespace nplm_word2vec {

// Negative sampling's k draws from Q per example, made here (`negatives` > 0): Walker's alias
// method (Walker 1977; Vose 1991), an O(1) draw from one 64-bit number: its high half picks
// a word i uniformly (multiply-shift: off by at most |V|/2^32 of a word's share), its low half
// keeps i where below i's threshold, else takes alias[i]. The numbers: SplitMix64 (Steele et
// al. 2014) of the step's seed and the draw's place (example n, draw d), so a draw does not
// depend on which thread makes it.
struct Sampler {
  const uint32_t* threshold;  // [|V|]
  const int32_t* alias;       // [|V|]
  uint64_t words, seed;
  int64_t negatives;
};

inline uint64_t SplitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline int32_t Draw(const Sampler& q, uint64_t example, int64_t draw) {
  const uint64_t x = SplitMix64(q.seed ^ SplitMix64(example * uint64_t(q.negatives) + draw));
  const uint64_t word = ((x >> 32) * q.words) >> 32;
  return uint32_t(x) < q.threshold[word] ? int32_t(word) : q.alias[word];
}

}  // namespace nplm_word2vec

#endif  // NPLM_TRAINING_WORD2VEC_SAMPLER_H_
