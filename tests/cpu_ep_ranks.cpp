// dev/shapes/ep_ranks.toml: the team's measurement set of expert-parallel ranks with few local
// routes (perf log round 100). It must stay what it says it is: every shape a rank holding an
// eighth of the experts or fewer at M <= 32, and the "none" shapes a rank that no route reaches.
// Run from the repository root.
#include <doctest/doctest.h>

#include <string>

#include "scorer/shapes.h"

TEST_CASE("dev/shapes/ep_ranks.toml: ranks with an eighth of the experts or fewer, M <= 32") {
  const scorer::ShapesFile f = scorer::load_shapes("dev/shapes/ep_ranks.toml");
  REQUIRE(f.shapes.size() >= 10);
  int none = 0;
  for (const scorer::Shape& s : f.shapes) {
    CAPTURE(s.name);
    CHECK(s.op == scorer::Op::moe_w4a16);
    CHECK(s.M <= 32);
    CHECK(8 * s.E_local <= s.E_global);
    if (s.name.find("_none_") == std::string::npos) continue;
    ++none;
    // No route of the replayed trace lands on this rank's experts.
    REQUIRE(s.routing.kind == scorer::RoutingKind::file);
    REQUIRE(bool(s.routing.trace));
    const int lo = s.ep_rank * s.E_local, hi = lo + s.E_local;
    int local = 0;
    for (int id : s.routing.trace->ids) local += id >= lo && id < hi;
    CHECK(local == 0);
    CHECK(s.routing.trace->tokens() >= 2 * s.M);
  }
  CHECK(none >= 1);
}
