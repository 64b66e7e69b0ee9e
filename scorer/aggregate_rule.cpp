#include "scorer/aggregate_rule.h"

#include <cmath>
#include <stdexcept>

namespace scorer {
namespace {

// The geometric mean over `members` (shape indices), failed ones at the
// fixed speedup when counted; undefined when no member counts.
LinearFigure mean_of(const std::vector<size_t>& members, const std::vector<ShapeState>& state,
                     const ScoringRule& rule) {
  LinearFigure f;
  f.coef.assign(state.size(), 0.0);
  const bool count_failed = rule.failed_speedup > 0;
  std::vector<size_t> scored;
  int failed = 0;
  for (size_t s : members) {
    if (state[s] == ShapeState::scored) scored.push_back(s);
    failed += state[s] == ShapeState::failed && count_failed;
  }
  const double n = double(scored.size()) + failed;
  if (n == 0) return f;
  f.defined = true;
  for (size_t s : scored) f.coef[s] = 1 / n;
  if (failed) f.constant = failed * std::log(rule.failed_speedup) / n;
  return f;
}

double weight_of(const ScoringRule& rule, const std::string& regime) {
  if (rule.regime_weights.empty()) return 1;
  const auto it = rule.regime_weights.find(regime);
  if (it == rule.regime_weights.end())
    throw std::invalid_argument("scoring rule: no weight for regime '" + regime + "'");
  if (!(it->second >= 0 && std::isfinite(it->second)))
    throw std::invalid_argument("scoring rule: the weight of regime '" + regime + "' is not a finite value >= 0");
  return it->second;
}

}  // namespace

const ScoringRule& rule_of(const RunMeta& meta) { return meta.scoring; }

std::string rule_name(const ScoringRule& rule, bool declared) {
  const bool regimes = (rule.aggregate == ScoringRule::Aggregate::regimes) == declared;
  return regimes ? (rule.regime_weights.empty() ? "over regimes" : "over regimes, weighted") : "over shapes";
}

RunFigures run_figures(const std::vector<int>& regime_of, const std::vector<std::string>& regime_names,
                       const std::vector<ShapeState>& state, const ScoringRule& rule) {
  const size_t n = state.size();
  if (regime_of.size() != n) throw std::invalid_argument("run_figures: one regime per shape");
  std::vector<std::vector<size_t>> members(regime_names.size());
  std::vector<size_t> all;
  bool any_failed = false;
  for (size_t s = 0; s < n; ++s) {
    if (regime_of[s] < 0 || size_t(regime_of[s]) >= regime_names.size())
      throw std::invalid_argument("run_figures: regime index out of range");
    members[regime_of[s]].push_back(s);
    all.push_back(s);
    any_failed |= state[s] == ShapeState::failed;
  }

  RunFigures out;
  for (const auto& m : members) out.regimes.push_back(mean_of(m, state, rule));
  out.over_shapes.coef.assign(n, 0.0);
  out.over_regimes.coef.assign(n, 0.0);
  if (any_failed && !(rule.failed_speedup > 0)) return out;
  out.over_shapes = mean_of(all, state, rule);

  double total = 0;
  std::vector<double> w(regime_names.size(), 0.0);
  for (size_t g = 0; g < w.size(); ++g) {
    w[g] = weight_of(rule, regime_names[g]);
    if (out.regimes[g].defined) total += w[g];
  }
  if (!(total > 0)) return out;
  LinearFigure& f = out.over_regimes;
  f.defined = true;
  for (size_t g = 0; g < w.size(); ++g) {
    if (!out.regimes[g].defined || w[g] == 0) continue;
    for (size_t s = 0; s < n; ++s) f.coef[s] += w[g] / total * out.regimes[g].coef[s];
    f.constant += w[g] / total * out.regimes[g].constant;
  }
  return out;
}

}  // namespace scorer
