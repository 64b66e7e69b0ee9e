// Recorded MoE routings (shapes.toml: routing = "file", trace = "PATH"): a
// text file of one token per line,
//   ID ID ... ID | WEIGHT WEIGHT ... WEIGHT
// k global expert ids (distinct, 0 <= id < E_global) and their k routing
// weights (finite, >= 0), in the recorded order. Blank lines and lines that
// start with '#' are skipped. The shape replays it in windows of M tokens
// (scorer/workload.h), so it must hold at least two windows.
#pragma once

#include <memory>
#include <string>

#include "scorer/shapes.h"

namespace scorer {

// The largest trace read: a trace is a sample, not a dataset.
constexpr size_t kMaxTraceBytes = size_t(64) << 20;

// Reads the trace that shape `s` (dims already parsed) names in the shapes
// file at `shapes_path`, its field 'trace' on `line`. `trace` is relative to
// the shapes file's directory and may not leave it (after symbolic links are
// resolved), and must name a regular file. Throws InputError: about the path,
// naming the shapes file, the line and field 'trace'; about the content,
// naming the trace file, its line and the field ('ids' or 'weights').
std::shared_ptr<const RoutingTrace> load_routing_trace(const std::string& shapes_path, int line,
                                                       const std::string& trace, const Shape& s);

// The same on a trace's text, for tests; `shown_path` is used in messages.
std::shared_ptr<const RoutingTrace> parse_routing_trace(const std::string& text, const std::string& shown_path,
                                                        const Shape& s);

}  // namespace scorer
