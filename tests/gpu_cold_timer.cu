// The scorer's cold timer (scorer/cold_timer.h): a call the host cannot
// enqueue behind the stream hold must void its time, not report it.
#include <doctest/doctest.h>

#include <stdexcept>

#include "scorer/cold_timer.h"
#include "tests/gpu_test_util.h"

TEST_CASE("the cold timer refuses a call that waits on its held stream from the host") {
  cudaStream_t s = nullptr;
  GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  {
    scorer::ColdTimer timer(s);
    const double empty = timer.time_us([] {});
    CHECK(empty >= 0);
    CHECK(empty < 1000);
    // The host waits for the blocking kernel, which waits for the host: the
    // hold runs out and the time (near zero) must not be used.
    CHECK_THROWS_WITH_AS(timer.time_us([&] { cudaStreamSynchronize(s); }),
                         doctest::Contains("stream hold"), std::runtime_error);
    // The timer is usable again afterwards.
    CHECK(timer.time_us([] {}) < 1000);
  }
  GT_CUDA(cudaStreamDestroy(s));
}
