// The submission's "Valid:" rules as code (submission.h: dims_error), which make_<op> and the
// shapes file both apply.
#include <doctest/doctest.h>

#include "submission/submission.h"

using submission::dims_error;

TEST_CASE("dims_error: the first rule the dims break, by field, or none") {
  CHECK(dims_error(submission::PoolerDims{8, 4096}).field.empty());
  CHECK(dims_error(submission::PoolerDims{8, 12}).why == "must be a multiple of 8 for op pooler (got 12)");
  CHECK(dims_error(submission::PoolerDims{0, 64}).field == "B");
  CHECK(dims_error(submission::DenseDims{32, 4096, 4096}).field.empty());
  CHECK(dims_error(submission::DenseDims{32, 4096, 100}).field == "K");
  CHECK(dims_error(submission::RouterDims{16, 7168, 256, 8}).field.empty());
  CHECK(dims_error(submission::RouterDims{2, 64, 16, 17}).why == "must be at most E (got k=17, E=16)");
  CHECK(dims_error(submission::MoeDims{32, 7168, 2048, 256, 32, 8, 7}).field.empty());
  CHECK(dims_error(submission::MoeDims{32, 7168, 2048, 256, 48, 8, 0}).field == "E_local");
  CHECK(dims_error(submission::MoeDims{32, 7168, 2048, 256, 32, 8, 8}).why ==
        "must be below E_global/E_local = 8 (got 8)");
  CHECK(dims_error(submission::MoeDims{32, 1000, 2048, 256, 32, 8, 0}).field == "H");
}
