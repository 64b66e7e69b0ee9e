// The GPU suites. Without a usable CUDA device every case is skipped with one
// line saying why, so that CI machines without a GPU still pass.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "tests/gpu_test_util.h"

int bad_kernel_child_main(const std::string& scenario, const std::string& shape);  // gpu_bad_kernels.cpp

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--bad-kernel-child") == 0) return bad_kernel_child_main(argv[2], argv[3]);
  doctest::Context ctx(argc, argv);
  std::string why;
  if (!gpu_test::gpu_available(&why)) {
    std::printf("GPU suites skipped: %s\n", why.c_str());
    ctx.setOption("test-case-exclude", "*");
  }
  return ctx.run();
}
