// How a run's shapes make its regime figures and its aggregate, as the
// scoring rule of the shapes file declares (issue 34's [scoring] table):
//
// - a regime: the geometric mean over its scored shapes;
// - the aggregate over shapes: the geometric mean over every scored shape;
// - the aggregate over regimes: the weighted geometric mean of the regimes'
//   figures (weights per regime name; none given: equal weights). The weights
//   belong to this rule only: the aggregate over shapes counts each shape once.
// A failed shape either voids both aggregates (failed_speedup == 0, the
// default: the run has a failure, not a score; a regime then shows the
// geometric mean of its scored shapes beside its failure count) or counts as
// the fixed speedup failed_speedup in its regime and in both aggregates.
//
// Each figure is linear in the shapes' log values (a LinearFigure), which is
// what lets intervals.h form it per replicate.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "scorer/intervals.h"

namespace scorer {

enum class ShapeState {
  scored,   // has timed trials
  failed,   // status other than "ok"
  untimed,  // ok without trials (`scorer check`): in no figure, voids nothing
};

struct RunFigures {
  std::vector<LinearFigure> regimes;  // per regime index
  LinearFigure over_shapes, over_regimes;
  const LinearFigure& declared(const ScoringRule& rule) const {
    return rule.aggregate == ScoringRule::Aggregate::regimes ? over_regimes : over_shapes;
  }
  const LinearFigure& other(const ScoringRule& rule) const {
    return rule.aggregate == ScoringRule::Aggregate::regimes ? over_shapes : over_regimes;
  }
};

// The rule a run was scored by: its shapes file's [scoring] table, as the
// results file records it (the default where the file declares none).
const ScoringRule& rule_of(const RunMeta& meta);
// "over shapes" or "over regimes" (with "weighted" when weights are given).
std::string rule_name(const ScoringRule& rule, bool declared);

// regime_of[s] indexes regime_names. Throws std::invalid_argument when the
// rule gives weights but none for a regime of the run, or a weight that is
// negative or not finite.
RunFigures run_figures(const std::vector<int>& regime_of, const std::vector<std::string>& regime_names,
                       const std::vector<ShapeState>& state, const ScoringRule& rule);

}  // namespace scorer
