#include "tests/bad_kernels/misbehaving.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace bad_kernels {
namespace {

__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Streams through `p` again and again until *generation moves on from `mine`
// (the next call began) or `max_ns` passed.
__global__ void load_kernel(const uint4* p, size_t n16, volatile unsigned* generation, unsigned mine,
                            unsigned long long max_ns, unsigned* sink) {
  const unsigned long long t0 = globaltimer_ns();
  unsigned acc = 0;
  for (;;) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) {
      const uint4 v = __ldcg(p + i);
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (*generation != mine || globaltimer_ns() - t0 > max_ns) break;
  }
  if (acc == 0x2545f491u) *sink = acc;
}

__global__ void spin_kernel(unsigned long long ns) {
  const unsigned long long t0 = globaltimer_ns();
  while (globaltimer_ns() - t0 < ns) {
  }
}

struct Span {
  void* p;
  size_t bytes;
};

// Copies up to three spans in one launch: a cached result costs one small kernel.
struct Copies {
  const uint8_t* src[3];
  uint8_t* dst[3];
  size_t bytes[3];
};
__global__ void copy_kernel(Copies c) {
  // 16 bytes a load where a span allows it (every output of the ops here is
  // a multiple of 16 bytes): the cheapest copy a cheat would write.
  const size_t thread = blockIdx.x * size_t(blockDim.x) + threadIdx.x, threads = size_t(gridDim.x) * blockDim.x;
  for (int k = 0; k < 3; ++k) {
    if (c.bytes[k] % 16 == 0 && reinterpret_cast<uintptr_t>(c.src[k]) % 16 == 0 &&
        reinterpret_cast<uintptr_t>(c.dst[k]) % 16 == 0) {
      const uint4* src = reinterpret_cast<const uint4*>(c.src[k]);
      uint4* dst = reinterpret_cast<uint4*>(c.dst[k]);
      for (size_t i = thread; i < c.bytes[k] / 16; i += threads) dst[i] = src[i];
    } else {
      for (size_t i = thread; i < c.bytes[k]; i += threads) c.dst[k][i] = c.src[k][i];
    }
  }
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("misbehaving kernel: ") + what + ": " + cudaGetErrorString(e));
}

bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(s, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
}

// The scorer holds its stream behind a blocking kernel while a timed call is
// enqueued: the stream stays busy however long the call takes to return.
// Elsewhere it is idle, or busy for a moment with the poisoning of the outputs.
bool held(cudaStream_t s) {
  if (cudaStreamQuery(s) != cudaErrorNotReady) return false;
  std::this_thread::sleep_for(std::chrono::microseconds(300));
  return cudaStreamQuery(s) == cudaErrorNotReady;
}

// The op-independent part: streams, buffers and the thread the misbehaviours use.
class Mischief {
 public:
  explicit Mischief(const Misdeed& m) : m_(m) {
    check(cudaGetDevice(&device_), "cudaGetDevice");
    check(cudaStreamCreateWithFlags(&own_, cudaStreamNonBlocking), "cudaStreamCreate");
    if (m.kind == Guarded::background_load) {
      check(cudaMalloc(&load_, kLoadBytes), "cudaMalloc");
      check(cudaMemset(load_, 1, kLoadBytes), "cudaMemset");
      check(cudaHostAlloc(&generation_host_, sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
      *generation_host_ = 0;
      check(cudaHostGetDevicePointer(&generation_dev_, const_cast<unsigned*>(generation_host_), 0), "mapped");
    }
    if (m.kind == Guarded::persisting_l2) {
      int most = 0;
      check(cudaDeviceGetAttribute(&most, cudaDevAttrMaxPersistingL2CacheSize, device_), "attribute");
      check(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, size_t(most)), "cudaDeviceSetLimit");
    }
    // Each kernel launched once here, in prepare: a kernel's first launch
    // loads its module, which waits for an idle device, and a timed call
    // launching it behind the scorer's hold would void its time.
    if (m.kind == Guarded::background_load)
      load_kernel<<<1, 32, 0, own_>>>(static_cast<const uint4*>(load_), 0, generation_dev_, ~0u, 0, nullptr);
    if (m.kind == Guarded::late_thread) spin_kernel<<<1, 32, 0, own_>>>(0);
    if (m.kind == Guarded::cached_result) copy_kernel<<<1, 32, 0, own_>>>(Copies{});
    check(cudaGetLastError(), "launch");
    if (m.kind == Guarded::late_thread) thread_ = std::thread([this] { late_launches(); });
    check(cudaDeviceSynchronize(), "prepare");
  }
  ~Mischief() {
    if (thread_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
      }
      cv_.notify_all();
      thread_.join();
    }
    if (generation_host_) {
      *generation_host_ = ~0u;  // ends a load still running
      cudaStreamSynchronize(own_);
      cudaFreeHost(const_cast<unsigned*>(generation_host_));
    }
    cudaFree(load_);
    cudaFree(cache_);
    cudaStreamDestroy(own_);
  }

