// Recorded baselines: the shipped file covers the public shapes, apply_recorded
// picks eager or graph times by the run's mode, and bad files give one line
// naming the file, the line and the field.
#include <doctest/doctest.h>

#include <random>
#include <set>

#include "scorer/recorded.h"
#include "scorer/shapes.h"
#include "scorer/stats.h"

using namespace scorer;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_recorded(text, "rec.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("recorded: the shipped H200 file has both times for every public shape but those not measured") {
  Recorded rec = load_recorded("baselines/h200-serving-stack.toml");
  ShapesFile shapes = load_shapes("shapes.toml");
  CHECK(rec.gpu == "NVIDIA H200");
  CHECK(rec.source.find("H200") != std::string::npos);
  std::set<std::string> names;
  for (const Shape& s : shapes.shapes) {
    names.insert(s.name);
    // rank 5, and the shapes added with the zipf and trace routings after the measurement
    const std::set<std::string> unmeasured = {"moe_dsv3ep8r5_m32", "moe_dsv3ep8_zipf_m32", "moe_mixtral_hot_m64",
                                              "moe_dsv3ep8_trace_m32"};
    const bool measured = !unmeasured.count(s.name);
    CHECK_MESSAGE(rec.us.count(s.name) == measured, s.name);
    CHECK_MESSAGE(rec.graph_us.count(s.name) == measured, s.name);
  }
  for (const auto& [name, us] : rec.us) {
    CHECK_MESSAGE(names.count(name), name);
    CHECK(us > 3);  // nothing on this GPU takes less than one launch
    // graph replay saves launch overhead but never most of the time
    CHECK(rec.graph_us.at(name) > 0.75 * us);
    CHECK(rec.graph_us.at(name) < 1.1 * us);
  }
  CHECK(rec.us.at("dense_m32_qkv") == 23.0);
  CHECK(rec.graph_us.at("moe_mixtral_m64") == 2013.2);
}

TEST_CASE("recorded: apply_recorded takes eager times, or graph times in graph mode") {
  Recorded rec =
      parse_recorded("source = \"bench\"\ngpu = \"G\"\n[us]\na = 50.0\nb = 20\n[graph_us]\na = 40.0\n", "rec.toml");
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> u(5, 15);
  RunResult run;
  for (const char* name : {"a", "b", "c"}) {
    ShapeResult r;
    r.shape.name = name;
    r.shape.regime = "r";
    scorer::ReplicateResult& rep = r.replicates.emplace_back();
    for (int i = 0; i < 9; ++i) {
      rep.baseline_us.push_back(u(rng));
      rep.candidate_us.push_back(u(rng));
    }
    run.shapes.push_back(r);
  }
  run.meta.mode = "events";
  apply_recorded(run, rec);
  CHECK(run.shapes[0].recorded_us == 50.0);
  CHECK(run.shapes[1].recorded_us == 20.0);
  CHECK(run.shapes[2].recorded_us == 0);
  CHECK(run.recorded_source == "bench");
  compute_statistics(run);
  CHECK(run.shapes[0].recorded_speedup == doctest::Approx(50.0 / run.shapes[0].candidate_median_us));

  run.meta.mode = "graph";
  apply_recorded(run, rec);
  CHECK(run.shapes[0].recorded_us == 40.0);
  CHECK(run.shapes[1].recorded_us == 0);
}

TEST_CASE("recorded: bad files name the file, the line and the field") {
  const std::string head = "source = \"bench\"\ngpu = \"G\"\n";
  CHECK(error_of("gpu = \"G\"\n[us]\na = 1.0\n") == "rec.toml:1: field 'source': missing");
  CHECK(error_of("source = \"s\"\n[us]\na = 1.0\n") == "rec.toml:1: field 'gpu': missing");
  CHECK(error_of(head) == "rec.toml:1: field 'us': missing");
  CHECK(error_of(head + "[us]\na = 1.0\nb = \"2.0\"\n") ==
        "rec.toml:5: field 'us.b': expected a number of µs, got a string");
  CHECK(error_of(head + "[us]\na = 1.0\n[graph_us]\na = -3\n") ==
        "rec.toml:6: field 'graph_us.a': must be > 0 (got -3.000000)");
  CHECK(error_of("source = 7\ngpu = \"G\"\n[us]\n") == "rec.toml:1: field 'source': expected a string, got an integer");
  CHECK(error_of(head + "us = 5\n") == "rec.toml:3: field 'us': expected a table of shape times, got an integer");
  CHECK(error_of(head + "graph-us = {}\n[us]\n") ==
        "rec.toml:3: field 'graph-us': unknown field (expected source, gpu, us, graph_us)");
  const std::string syntax = error_of(head + "[us]\na = \n");
  CHECK(syntax.rfind("rec.toml:4: ", 0) == 0);
  for (const std::string& e : {syntax, error_of(head)}) CHECK(e.find('\n') == std::string::npos);
  CHECK(error_of(head + "[us]\na = 1.5\n").empty());

  try {
    load_recorded("no/such/file.toml");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).rfind("no/such/file.toml:", 0) == 0);
  }
}

TEST_CASE("recorded: a name of no shape is warned about; the times apply only on their GPU") {
  const Recorded rec = parse_recorded(
      "source = \"bench\"\ngpu = \"NVIDIA H200\"\n[us]\ndense_m32_qkv = 20.0\ndense_m32_qvk = 21.0\n"
      "[graph_us]\nrouter_t1_e128 = 5.0\n",
      "rec.toml");
  ShapesFile shapes;
  shapes.path = "s.toml";
  shapes.shapes.resize(1);
  shapes.shapes[0].name = "dense_m32_qkv";
  CHECK(recorded_unknown_names(rec, shapes) ==
        std::vector<std::string>{
            "rec.toml:7: field 'graph_us.router_t1_e128': no shape of s.toml has this name; its time is not used",
            "rec.toml:5: field 'us.dense_m32_qvk': no shape of s.toml has this name; its time is not used"});
  CHECK(recorded_unknown_names(load_recorded("baselines/h200-serving-stack.toml"), load_shapes("shapes.toml")).empty());

  check_recorded_gpu(rec, "NVIDIA H200");
  CHECK_THROWS_WITH_AS(check_recorded_gpu(rec, "NVIDIA H100 80GB HBM3"),
                       "rec.toml:2: field 'gpu': the times were recorded on NVIDIA H200, this run is on NVIDIA H100 "
                       "80GB HBM3: they do not apply here",
                       InputError);
  CHECK_THROWS_WITH_AS(load_recorded("baselines"), "baselines: cannot read: Is a directory", InputError);
}
