// word2vec's update on a CPU: nplm.training.word2vec_update's `chunked_step` loop over
// chunks, as one XLA FFI call (nplm.training.word2vec_native builds and registers it).
//
// Written by hand because no library has it and XLA's CPU code spends most of the step in
// its row gathers and scatter-adds (50-130 ns a 100-float row): here a row is read and
// updated where it lies, as the word2vec tool and gensim do.
//
// The arithmetic is `word2vec_update.apply`'s, chunk after chunk: within a chunk every
// example reads the tables as the chunk found them, then the chunk's updates are added.
// With `threads` > 1, thread t takes the t-th contiguous share of the chunks and updates its
// own copy of the tables (a row copied on its first change); at the end each row is
// old + Σ_t (new_t - old), the threads' changes added in thread order: what N devices each
// updating its own copy would give, whatever the threads' timing.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr float kMaxExp = 6.0f;  // The word2vec tool's bound on |f|.

float Dot(const float* a, const float* b, int64_t m) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < m; ++i) sum += a[i] * b[i];
  return sum;
}

void Axpy(float a, const float* x, float* y, int64_t m) {
#pragma omp simd
  for (int64_t i = 0; i < m; ++i) y[i] += a * x[i];
}

// log(1 + t) for t in [0, 1], as 2 atanh(t / (2 + t)) by its series to within float32's
// rounding (s² ≤ 1/9: the next term is 1e-8 of the sum): arithmetic the compiler keeps
// inline, where libm's log1pf call was a quarter of skip-gram's step.
float Log1pUnit(float t) {
  const float s = t / (2.0f + t), s2 = s * s;
  return 2.0f * s * (1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9 +
         s2 * (1.0f / 11 + s2 * (1.0f / 13 + s2 * (1.0f / 15))))))));
}

// g = α (label - σ(f)) for an example's R scores, with the tool's treatment beyond ±kMaxExp
// (word2vec_update.logistic_errors; a row that does not count: g = 0), -> the summed
// -log σ(±f) of the rows that count.
float Logistic(const float* scores, const float* labels, const uint8_t* counts, float* g,
               int64_t R, float alpha, bool hierarchical) {
  float loss = 0.0f;
  for (int64_t r = 0; r < R; ++r) {
    g[r] = 0.0f;
    if (!counts[r]) continue;  // Padding past a path's end, a negative equal to the target.
    const float f = scores[r], t = std::exp(-std::fabs(f));  // σ(f) from e^-|f| alone
    const float sigma = f >= 0.0f ? 1.0f / (1.0f + t) : t / (1.0f + t);
    const bool within = std::fabs(f) < kMaxExp;
    const float error = hierarchical ? (within ? labels[r] - sigma : 0.0f)
        : labels[r] - (within ? sigma : (f > 0.0f ? 1.0f : 0.0f));
    g[r] = alpha * error;
    const float x = labels[r] > 0.0f ? -f : f;  // softplus(x) = -log σ(-x)
    loss += std::max(x, 0.0f) + Log1pUnit(t);
  }
  return loss;
}

void PrefetchRow(const float* row, int64_t m) {
  for (int64_t i = 0; i < m; i += 64 / sizeof(float)) __builtin_prefetch(row + i);
}

// A table as one thread updates it: the shared rows themselves, or its own copy of them,
// each row copied on the thread's first change to it (a flag per row), so that a step pays
// for the rows it changes, not for the whole table.
class View {
 public:
  View(float* shared, int64_t rows, int64_t m, bool copy) : shared_(shared), m_(m) {
    if (copy) {
      copy_.reset(new float[rows * m]);  // Uninitialized: a row is written on its first change.
      changed_.assign(rows, 0);
    }
  }

  const float* Read(int32_t row) const {
    return copy_ && changed_[row] ? &copy_[int64_t(row) * m_] : shared_ + int64_t(row) * m_;
  }

  float* Write(int32_t row) {
    if (!copy_) return shared_ + int64_t(row) * m_;
    float* mine = &copy_[int64_t(row) * m_];
    if (!changed_[row]) {
      std::copy_n(shared_ + int64_t(row) * m_, m_, mine);
      changed_[row] = 1;
    }
    return mine;
  }

  // The thread's copy of the row, if it changed it, else null.
  const float* Changed(int64_t row) const {
    return copy_ && changed_[row] ? &copy_[row * m_] : nullptr;
  }

 private:
  float* shared_;
  int64_t m_;
  std::shared_ptr<float[]> copy_;  // None: the thread updates the shared rows.
  std::vector<uint8_t> changed_;   // Per row of the copy: whether the thread changed it.
};

