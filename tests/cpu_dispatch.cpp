// Scheduling over GPUs (dispatch.h) and the choice of GPUs (gpus.h): the
// order of the work, lanes that score side by side, the trimming of a failed
// shape's later replicates, --gpus parsing and the 3% outlier flag.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "scorer/dispatch.h"
#include "scorer/gpus.h"

using scorer::ShapeResult;
using scorer::WorkItem;

namespace {

scorer::Shape shape(const std::string& name, int n) {
  scorer::Shape s;
  s.name = name;
  s.regime = "r";
  s.op = scorer::Op::dense;
  s.M = 32, s.N = n, s.K = 4096;
  return s;
}

ShapeResult item(const scorer::Shape& s, int index, const std::string& status) {
  ShapeResult r;
  r.shape = s;
  r.status = status;
  scorer::ReplicateResult& p = r.replicates.emplace_back();
  p.index = index;
  p.status = status;
  return r;
}

}  // namespace

TEST_CASE("dispatch: longest shapes first within each round, rounds in order") {
  const std::vector<scorer::Shape> shapes = {shape("small", 1024), shape("big", 65536), shape("mid", 8192)};
  std::vector<double> seconds;
  for (const auto& s : shapes) seconds.push_back(scorer::estimated_seconds(s, 1));
  CHECK(seconds[1] > seconds[2]);
  CHECK(seconds[2] > seconds[0]);
  std::vector<WorkItem> work = scorer::make_work_list(shapes, 3, 1);
  scorer::longest_first(work, seconds);
  REQUIRE(work.size() == 9);
  for (size_t k = 0; k < work.size(); ++k) {
    CHECK(work[k].replicate == int(k / 3) + 1);
    CHECK(work[k].shape == std::vector<size_t>{1, 2, 0}[k % 3]);
  }
}

TEST_CASE("dispatch: lanes score side by side, every item once, a failed shape's later replicates dropped") {
  std::vector<scorer::Shape> shapes;
  for (int i = 0; i < 7; ++i) shapes.push_back(shape("s" + std::to_string(i), 1024 * (i + 1)));
  const std::vector<WorkItem> work = scorer::make_work_list(shapes, 3, 5);
  std::atomic<int> running{0}, most{0};
  std::mutex m;
  std::multiset<std::pair<size_t, int>> scored;
  std::set<size_t> lanes_used;
  const auto score = [&](const WorkItem& w, size_t, size_t lane) {
    const int now = ++running;
    for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    --running;
    std::lock_guard<std::mutex> lock(m);
    scored.insert({w.shape, w.replicate});
    lanes_used.insert(lane);
    // Shape 2 fails in replicate 1: its later replicates are not scored.
    return item(shapes[w.shape], w.replicate, w.shape == 2 && w.replicate == 1 ? "incorrect" : "ok");
  };
  const auto items = scorer::score_on_lanes(shapes.size(), work, 4, score, [] { return false; });
  CHECK(most.load() > 1);
  CHECK(lanes_used.size() > 1);
  for (const auto& u : scored) CHECK(scored.count(u) == 1);
  REQUIRE(items.size() == shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    REQUIRE(items[i].size() == (i == 2 ? 1u : 3u));
    for (size_t k = 0; k < items[i].size(); ++k) CHECK(items[i][k].replicates[0].index == int(k) + 1);
  }
  CHECK(items[2][0].status == "incorrect");
}

TEST_CASE("dispatch: a stop ends every lane and drops the items that ended after it") {
  std::vector<scorer::Shape> shapes = {shape("a", 1024), shape("b", 2048)};
  const std::vector<WorkItem> work = scorer::make_work_list(shapes, 5, 5);
  std::atomic<int> calls{0};
  const auto score = [&](const WorkItem& w, size_t, size_t) {
    ++calls;
    return item(shapes[w.shape], w.replicate, "ok");
  };
  const auto items = scorer::score_on_lanes(shapes.size(), work, 3, score, [&] { return calls.load() >= 4; });
  size_t kept = 0;
  for (const auto& it : items) kept += it.size();
  CHECK(kept < 4);
  CHECK(calls.load() < int(work.size()));
}

TEST_CASE("dispatch: trimming keeps replicates up to the first that failed, in order") {
  const scorer::Shape s = shape("a", 1024);
  std::vector<ShapeResult> items = {item(s, 3, "ok"), item(s, 2, "crash"), item(s, 1, "ok")};
  scorer::trim_after_failure(items);
  REQUIRE(items.size() == 2);
  CHECK(items[0].replicates[0].index == 1);
  CHECK(items[1].status == "crash");
}

TEST_CASE("gpus: --gpus all, a count or a list of ordinals") {
  using scorer::parse_gpu_choice;
  std::string err;
  CHECK(scorer::chosen_devices(scorer::GpuChoice{}, 8, &err) == std::vector<int>{0});
  CHECK(scorer::chosen_devices(parse_gpu_choice("all"), 4, &err) == std::vector<int>{0, 1, 2, 3});
  CHECK(scorer::chosen_devices(parse_gpu_choice("2"), 4, &err) == std::vector<int>{0, 1});
  CHECK(scorer::chosen_devices(parse_gpu_choice("3,1"), 4, &err) == std::vector<int>{3, 1});
  CHECK(err.empty());
  CHECK(scorer::chosen_devices(parse_gpu_choice("5"), 4, &err).empty());
  CHECK(err == "5 GPUs asked for, 4 found");
  CHECK(scorer::chosen_devices(parse_gpu_choice("0,4"), 4, &err).empty());
  CHECK(err == "device 4 asked for, 4 found (0 to 3)");
  for (const char* bad : {"", "none", "0", "-1", "1,,2", ",1", "1,", "2,2", "1.5"})
    CHECK_THROWS_AS(parse_gpu_choice(bad), std::invalid_argument);
}

TEST_CASE("gpus: a GPU whose copy bandwidth or empty launch differs by more than 3% is flagged") {
  auto gpu = [](int device, double gbps, double launch_us) {
    scorer::GpuInfo g;
    g.device = device;
    g.host = "node1";
    g.uuid = "GPU-" + std::to_string(device);
    g.copy_gbps = gbps;
    g.empty_launch_us = launch_us;
    return g;
  };
  CHECK(scorer::gpu_outliers({gpu(0, 4000, 2.0)}).empty());
  CHECK(scorer::gpu_outliers({gpu(0, 4000, 2.0), gpu(1, 3950, 2.03), gpu(2, 4040, 1.98)}).empty());
  const auto slow = scorer::gpu_outliers({gpu(0, 4000, 2.0), gpu(1, 3800, 2.0), gpu(2, 4010, 2.0), gpu(3, 3990, 2.0)});
  REQUIRE(slow.size() == 1);
  CHECK(slow[0] == "GPU 1 (node1, device 1, GPU-1): copy bandwidth 3800 GB/s is 4.9% below the GPUs' median 3995 GB/s");
  const auto launch = scorer::gpu_outliers({gpu(0, 4000, 2.0), gpu(1, 4000, 2.2), gpu(2, 4000, 2.0)});
  REQUIRE(launch.size() == 1);
  CHECK(launch[0].find("GPU 1 ") == 0);
  CHECK(launch[0].find("empty launch 2.2 us is 10.0% above the GPUs' median 2 us") != std::string::npos);
  // Of two, each differs from the other.
  CHECK(scorer::gpu_outliers({gpu(0, 4000, 2.0), gpu(1, 3860, 2.0)}).size() == 2);
  CHECK(scorer::gpu_outliers({gpu(0, 4000, 2.0), gpu(1, 3900, 2.0)}).empty());
}
