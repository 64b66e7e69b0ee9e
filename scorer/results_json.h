// Results files as JSON (nlohmann-json), schema in the README. Reading is
// strict: a malformed, truncated or incomplete file gives an InputError naming
// the file, the line and the field. Writing is atomic (a temporary file renamed
// over the target), so a crash never leaves half a file.
#pragma once

// The forward declarations: most includers load and save runs and never touch
// a json value, and the full header is a third of their compile time.
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "results.h"

namespace scorer {

nlohmann::json results_to_json(const RunResult& run);
// `path` names the source in error messages; `text` lets errors give a line.
// The derived figures (ShapeResult's medians, speedups and intervals, the
// regimes, aggregates and counts) are recomputed from the trials with the
// run's seed (compute_statistics), never trusted from the file.
RunResult results_from_json(const nlohmann::json& j, const std::string& path, const std::string& text = "");
RunResult load_results(const std::string& path);  // throws InputError
// The same on a file's bytes already read (`path` only names it in messages):
// a caller that copies the file checks the very bytes it copies.
RunResult parse_results(const std::string& text, const std::string& path);
void save_results(const RunResult& run, const std::string& path);  // atomic; creates directories

// Shape <-> JSON, shared with the scorer's child processes.
nlohmann::json shape_to_json(const Shape& s);
Shape shape_from_json(const nlohmann::json& j, const std::string& path);
nlohmann::json shape_result_to_json(const ShapeResult& r);
// A shape process's result: its replicates keep their run-wide index (replicate 2 alone is
// valid here, while a results file numbers a shape's replicates 1, 2, ...).
ShapeResult shape_result_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace scorer
