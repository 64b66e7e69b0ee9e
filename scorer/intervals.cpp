#include "scorer/intervals.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "scorer/student_t.h"

namespace scorer {
namespace {

constexpr double kZ95 = 1.959963984540054;  // the normal's 97.5% quantile

// out[s][k]: the log median of resample k of shape s's first replicate with
// values (empty for a shape without any). Resample k draws every shape in turn.
std::vector<std::vector<double>> bootstrap_log_medians(const std::vector<std::vector<std::vector<double>>>& values,
                                                       const BootstrapOptions& opt) {
  const size_t n = values.size(), resamples = size_t(opt.resamples);
  std::vector<std::vector<double>> out(n);
  std::vector<const std::vector<double>*> first(n, nullptr);  // as summarize() counts replicates
  for (size_t s = 0; s < n; ++s)
    for (const std::vector<double>& r : values[s])
      if (!r.empty()) {
        first[s] = &r;
        out[s].resize(resamples);
        break;
      }
  std::mt19937_64 rng(opt.seed);
  std::vector<double> buf;
  for (size_t k = 0; k < resamples; ++k)
    for (size_t s = 0; s < n; ++s) {
      if (!first[s]) continue;
      const std::vector<double>& x = *first[s];
      buf.resize(x.size());
      for (double& v : buf) v = x[draw(rng, x.size())];
      out[s][k] = std::log(median_inplace(buf));
    }
  return out;
}

// Replicates a figure can use: the fewest any of its shapes has.
int common_replicates(const std::vector<ReplicateSummary>& shapes, const LinearFigure& f) {
  int r = -1;
  for (size_t s = 0; s < shapes.size(); ++s)
    if (f.coef[s] != 0) r = r < 0 ? shapes[s].replicates() : std::min(r, shapes[s].replicates());
  return r;
}

}  // namespace

double LogMedian::variance() const {
  const double sd = half_width() / kZ95;
  return sd * sd;
}

LogMedian log_median_interval_sorted(const std::vector<double>& sorted) {
  if (sorted.empty()) return {NAN, NAN, NAN};
  const double n = double(sorted.size());
  const double center = 0.5 * (n - 1), reach = 0.5 * kZ95 * std::sqrt(n);
  auto at = [&](double rank) { return quantile_sorted(sorted, std::clamp(rank, 0.0, n - 1) / std::max(n - 1, 1.0)); };
  return {std::log(at(center)), std::log(at(center - reach)), std::log(at(center + reach))};
}

LogMedian log_median_interval(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return log_median_interval_sorted(values);
}

ReplicateSummary summarize(const std::vector<std::vector<double>>& per_replicate) {
  ReplicateSummary out;
  for (const std::vector<double>& v : per_replicate) {
    if (v.empty()) continue;
    const LogMedian m = log_median_interval(v);
    out.log_value.push_back(m.log_median);
    out.within_var.push_back(m.variance());
  }
  return out;
}

LinearFigure shape_figure(size_t shape, size_t n_shapes) {
  LinearFigure f;
  f.defined = true;
  f.coef.assign(n_shapes, 0.0);
  f.coef.at(shape) = 1;
  return f;
}

FigureSeries figure_series(const std::vector<ReplicateSummary>& shapes, const LinearFigure& f) {
  if (f.coef.size() != shapes.size()) throw std::invalid_argument("figure_series: one coefficient per shape");
  FigureSeries out;
  const int R = common_replicates(shapes, f);
  if (!f.defined || R == 0) return out;
  if (R < 0) {  // no shape measured: the constant alone (failed shapes at a fixed speedup)
    out.log_value = {f.constant};
    out.within_var = {0};
    return out;
  }
  out.log_value.assign(R, f.constant);
  out.within_var.assign(R, 0.0);
  for (size_t s = 0; s < shapes.size(); ++s) {
    if (f.coef[s] == 0) continue;
    for (int r = 0; r < R; ++r) {
      out.log_value[r] += f.coef[s] * shapes[s].log_value[r];
      out.within_var[r] += f.coef[s] * f.coef[s] * shapes[s].within_var[r];
    }
  }
  return out;
}

LogEstimate replicate_estimate(const FigureSeries& series) {
  LogEstimate e;
  const int R = int(series.log_value.size());
  e.replicates = R;
  if (R == 0) return {NAN, NAN, NAN, 0};
  double sum = 0, within = 0;
  for (int r = 0; r < R; ++r) sum += series.log_value[r], within += series.within_var[r];
  e.mean = sum / R;
  within /= R;
  if (R == 1) {
    e.var = within;
    e.df = kInfiniteDf;
    return e;
  }
  double ss = 0;
  for (double y : series.log_value) ss += (y - e.mean) * (y - e.mean);
  e.df = R - 1;
  // The floor: t * sqrt(var) no smaller than z * sqrt(within / R).
  const double z_over_t = kZ95 / student_t_quantile(0.975, e.df);
  e.var = std::max(ss / (R - 1), z_over_t * z_over_t * within) / R;
  return e;
}

LogEstimate difference(const LogEstimate& latest, const LogEstimate& best) {
  LogEstimate d;
  d.mean = latest.mean - best.mean;
  d.var = latest.var + best.var;
  d.df = welch_df(latest.var, latest.df, best.var, best.df);
  d.replicates = std::min(latest.replicates, best.replicates);
  return d;
}

Interval ratio_interval(const LogEstimate& e, double level) {
  if (std::isnan(e.mean)) return {NAN, NAN, NAN};
  const double h = e.var > 0 ? student_t_quantile(0.5 + 0.5 * level, e.df) * std::sqrt(e.var) : 0.0;
  return {std::exp(e.mean), std::exp(e.mean - h), std::exp(e.mean + h)};
}

std::vector<FigureInterval> figure_intervals(const std::vector<std::vector<std::vector<double>>>& values,
                                             const std::vector<LinearFigure>& figures, const BootstrapOptions& opt) {
  if (opt.resamples < 1 || !(opt.level > 0 && opt.level < 1))
    throw std::invalid_argument("figure_intervals: resamples must be >= 1 and level in (0, 1)");
  std::vector<ReplicateSummary> shapes;
  for (const auto& v : values) shapes.push_back(summarize(v));
  std::vector<std::vector<double>> boot;  // drawn when a figure first needs it
  std::vector<FigureInterval> out;
  for (const LinearFigure& f : figures) {
    FigureInterval fi;
    const FigureSeries series = figure_series(shapes, f);
    const int R = common_replicates(shapes, f);
    if (series.log_value.empty()) {
      fi.interval = {NAN, NAN, NAN};
    } else if (R != 1) {
      fi.replicates = std::max(R, 0);
      fi.interval = ratio_interval(replicate_estimate(series), opt.level);
    } else {
      if (boot.empty()) boot = bootstrap_log_medians(values, opt);
      std::vector<double> samples(size_t(opt.resamples), f.constant);
      for (size_t s = 0; s < values.size(); ++s)
        if (f.coef[s] != 0)
          for (size_t k = 0; k < samples.size(); ++k) samples[k] += f.coef[s] * boot[s][k];
      std::sort(samples.begin(), samples.end());
      fi.replicates = 1;
      fi.interval = {std::exp(series.log_value[0]), std::exp(quantile_sorted(samples, 0.5 - 0.5 * opt.level)),
                     std::exp(quantile_sorted(samples, 0.5 + 0.5 * opt.level))};
    }
    out.push_back(fi);
  }
  return out;
}

}  // namespace scorer