// The examples as `word2vec_update.Examples` holds them, by position first.
struct Examples {
  const int32_t* context;  // [N, slots]
  const bool* present;     // [N, slots]
  const bool* counted;     // [N, J]
  const int32_t* rows;     // [N, J, R], or [N, R] (shared: a position's path); drawn: [N, J, 1]
  const float* labels;     // as rows (shared: the path's bits); drawn: unread
  const bool* counts;      // as rows (shared: on the path; counted too); drawn: unread
  int64_t slots, J, R;
  bool shared, cbow, hierarchical;
  int64_t m;
};

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

uint64_t SplitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int32_t Draw(const Sampler& q, uint64_t example, int64_t draw) {
  const uint64_t x = SplitMix64(q.seed ^ SplitMix64(example * uint64_t(q.negatives) + draw));
  const uint64_t word = ((x >> 32) * q.words) >> 32;
  return uint32_t(x) < q.threshold[word] ? int32_t(word) : q.alias[word];
}

struct Totals {
  double loss = 0.0;
  int64_t examples = 0;
};

// `word2vec_update.apply` for chunks [first, last) of `chunk` positions.
void ApplyChunks(const Examples& ex, const Sampler& q, float alpha, int64_t chunk,
                 int64_t first, int64_t last, View& vectors, View& out, Totals& totals) {
  const int64_t m = ex.m, J = ex.J, slots = ex.slots;
  const int64_t R = q.negatives > 0 ? 1 + q.negatives : ex.R;
  std::vector<float> hidden(chunk * J * m), errors(chunk * J * m), g(chunk * J * R), scores(R);
  // Each example's output rows, labels and which count (word2vec_update.examples_of).
  std::vector<int32_t> rows(chunk * J * R);
  std::vector<float> labels(chunk * J * R);
  std::vector<uint8_t> counts(chunk * J * R);
  auto make_examples = [&](int64_t c) {
    for (int64_t e = 0; e < chunk; ++e) {
      const int64_t b = c * chunk + e;
      for (int64_t j = 0; j < J; ++j) {
        const int64_t at = (e * J + j) * R, given = (b * J + j) * ex.R;
        const bool counted = ex.counted[b * J + j];
        if (q.negatives > 0) {  // The target, then k negatives, one equal to it skipped.
          const int32_t target = ex.rows[b * J + j];
          for (int64_t r = 0; r < R; ++r) {
            rows[at + r] = r == 0 ? target : (counted ? Draw(q, b * J + j, r - 1) : 0);
            labels[at + r] = r == 0 ? 1.0f : 0.0f;
            counts[at + r] = counted && (r == 0 || rows[at + r] != target);
          }
        } else {
          const int64_t read = ex.shared ? b * R : given;  // A path: the position's.
          for (int64_t r = 0; r < R; ++r) {
            rows[at + r] = ex.rows[read + r];
            labels[at + r] = ex.labels[read + r];
            counts[at + r] = counted && ex.counts[read + r];
          }
        }
      }
    }
  };
  for (int64_t c = first; c < last; ++c) {
    make_examples(c);
    // Every example's scores and errors, from the tables as the chunk found them.
    for (int64_t e = 0; e < chunk; ++e) {
      const int64_t b = c * chunk + e;
      if (e + 1 < chunk) {  // The next position's rows, on their way to the cache.
        for (int64_t s = 0; s < slots; ++s)
          if (ex.present[(b + 1) * slots + s])
            PrefetchRow(vectors.Read(ex.context[(b + 1) * slots + s]), m);
        for (int64_t r = 0; r < (ex.shared ? R : J * R); ++r)  // A path: once.
          PrefetchRow(out.Read(rows[(e + 1) * J * R + r]), m);
      }
      for (int64_t j = 0; j < J; ++j) {
        float* h = &hidden[(e * J + j) * m];
        float* err = &errors[(e * J + j) * m];
        std::fill(err, err + m, 0.0f);
        if (!ex.counted[b * J + j]) continue;
        ++totals.examples;
        if (ex.cbow) {  // The mean of the context words' vectors.
          std::fill(h, h + m, 0.0f);
          int present = 0;
          for (int64_t s = 0; s < slots; ++s)
            if (ex.present[b * slots + s]) {
              Axpy(1.0f, vectors.Read(ex.context[b * slots + s]), h, m);
              ++present;
            }
          const float inverse = 1.0f / std::max(present, 1);
          for (int64_t i = 0; i < m; ++i) h[i] *= inverse;
        } else {
          const float* read = vectors.Read(ex.context[b * slots + j]);
          std::copy(read, read + m, h);
        }
        const int64_t at = (e * J + j) * R;
        for (int64_t r = 0; r < R; ++r)
          scores[r] = counts[at + r] ? Dot(h, out.Read(rows[at + r]), m) : 0.0f;
        totals.loss += Logistic(scores.data(), &labels[at], &counts[at], &g[at], R, alpha,
                                ex.hierarchical);
        for (int64_t r = 0; r < R; ++r)
          // e += g v; g = 0 (a score beyond the tool's bound) changes nothing.
          if (g[at + r] != 0.0f) Axpy(g[at + r], out.Read(rows[at + r]), err, m);
      }
    }
    // Then the chunk's updates: v += g h; C(input) += e.
    for (int64_t e = 0; e < chunk; ++e) {
      const int64_t b = c * chunk + e;
      for (int64_t j = 0; j < J; ++j) {
        if (!ex.counted[b * J + j]) continue;
        const int64_t at = (e * J + j) * R;
        const float* h = &hidden[(e * J + j) * m];
        const float* err = &errors[(e * J + j) * m];
        for (int64_t r = 0; r < R; ++r)
          if (g[at + r] != 0.0f) Axpy(g[at + r], h, out.Write(rows[at + r]), m);
        if (ex.cbow) {  // Every context word receives the whole error.
          for (int64_t s = 0; s < slots; ++s)
            if (ex.present[b * slots + s])
              Axpy(1.0f, err, vectors.Write(ex.context[b * slots + s]), m);
        } else {
          Axpy(1.0f, err, vectors.Write(ex.context[b * slots + j]), m);
        }
      }
    }
  }
}

