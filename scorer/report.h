// The HTML report (`scorer report`): one self-contained page (inline SVG and
// CSS, no external resource, no script) showing a run beside the selected
// best: per shape a bar of its speedup with 95% interval whiskers, shapes
// grouped by regime, on a log axis whose 1.0x line is the baseline; failed
// shapes marked as such; the aggregates in the caption; every number in a
// table below. scripts/screenshot-report renders it to a PNG.
#pragma once

#include <string>

#include "results.h"

namespace scorer {

// `best` may be null (no selected run yet): then only the run is drawn.
// Each bar is an SVG <rect class="bar latest"> or <rect class="bar best">
// with a data-shape attribute naming its shape.
std::string render_report(const RunResult& latest, const RunResult* best);

}  // namespace scorer
