// Shards (shard.h): every (shape, replicate) in exactly one shard for any
// shard count, the same answer each time, loads balanced; --shard parsing.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "scorer/commands.h"
#include "scorer/dispatch.h"
#include "scorer/exit_codes.h"
#include "scorer/shard.h"
#include "tests/command_output.h"

namespace {

std::vector<scorer::Shape> shapes_of(int count) {
  std::vector<scorer::Shape> out;
  for (int i = 0; i < count; ++i) {
    scorer::Shape s;
    s.name = "s" + std::to_string(i);
    s.regime = "r";
    s.op = scorer::Op::dense;
    s.M = 32, s.N = 512 * (1 + (i * 7) % 11), s.K = 4096;
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("shard: every (shape, replicate) lands in exactly one shard, for N = 1..16") {
  for (int count : {1, 2, 5, 13, 24})
    for (int replicates : {1, 3}) {
      const auto shapes = shapes_of(count);
      std::vector<double> seconds;
      for (const auto& s : shapes) seconds.push_back(scorer::estimated_seconds(s, 9));
      std::vector<scorer::WorkItem> work = scorer::make_work_list(shapes, replicates, 9);
      scorer::longest_first(work, seconds);
      const double longest = *std::max_element(seconds.begin(), seconds.end());
      for (int n = 1; n <= 16; ++n) {
        CAPTURE(count);
        CAPTURE(replicates);
        CAPTURE(n);
        std::map<std::pair<size_t, int>, int> seen;
        std::vector<double> load;
        for (int i = 1; i <= n; ++i) {
          const auto share = scorer::shard_work(work, seconds, {i, n});
          CHECK(share.size() == scorer::shard_work(work, seconds, {i, n}).size());  // deterministic
          double l = 0;
          for (const auto& w : share) {
            ++seen[{w.shape, w.replicate}];
            l += seconds[w.shape];
            CHECK(w.seed == scorer::replicate_seed(9, shapes[w.shape], w.replicate));
          }
          load.push_back(l);
          // As many shards as units or fewer: none is idle.
          if (int(work.size()) >= n) CHECK(!share.empty());
          // Within a shard the rounds stay in order.
          for (size_t k = 1; k < share.size(); ++k) CHECK(share[k - 1].replicate <= share[k].replicate);
        }
        CHECK(seen.size() == work.size());
        for (const auto& [unit, times] : seen) CHECK(times == 1);
        const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
        if (int(work.size()) >= n) CHECK(*hi - *lo <= longest + 1e-9);
      }
    }
  // The whole run is shard 0 of 0.
  const auto shapes = shapes_of(3);
  CHECK(scorer::shard_work(scorer::make_work_list(shapes, 2, 1), {1, 2, 3}, {}).size() == 6);
}

TEST_CASE("shard: --shard I/N and its default file") {
  const scorer::ShardSpec s = scorer::parse_shard("2/5");
  CHECK(s.index == 2);
  CHECK(s.count == 5);
  CHECK(scorer::default_shard_path(s) == "results/shard-2-of-5.json");
  for (const char* bad : {"", "1", "0/2", "3/2", "1/0", "a/2", "1/2/3", "-1/2", "1/100000", "/2", "1/"})
    CHECK_THROWS_AS(scorer::parse_shard(bad), std::invalid_argument);
}

TEST_CASE("shard: scorer run refuses a bad --shard or --gpus with one line, before any GPU work") {
  using test_util::call_command;
  auto o = call_command(scorer::run_main, {"--shard", "3/2"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: --shard: I must be 1 to N, got '3/2'\n");
  o = call_command(scorer::run_main, {"--gpus", "none"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: --gpus: expected all, a count or a list of device ordinals (0,1,...), got 'none'\n");
  o = call_command(scorer::check_main, {"--shard", "1/2"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: unexpected argument '--shard' (see scorer check --help)\n");
  o = call_command(scorer::run_main, {"--help"});
  CHECK(o.rc == scorer::kExitOk);
  CHECK(o.out.find("--shard I/N") != std::string::npos);
}
