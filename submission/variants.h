// Each op's file lists its own variant names ("default" first); variants()
// in submission.h gathers them.
#pragma once

#include <string>
#include <vector>

#include "submission/submission.h"

namespace submission::detail {
std::vector<std::string> pooler_variants();  // pooler.cu
std::vector<std::string> dense_variants();   // dense.cu
std::vector<std::string> router_variants();  // router.cu
std::vector<std::string> moe_variants();     // moe_w4a16.cu
}  // namespace submission::detail
