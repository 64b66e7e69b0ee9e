#include "scorer/kernel_trace.h"

#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <type_traits>
#include <unordered_map>

namespace scorer {
namespace {

// CUPTI's functions, looked up in the library at run time. decltype of the
// header's declarations keeps their types exact without linking against it.
struct Cupti {
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push_id = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop_id = nullptr;
  decltype(&cuptiGetStreamIdEx) stream_id = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  std::string why;  // empty when loaded

  std::string error(const char* what, CUptiResult r) const {
    const char* s = nullptr;
    if (result_string) result_string(r, &s);
    return std::string(what) + ": " + (s ? s : "CUPTI error " + std::to_string(int(r)));
  }
};

// The toolkit's usual places, after the loader's own search.
const Cupti& cupti() {
  static Cupti c;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names = {"libcupti.so.13", "libcupti.so"};
    for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
      if (const char* home = std::getenv(env))
        for (const char* sub : {"/extras/CUPTI/lib64/libcupti.so.13", "/lib64/libcupti.so.13"})
          names.push_back(std::string(home) + sub);
    names.push_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13");
    names.push_back("/usr/local/cuda/lib64/libcupti.so.13");
    void* lib = nullptr;
    std::string last;
    for (const std::string& n : names) {
      if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
      if (const char* e = dlerror()) last = e;
    }
    if (!lib) {
      c.why = "cannot load CUPTI (libcupti.so.13): " + last;
      return;
    }
    bool all = true;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      all = all && fn;
    };
    get(c.get_version, "cuptiGetVersion");
    get(c.result_string, "cuptiGetResultString");
    get(c.register_callbacks, "cuptiActivityRegisterCallbacks");
    get(c.enable, "cuptiActivityEnable");
    get(c.disable, "cuptiActivityDisable");
    get(c.flush_all, "cuptiActivityFlushAll");
    get(c.next_record, "cuptiActivityGetNextRecord");
    get(c.push_id, "cuptiActivityPushExternalCorrelationId");
    get(c.pop_id, "cuptiActivityPopExternalCorrelationId");
    get(c.stream_id, "cuptiGetStreamIdEx");
    get(c.timestamp, "cuptiGetTimestamp");
    if (!all) {
      c.why = "the CUPTI library found lacks functions used here";
      return;
    }
    // Records are read through this build's structs: an older library
    // writes older, shorter ones.
    uint32_t v = 0;
    if (c.get_version(&v) != CUPTI_SUCCESS || v < CUPTI_API_VERSION)
      c.why = "CUPTI API version " + std::to_string(v) + " is older than the " + std::to_string(CUPTI_API_VERSION) +
              " this scorer was built with";
  });
  return c;
}

constexpr CUpti_ExternalCorrelationKind kTagKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
constexpr size_t kBufferBytes = 4u << 20;

// The activity kinds recorded. The API kinds are there because CUPTI links
// a pushed tag to the API call's record, whose correlation id the work it
// launched carries; the API records themselves are not kept.
const CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

// What CUPTI's worker thread hands over, guarded by `mutex`.
struct Collected {
  std::mutex mutex;
  std::vector<TraceRecord> records;
  std::vector<uint32_t> correlation;              // records[i]'s correlation id
  std::unordered_map<uint32_t, uint64_t> tag_of;  // correlation id -> tag
};
Collected* g_collected = nullptr;
std::atomic<bool> g_active{false};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // CUPTI wants 8-byte alignment.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

template <class R>
void keep(Collected& c, TraceRecord::Kind kind, const R* r, std::string name) {
  TraceRecord t;
  t.kind = kind;
  t.stream = r->streamId;
  t.start_ns = r->start;
  t.end_ns = r->end;
  t.name = std::move(name);
  c.records.push_back(std::move(t));
  c.correlation.push_back(r->correlationId);
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Collected* c = g_collected;
  if (c && valid > 0) {
    std::lock_guard<std::mutex> lock(c->mutex);
    CUpti_Activity* a = nullptr;
    while (cupti().next_record(buffer, valid, &a) == CUPTI_SUCCESS) {
      switch (a->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(a);
          keep(*c, TraceRecord::kernel, k, k->name ? k->name : "?");
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY:
          keep(*c, TraceRecord::copy, reinterpret_cast<const CUpti_ActivityMemcpy6*>(a), "copy");
          break;
        case CUPTI_ACTIVITY_KIND_MEMSET:
          keep(*c, TraceRecord::set, reinterpret_cast<const CUpti_ActivityMemset4*>(a), "set");
          break;
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
          const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(a);
          if (e->externalKind == kTagKind) c->tag_of[e->correlationId] = e->externalId;
          break;
        }
        default:
          break;
      }
    }
  }
  std::free(buffer);
}

