// Results files that are bad: each names the file, the line and the field;
// forged numbers are bounded; the error locator is linear however deep the
// nesting.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "scorer/results_json.h"
#include "scorer/stats.h"
#include "tests/results_fixture.h"

using namespace results_test;

TEST_CASE("results: bad files name the file, the line and the field") {
  TempDir dir;
  const std::string path = dir.file("latest.json");
  const json good = scorer::results_to_json(filled_run());
  auto save = [&](const json& j) {
    const std::string text = j.dump(2);
    write_file(path, text);
    return text;
  };

  SUBCASE("missing file") {
    CHECK(load_error(dir.file("best.json")) == dir.file("best.json") + ": cannot read: No such file or directory");
  }
  SUBCASE("truncated") {
    const std::string full = good.dump(2);
    const std::string cut = full.substr(0, full.find("\"candidate_us\"", full.size() / 2) + 20);
    write_file(path, cut);
    const int last_line = 1 + int(std::count(cut.begin(), cut.end(), '\n'));
    const std::string msg = load_error(path);
    CHECK(msg.rfind(path + ":" + std::to_string(last_line) + ": field 'shapes[", 0) == 0);
    CHECK(msg.find("].candidate_us': syntax error while parsing ") != std::string::npos);
    CHECK(msg.find("].replicates[") != std::string::npos);
    CHECK(msg.find("unexpected end of input") != std::string::npos);
  }
  SUBCASE("malformed") {
    std::string text = good.dump(2);
    const size_t at = text.find("\"gpu_name\"");
    text.insert(text.find(',', at), " 7");  // two values for one key
    write_file(path, text);
    const std::string msg = load_error(path);
    CHECK(msg.rfind(path + ":" + std::to_string(line_of(text, "\"gpu_name\"")) +
                        ": field 'meta.gpu_name': syntax error while parsing object",
                    0) == 0);
  }
  SUBCASE("empty") {
    write_file(path, "");
    CHECK(load_error(path).rfind(path + ":1: syntax error while parsing value", 0) == 0);
  }
  SUBCASE("a directory") {
    CHECK(load_error(dir.path.string()) == dir.path.string() + ": cannot read: Is a directory");
  }
  SUBCASE("wrong type") {
    json j = good;
    j["shapes"][1]["replicates"][0]["candidate_us"] = "fast";
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"candidate_us\": \"fast\"")) +
                                  ": field 'shapes[1].replicates[0].candidate_us': expected an array of numbers");
  }
  SUBCASE("wrong type inside an array") {
    json j = good;
    j["shapes"][2]["replicates"][0]["baseline_us"][3] = true;
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"baseline_us\": [", 5)) +
                                  ": field 'shapes[2].replicates[0].baseline_us': expected an array of numbers");
  }
  SUBCASE("an integer field given a fraction") {
    json j = good;
    j["meta"]["sm_count"] = 132.5;
    const std::string text = save(j);
    CHECK(load_error(path) ==
          path + ":" + std::to_string(line_of(text, "\"sm_count\"")) + ": field 'meta.sm_count': expected an integer");
  }
  SUBCASE("missing field: the line of the object that lacks it") {
    json j = good;
    j["shapes"][1]["check"].erase("rel_l2");
    const std::string text = save(j);
    CHECK(load_error(path) ==
          path + ":" + std::to_string(line_of(text, "\"check\": {", 3)) +
              ": field 'shapes[1].check.rel_l2': missing");  // after shapes[0]'s and its 2 replicates'
  }
  SUBCASE("missing top-level field") {
    json j = good;
    j.erase("flags");
    save(j);
    CHECK(load_error(path) == path + ":1: field 'flags': missing");
  }
  SUBCASE("unknown field") {
    json j = good;
    j["regimes"][1]["speedup"]["median"] = 1.0;
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"median\"")) +
                                  ": field 'regimes[1].speedup.median': unknown field");
  }
  SUBCASE("unknown op") {
    json j = good;
    j["shapes"][2]["shape"]["op"] = "conv";
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"op\": \"conv\"")) +
                                  ": field 'shapes[2].shape.op': unknown op 'conv' (expected pooler, dense, router or "
                                  "moe_w4a16)");
  }
  SUBCASE("unknown status") {
    json j = good;
    j["shapes"][0]["status"] = "fine";
    const std::string text = save(j);
    CHECK(load_error(path).rfind(path + ":" + std::to_string(line_of(text, "\"status\": \"fine\"")) +
                                     ": field 'shapes[0].status': unknown status 'fine'",
                                 0) == 0);
  }
  SUBCASE("unsupported schema version") {
    json j = good;
    j["meta"]["schema_version"] = 3;
    j["meta"].erase("gpu_name");  // the version is checked before anything else
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"schema_version\"")) +
                                  ": field 'meta.schema_version': unsupported schema version 3 "
                                  "(this scorer reads versions 1 to 2)");
  }
  SUBCASE("unpaired trials") {
    json j = good;
    j["shapes"][0]["replicates"][1]["candidate_us"].erase(0);
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"candidate_us\"", 1)) +
                                  ": field 'shapes[0].replicates[1].candidate_us': has 4 trials but baseline_us "
                                  "has 5");
  }
  SUBCASE("not an object") {
    write_file(path, "[1, 2]\n");
    CHECK(load_error(path) == path + ":1: field '(top level)': expected an object");
  }
  SUBCASE("a number beyond a double") {
    std::string text = good.dump(2);
    const size_t at = text.find("\"copy_gbps\": ");
    const size_t value = at + std::string("\"copy_gbps\": ").size();
    text.replace(value, text.find(',', value) - value, "1e999");
    write_file(path, text);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"copy_gbps\"")) +
                                  ": field 'meta.copy_gbps': syntax error: number overflow parsing '1e999'");
  }
  SUBCASE("a trial time of 0 or below") {
    json j = good;
    j["shapes"][1]["replicates"][0]["baseline_us"][2] = 0.0;
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"baseline_us\": [", 2)) +
                                  ": field 'shapes[1].replicates[0].baseline_us': trial 3 is 0.0: a time is a "
                                  "number of µs in [0.001, 1e11]");
  }
  SUBCASE("a passing shape without trials") {
    json j = good;
    j["shapes"][1]["replicates"][1]["baseline_us"] = json::array();
    j["shapes"][1]["replicates"][1]["candidate_us"] = json::array();
    j["shapes"][1]["replicates"][1]["candidate_kernel_us"] = json::array();
    j["shapes"][1]["replicates"][1]["candidate_span_us"] = json::array();
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"baseline_us\": []")) +
                                  ": field 'shapes[1].replicates[1].baseline_us': no trials, though the status "
                                  "is ok");
  }
  SUBCASE("a passing shape without replicates") {
    json j = good;
    j["shapes"][0]["replicates"] = json::array();
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"replicates\": []")) +
                                  ": field 'shapes[0].replicates': no replicates, though the status is ok");
  }
  SUBCASE("a passing shape with a failed replicate") {
    json j = good;
    j["shapes"][0]["replicates"][1]["status"] = "crash";
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"status\": \"crash\"")) +
                                  ": field 'shapes[0].replicates[1].status': replicate 2 is 'crash', though the "
                                  "shape's status is ok");
  }
  SUBCASE("replicates out of order") {
    json j = good;
    j["shapes"][1]["replicates"][1]["index"] = 3;
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"index\": 3")) +
                                  ": field 'shapes[1].replicates[1].index': replicate 3 where replicate 2 was "
                                  "expected (replicates are numbered 1, 2, ... in order)");
  }
  SUBCASE("CUPTI figures not one per trial") {
    json j = good;
    j["shapes"][1]["replicates"][0]["candidate_span_us"].erase(0);
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"candidate_span_us\"", 2)) +
                                  ": field 'shapes[1].replicates[0].candidate_span_us': has 5 values but "
                                  "candidate_us has 6 trials (expected one per trial, or none)");
  }
  SUBCASE("a shape twice") {
    json j = good;
    j["shapes"][2]["shape"]["name"] = j["shapes"][0]["shape"]["name"];
    const std::string name = j["shapes"][0]["shape"]["name"].get<std::string>();
    const std::string text = save(j);
    CHECK(load_error(path) == path + ":" + std::to_string(line_of(text, "\"name\": \"" + name + "\"", 1)) +
                                  ": field 'shapes[2].shape.name': duplicate shape '" + name + "' (also shapes[0])");
  }
  SUBCASE("a dim below its minimum") {
    json j = good;
    j["shapes"][0]["shape"]["dims"].begin().value() = -5;
    const std::string text = save(j);
    CHECK(load_error(path).find(": must be at least 1 (got -5)") != std::string::npos);
  }
  SUBCASE("a failed-shape count the shapes do not bear out") {
    json j = good;
    j["shapes_failed"] = -3;
    const std::string text = save(j);
    CHECK(load_error(path).rfind(
              path + ":" + std::to_string(line_of(text, "\"shapes_failed\"")) + ": field 'shapes_failed': -3, but ",
              0) == 0);
  }
}