// work(0) … work(count - 1), on this thread and XLA's CPU threads (threads of ours beside
// them would compete with its idle workers' spinning for the cores). Each runner takes the
// next item not taken, so this thread waits only for items under way: none is left queued
// behind a worker that waits, whatever else the pool is doing.
template <typename Work>
void InParallel(ffi::ThreadPool& pool, int64_t count, Work work) {
  struct State {
    std::atomic<int64_t> next{0};
    std::mutex mutex;
    std::condition_variable done;
    int64_t finished = 0;
  };
  auto state = std::make_shared<State>();  // A late runner may outlive this call.
  auto run = [state, count, work] {
    for (int64_t item; (item = state->next.fetch_add(1)) < count;) {
      work(item);
      std::lock_guard<std::mutex> lock(state->mutex);
      if (++state->finished == count) state->done.notify_all();
    }
  };
  for (int64_t other = 1; other < count; ++other) {
    auto runner = run;
    pool.Schedule(std::move(runner));
  }
  run();
  std::unique_lock<std::mutex> lock(state->mutex);
  state->done.wait(lock, [&] { return state->finished == count; });
}

// Every id read must be a row of its table: a bad one would write outside it.
bool InBounds(const int32_t* ids, size_t count, int64_t rows) {
  for (size_t i = 0; i < count; ++i)
    if (ids[i] < 0 || ids[i] >= rows) return false;
  return true;
}