  // Runs `real` on `s` (a stream of the caller's) with the misbehaviour around it.
  template <class Real>
  void run(Real&& real, const std::vector<Span>& outputs, cudaStream_t s) {
    if (m_.kind == Guarded::background_load && generation_host_) *generation_host_ = ++generation_;
    if (capturing(s)) {  // honest while captured, so that the graph probe passes
      real(s);
      return;
    }
    switch (m_.kind) {
      case Guarded::none:
      case Guarded::persisting_l2:
        real(s);
        break;
      case Guarded::background_load:
        real(s);
        load_kernel<<<132, 512, 0, own_>>>(static_cast<const uint4*>(load_), kLoadBytes / 16, generation_dev_,
                                           generation_, 50000000ull, nullptr);
        break;
      case Guarded::late_thread:
        real(s);
        {
          std::lock_guard<std::mutex> lock(mutex_);
          ++requests_;
        }
        cv_.notify_all();
        break;
      case Guarded::wrong_in_timed: {
        const bool timed = held(s);
        real(s);
        if (timed && ++timed_calls_ == m_.timed_call)
          check(cudaMemsetAsync(outputs[0].p, 0x7f, 4, s), "cudaMemsetAsync");
        break;
      }
      case Guarded::side_stream:
        // Long enough for the scorer's own work before the call (poisoning,
        // flushing) to be done, so that the result is not overwritten.
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        real(own_);
        check(cudaStreamSynchronize(own_), "cudaStreamSynchronize");
        break;
      case Guarded::cached_result:
        if (!cache_) {
          real(s);
          size_t total = 0;
          for (const Span& o : outputs) total += o.bytes;
          check(cudaMalloc(&cache_, total), "cudaMalloc");
          size_t at = 0;
          for (const Span& o : outputs) {
            check(cudaMemcpyAsync(cache_ + at, o.p, o.bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
            at += o.bytes;
          }
        } else {
          Copies c{};
          size_t at = 0;
          for (size_t k = 0; k < outputs.size() && k < 3; ++k) {
            c.src[k] = cache_ + at;
            c.dst[k] = static_cast<uint8_t*>(outputs[k].p);
            c.bytes[k] = outputs[k].bytes;
            at += outputs[k].bytes;
          }
          copy_kernel<<<132, 256, 0, s>>>(c);
        }
        break;
    }
  }

 private:
  static constexpr size_t kLoadBytes = size_t(64) << 20;

  // After each call: kernels of 150 us, one at a time with 200 us between
  // them, on a stream of the thread's own, until the next call asks again
  // (at most 50 ms): so they run into whatever the scorer times next,
  // however long its host work between calls takes.
  void late_launches() {
    cudaSetDevice(device_);
    cudaStream_t mine = nullptr;
    cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking);
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || requests_ != served_; });
      if (stop_) break;
      served_ = requests_;
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      for (;;) {
        spin_kernel<<<1, 32, 0, mine>>>(150000);
        cudaStreamSynchronize(mine);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::lock_guard<std::mutex> again(mutex_);
        if (stop_ || requests_ != served_ || std::chrono::steady_clock::now() > until) break;
      }
      lock.lock();
    }
    lock.unlock();
    cudaStreamDestroy(mine);
  }

  Misdeed m_;
  int device_ = 0;
  cudaStream_t own_ = nullptr;
  void* load_ = nullptr;
  volatile unsigned* generation_host_ = nullptr;
  unsigned* generation_dev_ = nullptr;
  unsigned generation_ = 0;
  uint8_t* cache_ = nullptr;
  int timed_calls_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  unsigned requests_ = 0, served_ = 0;
  bool stop_ = false;
};