TEST_CASE("results: a deeply nested file fails fast, in linear time and memory") {
  TempDir dir;
  // 80 KB: a field nested 40000 deep, then a file cut off 80000 deep.
  const std::string deep = "{\"meta\": " + std::string(40000, '[') + std::string(40000, ']') + "}";
  const std::string cut = "{\"meta\": {\"x\": " + std::string(80000, '[');
  for (const std::string& text : {deep, cut}) {
    const std::string path = dir.file("deep.json");
    write_file(path, text);
    const auto start = std::chrono::steady_clock::now();
    const std::string e = load_error(path);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CAPTURE(e.substr(0, 200));
    CHECK(s < 1.0);
    CHECK(e.rfind(path + ":1: field '", 0) == 0);
    CHECK(e.size() < 400);  // the field's path shown by its end, not 80000 characters of it
  }
  CHECK(load_error(dir.file("deep.json")).find("field '...") != std::string::npos);
  write_file(dir.file("deep.json"), deep);
  CHECK(load_error(dir.file("deep.json")) == dir.file("deep.json") + ":1: field 'meta': expected an object");
}

TEST_CASE("results: forged trials are bounded: no time beyond [0.001, 1e11] µs, no array beyond a million") {
  TempDir dir;
  RunResult run = filled_run();
  const std::string path = dir.file("forged.json");
  for (double forged : {1e300, 1e-300, -1.0, 2e11}) {
    CAPTURE(forged);
    run.shapes[1].replicates[0].baseline_us[2] = forged;
    json j = scorer::results_to_json(run);
    write_file(path, j.dump(1));
    CHECK(load_error(path).find("field 'shapes[1].replicates[0].baseline_us': trial 3 is ") != std::string::npos);
  }
  run = filled_run();
  json j = scorer::results_to_json(run);
  j["shapes"][0]["replicates"][0]["candidate_kernel_us"] = std::vector<double>(1000001, 1.0);
  write_file(path, j.dump());
  CHECK(load_error(path).find("holds 1000001 values, more than the 1000000 a results file may hold") !=
        std::string::npos);
}

TEST_CASE("results: strings from a file come back printable, one line whatever they hold") {
  TempDir dir;
  RunResult run = filled_run();
  run.shapes[0].reason = "line one\nline two\x1b[31m";
  run.meta.gpu_name = "H200\r\tx";
  const std::string path = dir.file("ctl.json");
  scorer::save_results(run, path);
  const RunResult back = scorer::load_results(path);
  CHECK(back.shapes[0].reason == "line one\\nline two\\x1b[31m");
  CHECK(back.meta.gpu_name == "H200\\x0d\\x09x");
}