ffi::Error Update(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> vectors_in,
                  ffi::Buffer<ffi::F32> out_in,
                  ffi::Buffer<ffi::S32> context, ffi::Buffer<ffi::PRED> present,
                  ffi::Buffer<ffi::PRED> counted, ffi::Buffer<ffi::S32> rows,
                  ffi::Buffer<ffi::F32> labels, ffi::Buffer<ffi::PRED> counts,
                  ffi::Buffer<ffi::U32> threshold, ffi::Buffer<ffi::S32> alias,
                  ffi::Buffer<ffi::U32> seed, ffi::BufferR0<ffi::F32> alpha,
                  ffi::BufferR0<ffi::S32> filled,
                  ffi::ResultBuffer<ffi::F32> vectors_out, ffi::ResultBuffer<ffi::F32> out_out,
                  ffi::ResultBufferR0<ffi::F32> loss, ffi::ResultBufferR0<ffi::S32> examples,
                  bool cbow, bool hierarchical, int64_t negatives, int64_t chunk,
                  int64_t threads) {
  const auto rows_dims = rows.dimensions();
  Examples ex{context.typed_data(), present.typed_data(), counted.typed_data(),
              rows.typed_data(), labels.typed_data(), counts.typed_data(),
              context.dimensions()[1], counted.dimensions()[1], rows_dims.back(),
              rows_dims.size() == 2, cbow, hierarchical, vectors_in.dimensions()[1]};
  const int64_t positions = context.dimensions()[0];
  const int64_t vocabulary = vectors_in.dimensions()[0], out_rows = out_in.dimensions()[0];
  if (chunk < 1 || positions % chunk != 0 || threads < 1)
    return ffi::Error::InvalidArgument("word2vec update: chunk must divide the positions");
  const uint32_t* seed_words = seed.typed_data();
  Sampler q{threshold.typed_data(), alias.typed_data(), uint64_t(alias.element_count()),
            (uint64_t(seed_words[0]) << 32) | seed_words[1], negatives};
  if (negatives > 0 && (threshold.element_count() != alias.element_count() ||
                        !InBounds(q.alias, alias.element_count(), out_rows)))
    return ffi::Error::InvalidArgument("word2vec update: an alias table of another size");
  if (!InBounds(ex.context, context.element_count(), vocabulary) ||
      !InBounds(ex.rows, rows.element_count(), out_rows))
    return ffi::Error::InvalidArgument("word2vec update: an id outside its table");
  // The tables are updated where they lie (the outputs alias the inputs).
  float* vectors = vectors_out->typed_data();
  float* out = out_out->typed_data();
  if (vectors != vectors_in.typed_data())
    std::copy_n(vectors_in.typed_data(), vectors_in.element_count(), vectors);
  if (out != out_in.typed_data()) std::copy_n(out_in.typed_data(), out_in.element_count(), out);

  const int64_t chunks = std::min<int64_t>(*filled.typed_data(), positions / chunk);
  threads = std::max<int64_t>(1, std::min(threads, chunks));
  const bool copies = threads > 1;
  std::vector<View> vector_views(threads, View(vectors, vocabulary, ex.m, false));
  std::vector<View> out_views(threads, View(out, out_rows, ex.m, false));
  std::vector<Totals> totals(threads);
  auto share = [&](int64_t t) {
    if (copies) {  // Each thread copies the tables for itself.
      vector_views[t] = View(vectors, vocabulary, ex.m, true);
      out_views[t] = View(out, out_rows, ex.m, true);
    }
    const int64_t first = chunks * t / threads, last = chunks * (t + 1) / threads;
    ApplyChunks(ex, q, *alpha.typed_data(), chunk, first, last, vector_views[t], out_views[t],
                totals[t]);
  };
  InParallel(pool, threads, share);
  if (copies) {  // Each thread takes a part of the rows: old + Σ_t (new_t - old), in order.
    InParallel(pool, threads, [&](int64_t part) {
      std::vector<float> sum(ex.m);
      for (auto* views : {&vector_views, &out_views}) {
        float* shared = views == &vector_views ? vectors : out;
        const int64_t rows = views == &vector_views ? vocabulary : out_rows;
        for (int64_t row = rows * part / threads; row < rows * (part + 1) / threads; ++row) {
          float* old = shared + row * ex.m;
          bool changed = false;
          for (const View& view : *views) {
            const float* mine = view.Changed(row);
            if (!mine) continue;
            if (!changed) std::copy_n(old, ex.m, sum.data());
            changed = true;
            for (int64_t i = 0; i < ex.m; ++i) sum[i] += mine[i] - old[i];
          }
          if (changed) std::copy_n(sum.data(), ex.m, old);
        }
      }
    });
  }
  double total_loss = 0.0;
  int64_t total_examples = 0;
  for (const Totals& each : totals) {
    total_loss += each.loss;
    total_examples += each.examples;
  }
  *loss->typed_data() = float(total_loss);
  *examples->typed_data() = int32_t(total_examples);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(NplmWord2vecUpdate, Update,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()   // C
                                  .Arg<ffi::Buffer<ffi::F32>>()   // the output vectors
                                  .Arg<ffi::Buffer<ffi::S32>>()   // context
                                  .Arg<ffi::Buffer<ffi::PRED>>()  // present
                                  .Arg<ffi::Buffer<ffi::PRED>>()  // counted
                                  .Arg<ffi::Buffer<ffi::S32>>()   // rows
                                  .Arg<ffi::Buffer<ffi::F32>>()   // labels
                                  .Arg<ffi::Buffer<ffi::PRED>>()  // counts
                                  .Arg<ffi::Buffer<ffi::U32>>()   // alias thresholds
                                  .Arg<ffi::Buffer<ffi::S32>>()   // alias words
                                  .Arg<ffi::Buffer<ffi::U32>>()   // the draws' seed [2]
                                  .Arg<ffi::BufferR0<ffi::F32>>()  // alpha
                                  .Arg<ffi::BufferR0<ffi::S32>>()  // the chunks to run
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::BufferR0<ffi::F32>>()   // the summed loss
                                  .Ret<ffi::BufferR0<ffi::S32>>()   // the examples counted
                                  .Attr<bool>("cbow")
                                  .Attr<bool>("hierarchical")
                                  .Attr<int64_t>("negatives")
                                  .Attr<int64_t>("chunk")
                                  .Attr<int64_t>("threads"));
