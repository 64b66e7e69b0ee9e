// Each op's baselines by name: what `scorer run --baseline OP=NAME` selects
// (the first of an op's list is its default). Op names as the scorer writes
// them: pooler, dense, router, moe_w4a16.
#pragma once

#include <string>
#include <vector>

namespace reference {

struct BaselineInfo {
  const char* name;
  // run() synchronises with the host: the scorer times it without holding its
  // stream (its host launch costs inside its time) and never captures it in a
  // CUDA graph. Every other baseline is timed exactly like the candidate.
  bool synchronizes;
};

// The op's baselines, its default first; throws std::invalid_argument for an
// unknown op.
const std::vector<BaselineInfo>& baselines(const std::string& op);
// The baseline `name` ("default": the first) of op; nullptr when it has none
// of that name.
const BaselineInfo* find_baseline(const std::string& op, const std::string& name);

}  // namespace reference
