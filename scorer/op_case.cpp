#include "scorer/op_case.h"

#include "scorer/device_buffers.h"

namespace scorer {

std::unique_ptr<OpCase> make_op_case(const Shape& s, int sets, uint64_t seed, const Candidate& cand,
                                     cudaStream_t stream, const std::string& baseline) {
  switch (s.op) {
    case Op::pooler:
      return make_pooler_case(s, sets, seed, cand, stream);
    case Op::dense:
      return make_dense_case(s, sets, seed, cand, stream);
    case Op::router:
      return make_router_case(s, sets, seed, cand, stream);
    case Op::moe_w4a16:
      return make_moe_case(s, sets, seed, cand, stream, baseline);
  }
  throw std::logic_error("unknown op");
}

void require_guards(CheckResult& r, bool intact, const char* output_name) {
  if (intact) return;
  if (r.ok) r.reason = std::string("wrote outside its output: the guard region around ") + output_name + " changed";
  r.ok = false;
}

std::vector<double> take_reference(const DeviceBuffer& ref_dev, cudaStream_t stream) {
  std::vector<float> r(ref_dev.bytes() / sizeof(float));
  SCORER_CUDA(cudaMemcpyAsync(r.data(), ref_dev.as<float>(), ref_dev.bytes(), cudaMemcpyDeviceToHost, stream));
  SCORER_CUDA(cudaMemsetAsync(ref_dev.as<float>(), 0, ref_dev.bytes(), stream));
  SCORER_CUDA(cudaStreamSynchronize(stream));
  return std::vector<double>(r.begin(), r.end());
}

CheckResult check_bf16_output(const GuardedOutput& out, const std::vector<double>& ref, cudaStream_t stream,
                              const Bf16Tolerance& tol) {
  std::vector<uint16_t> got(out.bytes() / sizeof(uint16_t));
  out.download(got.data(), stream);
  CheckResult r = check_bf16(got.data(), ref.data(), got.size(), tol);
  require_guards(r, out.guards_intact(stream), "out");
  return r;
}

}  // namespace scorer
