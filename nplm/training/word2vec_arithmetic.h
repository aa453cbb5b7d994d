// The arithmetic of word2vec's compiled update (word2vec_update.cc) on its 100-float rows:
// dot products, scaled additions and the logistic errors, written so that the compiler
// keeps them in vector lanes (-O3 -march=native -fopenmp-simd).

#ifndef NPLM_TRAINING_WORD2VEC_ARITHMETIC_H_
#define NPLM_TRAINING_WORD2VEC_ARITHMETIC_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace nplm_word2vec {

constexpr float kMaxExp = 6.0f;  // The word2vec tool's bound on |f|.

inline float Dot(const float* a, const float* b, int64_t m) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < m; ++i) sum += a[i] * b[i];
  return sum;
}

inline void Axpy(float a, const float* x, float* y, int64_t m) {
#pragma omp simd
  for (int64_t i = 0; i < m; ++i) y[i] += a * x[i];
}

// s_k = x · y_k for n rows y_k, four at a time: four independent sums keep the FMA units
// busy where one sum waits on its last addition, and x is read once for four rows.
inline void Dots(const float* x, const float* const* y, int64_t n, float* s, int64_t m) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const float *y0 = y[k], *y1 = y[k + 1], *y2 = y[k + 2], *y3 = y[k + 3];
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int64_t i = 0; i < m; ++i) {
      s0 += x[i] * y0[i];
      s1 += x[i] * y1[i];
      s2 += x[i] * y2[i];
      s3 += x[i] * y3[i];
    }
    s[k] = s0, s[k + 1] = s1, s[k + 2] = s2, s[k + 3] = s3;
  }
  for (; k < n; ++k) s[k] = Dot(x, y[k], m);
}

// y += Σ_k a_k x_k over n rows x_k, four at a time: y is read and written once for four.
inline void AddScaled(const float* a, const float* const* x, int64_t n, float* y, int64_t m) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const float *x0 = x[k], *x1 = x[k + 1], *x2 = x[k + 2], *x3 = x[k + 3];
    const float a0 = a[k], a1 = a[k + 1], a2 = a[k + 2], a3 = a[k + 3];
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) y[i] += a0 * x0[i] + a1 * x1[i] + a2 * x2[i] + a3 * x3[i];
  }
  for (; k < n; ++k) Axpy(a[k], x[k], y, m);
}

// x_k += a_k y for n rows x_k, four at a time: y is read once for four rows. The rows may
// be one row more than once (a word in two slots of a window): each addition is stored
// before the next one reads the row.
inline void AddToEach(const float* a, float* const* x, int64_t n, const float* y, int64_t m) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    float *x0 = x[k], *x1 = x[k + 1], *x2 = x[k + 2], *x3 = x[k + 3];
    const float a0 = a[k], a1 = a[k + 1], a2 = a[k + 2], a3 = a[k + 3];
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) {
      const float v = y[i];
      x0[i] += a0 * v, x1[i] += a1 * v, x2[i] += a2 * v, x3[i] += a3 * v;
    }
  }
  for (; k < n; ++k) Axpy(a[k], y, x[k], m);
}

// y += Σ_k a_k x_k, then x_k += a_k z: an example's error and its step on rows that the
// next example reads (a skip-gram position's path), each row read once for both.
inline void AddScaledAndStep(const float* a, float* const* x, int64_t n, float* y,
                             const float* z, int64_t m) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    float *x0 = x[k], *x1 = x[k + 1], *x2 = x[k + 2], *x3 = x[k + 3];
    const float a0 = a[k], a1 = a[k + 1], a2 = a[k + 2], a3 = a[k + 3];
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) {
      const float v0 = x0[i], v1 = x1[i], v2 = x2[i], v3 = x3[i];
      y[i] += a0 * v0 + a1 * v1 + a2 * v2 + a3 * v3;
      x0[i] = v0 + a0 * z[i], x1[i] = v1 + a1 * z[i], x2[i] = v2 + a2 * z[i];
      x3[i] = v3 + a3 * z[i];
    }
  }
  for (; k < n; ++k) {
    float* xk = x[k];
    const float ak = a[k];
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) {
      const float v = xk[i];
      y[i] += ak * v;
      xk[i] = v + ak * z[i];
    }
  }
}

// log(1 + t) for t in [0, 1], as 2 atanh(t / (2 + t)) by its series to within float32's
// rounding (within 3 ulp; s² ≤ 1/9: the next term is 1e-8 of the sum).
inline float Log1pUnit(float t) {
  const float s = t / (2.0f + t), s2 = s * s;
  return 2.0f * s * (1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9 +
         s2 * (1.0f / 11 + s2 * (1.0f / 13 + s2 * (1.0f / 15))))))));
}

// e^-a for a ≥ 0, within 1 ulp over [0, 87]: 2^-k p(r), where a = k ln 2 - r, |r| ≤ ln 2 / 2,
// and p is e^r's Taylor series to r^7 (the next term is 5e-9 of it).
inline float ExpNegative(float a) {
  a = std::min(a, 87.0f);  // e^-87 ≈ 1.6e-38, still a normal float: 2^-k stays representable.
  const float k = std::nearbyint(a * 1.44269504f);
  const float r = k * 0.693145752f - a + k * 1.42860677e-6f;  // ln 2 in two parts
  const float p = 1.0f + r * (1.0f + r * (1.0f / 2 + r * (1.0f / 6 + r * (1.0f / 24 + r * (
      1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
  const int32_t exponent = (127 - int32_t(k)) << 23;  // 2^-k's bits
  float scale;
  std::memcpy(&scale, &exponent, sizeof scale);
  return p * scale;
}

// g = α (label - σ(f)) for n scores, with the tool's treatment beyond ±kMaxExp
// (word2vec_update.logistic_errors), -> the summed -log σ(±f). Branch-free and libm-free
// (ExpNegative, Log1pUnit), so that the scores go through in vector lanes: libm's expf and
// log1pf, a call per score, had been a third of skip-gram's step.
inline float Logistic(const float* scores, const float* labels, float* g, int64_t n,
                      float alpha, bool hierarchical) {
  float loss = 0.0f;
#pragma omp simd reduction(+ : loss)
  for (int64_t k = 0; k < n; ++k) {
    const float f = scores[k], t = ExpNegative(std::fabs(f));  // σ(f) from e^-|f| alone
    const float sigma = (f >= 0.0f ? 1.0f : t) / (1.0f + t);
    const bool within = std::fabs(f) < kMaxExp;
    const float error = hierarchical ? (within ? labels[k] - sigma : 0.0f)
        : labels[k] - (within ? sigma : (f > 0.0f ? 1.0f : 0.0f));
    g[k] = alpha * error;
    const float x = labels[k] > 0.0f ? -f : f;  // softplus(x) = -log σ(-x)
    loss += std::max(x, 0.0f) + Log1pUnit(t);
  }
  return loss;
}

inline void PrefetchRow(const float* row, int64_t m) {
  for (int64_t i = 0; i < m; i += 64 / sizeof(float)) __builtin_prefetch(row + i);
}

}  // namespace nplm_word2vec

#endif  // NPLM_TRAINING_WORD2VEC_ARITHMETIC_H_