void check(const Cupti& c, CUptiResult r, const char* what) {
  if (r != CUPTI_SUCCESS) throw TraceUnavailable(c.error(what, r));
}

}  // namespace

KernelTrace::KernelTrace() {
  const Cupti& c = cupti();
  if (!c.why.empty()) throw TraceUnavailable(c.why);
  if (g_active.exchange(true)) throw TraceUnavailable("a kernel trace is already recording in this process");
  g_collected = new Collected;
  try {
    check(c, c.register_callbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    for (CUpti_ActivityKind k : kKinds) check(c, c.enable(k), "cuptiActivityEnable");
  } catch (...) {
    for (CUpti_ActivityKind k : kKinds) c.disable(k);
    delete g_collected;
    g_collected = nullptr;
    g_active = false;
    throw;
  }
}

KernelTrace::~KernelTrace() {
  const Cupti& c = cupti();
  for (CUpti_ActivityKind k : kKinds) c.disable(k);
  c.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  // CUPTI may still hold a buffer it completes later: the collector stays.
  g_active = false;
}

void KernelTrace::tag(uint64_t t) {
  check(cupti(), cupti().push_id(kTagKind, t), "cuptiActivityPushExternalCorrelationId");
}

void KernelTrace::untag() {
  uint64_t last = 0;
  check(cupti(), cupti().pop_id(kTagKind, &last), "cuptiActivityPopExternalCorrelationId");
}

std::vector<TraceRecord> KernelTrace::take() {
  check(cupti(), cupti().flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  std::lock_guard<std::mutex> lock(g_collected->mutex);
  std::vector<TraceRecord> out;
  out.swap(g_collected->records);
  for (size_t i = 0; i < out.size(); ++i) {
    // A tag's record comes before the API record it belongs to, and that
    // before the work the call launched completes.
    const auto it = g_collected->tag_of.find(g_collected->correlation[i]);
    if (it != g_collected->tag_of.end()) out[i].tag = it->second;
  }
  g_collected->correlation.clear();
  return out;
}

uint32_t KernelTrace::stream_id(cudaStream_t stream) const {
  uint32_t id = 0;
  check(cupti(), cupti().stream_id(nullptr, reinterpret_cast<CUstream>(stream), 0, &id), "cuptiGetStreamIdEx");
  return id;
}

uint64_t KernelTrace::now_ns() const {
  uint64_t t = 0;
  check(cupti(), cupti().timestamp(&t), "cuptiGetTimestamp");
  return t;
}

CallTrace trace_of_call(const std::vector<TraceRecord>& records, uint64_t tag) {
  CallTrace c;
  for (const TraceRecord& r : records) {
    if (r.tag != tag) continue;
    if (c.records++ == 0) {
      c.first_start_ns = r.start_ns;
      c.last_end_ns = r.end_ns;
    }
    c.first_start_ns = std::min(c.first_start_ns, r.start_ns);
    c.last_end_ns = std::max(c.last_end_ns, r.end_ns);
    if (r.kind == TraceRecord::kernel) c.kernel_us += double(r.end_ns - r.start_ns) * 1e-3;
  }
  if (c.records) c.span_us = double(c.last_end_ns - c.first_start_ns) * 1e-3;
  return c;
}

std::vector<TraceRecord> foreign_records(const std::vector<TraceRecord>& records, const std::vector<uint64_t>& allowed,
                                         uint64_t from_ns, uint64_t to_ns) {
  std::vector<TraceRecord> out;
  for (const TraceRecord& r : records) {
    if (r.end_ns <= from_ns || r.start_ns >= to_ns) continue;
    if (r.tag && std::find(allowed.begin(), allowed.end(), r.tag) != allowed.end()) continue;
    out.push_back(r);
  }
  return out;
}

std::vector<TraceRecord> off_stream_records(const std::vector<TraceRecord>& records, uint64_t tag, uint32_t stream) {
  std::vector<TraceRecord> out;
  for (const TraceRecord& r : records)
    if (r.tag == tag && r.stream != stream) out.push_back(r);
  return out;
}

std::string describe(const TraceRecord& r, uint64_t from_ns, uint64_t to_ns) {
  const uint64_t lo = std::max(r.start_ns, from_ns), hi = std::min(r.end_ns, to_ns);
  const double inside_us = hi > lo ? double(hi - lo) * 1e-3 : 0;
  const char* what = r.kind == TraceRecord::kernel ? "kernel" : r.kind == TraceRecord::copy ? "copy" : "set";
  std::string name = r.kind == TraceRecord::kernel ? " '" + r.name.substr(0, 80) + "'" : "";
  char b[160];
  std::snprintf(b, sizeof b, " on stream %u (%.1f us, %.1f us of it inside the window)", r.stream,
                double(r.end_ns - r.start_ns) * 1e-3, inside_us);
  return what + name + b;
}

}  // namespace scorer
