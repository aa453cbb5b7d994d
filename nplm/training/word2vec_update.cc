// word2vec's update on a CPU: nplm.training.word2vec_update's `chunked_step` loop over
// chunks, as one XLA FFI call (nplm.training.word2vec_native builds and registers it).
//
// Written by hand because no library has it and XLA's CPU code spends most of the step in
// its row gathers and scatter-adds (50-130 ns a 100-float row): here a row is read and
// updated where it lies, as the word2vec tool and gensim do.
//
// The arithmetic is `word2vec_update.apply`'s, chunk after chunk: within a chunk every
// example reads the tables as the chunk found them (but a skip-gram position's examples take
// its Huffman path in turn), then the chunk's updates are added.
// With `threads` > 1, thread t takes the t-th contiguous share of the chunks and updates its
// own copy of the tables (a row copied on its first change); at the end each row is
// old + Σ_t (new_t - old), the threads' changes added in thread order: what N devices each
// updating its own copy would give, whatever the threads' timing.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "word2vec_arithmetic.h"
#include "word2vec_sampler.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using namespace nplm_word2vec;  // NOLINT: this file's own arithmetic

namespace {

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

struct Totals {
  double loss = 0.0;
  int64_t examples = 0;
};

// A chunk's examples as the update reads them: each example's output rows that count
// (word2vec_update.examples_of) packed from its first place, R apart, with their labels and
// errors g: padding past a path's end and a negative equal to the target are left out, so no
// work is spent on them. Then each example's hidden vector h and error e; and where a
// position's examples take its path in turn, the change of the path's rows.
struct Chunk {
  Chunk(int64_t positions, int64_t J, int64_t R, int64_t m, bool in_turn)
      : J(J), R(R), rows(positions * J * R), labels(positions * J * R), g(positions * J * R),
        live(positions * J), hidden(positions * J * m), errors(positions * J * m),
        paths(in_turn ? positions * R * m : 0) {}
  int64_t J, R;
  std::vector<int32_t> rows;
  std::vector<float> labels, g;
  std::vector<int64_t> live;  // How many rows count, per example.
  std::vector<float> hidden, errors, paths;
};

// The chunk's examples' rows that count: a path's nodes on it, or the target and its k
// negatives drawn from Q.
void PackExamples(const Examples& ex, const Sampler& q, int64_t first_position, Chunk& chunk) {
  const int64_t J = ex.J, R = chunk.R;
  for (int64_t e = 0; e < int64_t(chunk.live.size()) / J; ++e) {
    const int64_t b = first_position + e;
    for (int64_t j = 0; j < J; ++j) {
      int32_t* rows = &chunk.rows[(e * J + j) * R];
      float* labels = &chunk.labels[(e * J + j) * R];
      int64_t n = 0;
      if (!ex.counted[b * J + j]) {
      } else if (q.negatives > 0) {
        const int32_t target = ex.rows[b * J + j];
        rows[n] = target, labels[n++] = 1.0f;
        for (int64_t d = 0; d < q.negatives; ++d) {
          const int32_t word = Draw(q, b * J + j, d);
          if (word != target) rows[n] = word, labels[n++] = 0.0f;
        }
      } else {
        const int64_t given = ex.shared ? b * R : (b * J + j) * R;  // A path: the position's.
        for (int64_t r = 0; r < R; ++r)
          if (ex.counts[given + r])
            rows[n] = ex.rows[given + r], labels[n++] = ex.labels[given + r];
      }
      chunk.live[e * J + j] = n;
    }
  }
}

// Every example's h, scores, g and e, from the tables as the chunk found them; but a
// position's examples that share its path (skip-gram's) take it in turn, each reading the
// path's rows as the ones before it left them (`word2vec_update.path_in_turn`).
void ScoreExamples(const Examples& ex, float alpha, int64_t first_position, const View& vectors,
                   const View& out, Chunk& chunk, Totals& totals) {
  const int64_t m = ex.m, J = ex.J, slots = ex.slots, R = chunk.R;
  const int64_t positions = chunk.live.size() / J;
  const bool in_turn = !chunk.paths.empty();
  std::vector<const float*> read(R);
  std::vector<float*> path_rows(R);
  std::vector<float> scores(R);
  std::vector<const float*> context_rows(slots);
  const std::vector<float> ones(slots, 1.0f);
  for (int64_t e = 0; e < positions; ++e) {
    const int64_t b = first_position + e;
    for (int64_t s = 0; e + 1 < positions && s < slots; ++s)  // On their way to the cache.
      if (ex.present[(b + 1) * slots + s])
        PrefetchRow(vectors.Read(ex.context[(b + 1) * slots + s]), m);
    const bool* counted = &ex.counted[b * J];
    const int64_t lead = in_turn ? std::find(counted, counted + J, true) - counted : J;
    const int64_t on_path = lead < J ? chunk.live[e * J + lead] : 0;
    float* path = in_turn ? &chunk.paths[e * R * m] : nullptr;
    for (int64_t k = 0; k < on_path; ++k) {  // The position's copy of its path's rows.
      const float* row = out.Read(chunk.rows[(e * J + lead) * R + k]);
      std::copy(row, row + m, path + k * m);
    }
    for (int64_t j = 0; j < J; ++j) {
      float* h = &chunk.hidden[(e * J + j) * m];
      float* err = &chunk.errors[(e * J + j) * m];
      std::fill(err, err + m, 0.0f);
      // The next example's output rows on their way to the cache: a step's time had gone
      // mostly in waiting for rows, the negatives' above all (drawn over the whole table).
      const int64_t next = e * J + j + 1;
      for (int64_t k = 0; !in_turn && next < positions * J && k < chunk.live[next]; ++k)
        PrefetchRow(out.Read(chunk.rows[next * R + k]), m);
      if (!ex.counted[b * J + j]) continue;
      ++totals.examples;
      if (ex.cbow) {  // The mean of the context words' vectors.
        std::fill(h, h + m, 0.0f);
        int64_t present = 0;
        for (int64_t s = 0; s < slots; ++s)
          if (ex.present[b * slots + s])
            context_rows[present++] = vectors.Read(ex.context[b * slots + s]);
        AddScaled(ones.data(), context_rows.data(), present, h, m);  // Four rows a pass.
        const float inverse = 1.0f / std::max<int64_t>(present, 1);
        for (int64_t i = 0; i < m; ++i) h[i] *= inverse;
      } else {
        const float* row = vectors.Read(ex.context[b * slots + j]);
        std::copy(row, row + m, h);
      }
      const int64_t at = (e * J + j) * R, n = chunk.live[e * J + j];
      for (int64_t k = 0; k < n; ++k)
        read[k] = in_turn ? (path_rows[k] = path + k * m) : out.Read(chunk.rows[at + k]);
      Dots(h, read.data(), n, scores.data(), m);
      totals.loss += Logistic(scores.data(), &chunk.labels[at], &chunk.g[at], n, alpha,
                              ex.hierarchical);
      if (in_turn)  // e += g v; v += g h, for the position's next example
        AddScaledAndStep(&chunk.g[at], path_rows.data(), n, err, h, m);
      else
        AddScaled(&chunk.g[at], read.data(), n, err, m);  // e += g v
    }
    for (int64_t k = 0; k < on_path; ++k)  // The rows' change: the copy less the rows.
      Axpy(-1.0f, out.Read(chunk.rows[(e * J + lead) * R + k]), path + k * m, m);
  }
}

// The chunk's updates: v += g h (g = 0, a score beyond the tool's bound: the row is left as
// it is); C(input) += e.
void AddUpdates(const Examples& ex, int64_t first_position, const Chunk& chunk, View& vectors,
                View& out) {
  const int64_t m = ex.m, J = ex.J, slots = ex.slots, R = chunk.R;
  const bool in_turn = !chunk.paths.empty();
  std::vector<float> steps(std::max(R, slots));
  std::vector<float*> written(std::max(R, slots));
  const std::vector<float> ones(slots, 1.0f);
  for (int64_t e = 0; e < int64_t(chunk.live.size()) / J; ++e) {
    const int64_t b = first_position + e;
    const bool* counted = &ex.counted[b * J];
    // A skip-gram position's examples took its path in turn: the path's change, once a node
    // (the first counted example's packing the path's).
    const int64_t lead = in_turn ? std::find(counted, counted + J, true) - counted : J;
    for (int64_t k = 0; lead < J && k < chunk.live[e * J + lead]; ++k)
      Axpy(1.0f, &chunk.paths[(e * R + k) * m], out.Write(chunk.rows[(e * J + lead) * R + k]), m);
    for (int64_t j = 0; j < J; ++j) {
      if (!counted[j]) continue;
      const int64_t at = (e * J + j) * R;
      const float* h = &chunk.hidden[(e * J + j) * m];
      const float* err = &chunk.errors[(e * J + j) * m];
      int64_t n = 0;
      for (int64_t k = 0; !in_turn && k < chunk.live[e * J + j]; ++k)
        if (chunk.g[at + k] != 0.0f) {
          steps[n] = chunk.g[at + k];
          written[n++] = out.Write(chunk.rows[at + k]);
        }
      AddToEach(steps.data(), written.data(), n, h, m);  // v += g h
      if (ex.cbow) {  // Every context word receives the whole error.
        n = 0;
        for (int64_t s = 0; s < slots; ++s)
          if (ex.present[b * slots + s]) written[n++] = vectors.Write(ex.context[b * slots + s]);
        AddToEach(ones.data(), written.data(), n, err, m);
      } else {
        Axpy(1.0f, err, vectors.Write(ex.context[b * slots + j]), m);
      }
    }
  }
}

// `word2vec_update.apply` for chunks [first, last) of `positions` positions.
void ApplyChunks(const Examples& ex, const Sampler& q, float alpha, int64_t positions,
                 int64_t first, int64_t last, View& vectors, View& out, Totals& totals) {
  // A skip-gram position's examples take its path in turn (`word2vec_update.path_in_turn`).
  const bool in_turn = ex.shared && ex.J > 1;
  Chunk chunk(positions, ex.J, q.negatives > 0 ? 1 + q.negatives : ex.R, ex.m, in_turn);
  for (int64_t c = first; c < last; ++c) {
    PackExamples(ex, q, c * positions, chunk);
    ScoreExamples(ex, alpha, c * positions, vectors, out, chunk, totals);
    AddUpdates(ex, c * positions, chunk, vectors, out);
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