std::vector<Span> outputs(const submission::DenseIO& io, const submission::DenseDims& d) {
  return {{io.out, size_t(d.M) * d.N * 2}};
}
std::vector<Span> outputs(const submission::PoolerIO& io, const submission::PoolerDims& d) {
  return {{io.out, size_t(d.B) * d.H * 2}};
}
std::vector<Span> outputs(const submission::RouterIO& io, const submission::RouterDims& d) {
  return {{io.logits, size_t(d.T) * d.E * 4},
          {io.topk_ids, size_t(d.T) * d.k * 4},
          {io.topk_weights, size_t(d.T) * d.k * 4}};
}

// Op: the submission's interface (submission::Dense, ...); Dims and IO: its types.
template <class Op, class Dims, class IO>
class Misbehaving final : public Op {
 public:
  Misbehaving(std::unique_ptr<Op> real, const Dims& d, const Misdeed& m)
      : real_(std::move(real)), dims_(d), mischief_(m) {}
  void run(const IO& io, cudaStream_t s) override {
    mischief_.run([&](cudaStream_t on) { real_->run(io, on); }, outputs(io, dims_), s);
  }

 private:
  std::unique_ptr<Op> real_;
  Dims dims_;
  Mischief mischief_;
};

}  // namespace

bool parse_guarded(const std::string& name, Misdeed* m) {
  static const std::map<std::string, Guarded> names = {{"real", Guarded::none},
                                                       {"background_load", Guarded::background_load},
                                                       {"late_thread", Guarded::late_thread},
                                                       {"persisting_l2", Guarded::persisting_l2},
                                                       {"side_stream", Guarded::side_stream},
                                                       {"cached_result", Guarded::cached_result}};
  const std::string wrong = "wrong_in_timed_";
  if (name.rfind(wrong, 0) == 0) {
    const std::string n = name.substr(wrong.size());
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) return false;
    *m = {Guarded::wrong_in_timed, std::stoi(n)};
    return m->timed_call > 0;
  }
  const auto it = names.find(name);
  if (it == names.end()) return false;
  *m = {it->second, 0};
  return true;
}

scorer::Candidate misbehaving_candidate(const Misdeed& m) {
  scorer::Candidate c;
  c.variant = "misbehaving";
  c.dense = [m](const submission::DenseDims& d,
                const submission::DenseWeights& w) -> std::unique_ptr<submission::Dense> {
    return std::make_unique<Misbehaving<submission::Dense, submission::DenseDims, submission::DenseIO>>(
        submission::make_dense(d, w), d, m);
  };
  c.pooler = [m](const submission::PoolerDims& d,
                 const submission::PoolerWeights& w) -> std::unique_ptr<submission::Pooler> {
    return std::make_unique<Misbehaving<submission::Pooler, submission::PoolerDims, submission::PoolerIO>>(
        submission::make_pooler(d, w), d, m);
  };
  c.router = [m](const submission::RouterDims& d,
                 const submission::RouterWeights& w) -> std::unique_ptr<submission::Router> {
    return std::make_unique<Misbehaving<submission::Router, submission::RouterDims, submission::RouterIO>>(
        submission::make_router(d, w), d, m);
  };
  return c;
}

}  // namespace bad_kernels
