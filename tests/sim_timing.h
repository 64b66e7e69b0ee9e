// Simulated timing runs for the statistics tests: every shape timed in R
// replicates of paired trials, stopped by the scorer's own stopping rule,
// with the noise real runs show:
// - within a replicate, each side's log time follows an AR(1) process
//   (autocorrelated trials), the baseline's noise larger than the
//   candidate's, and now and then a slow trial (a spike) on either side;
// - between replicates, an offset of each side's whole replicate (the
//   baseline's larger), either each shape's own or one shared by every
//   shape of the replicate (a drift of the machine during one pass).
// Draws are portable (mt19937_64 is fixed by the standard; the normals come
// from Box-Muller on its bits), so a seed gives the same runs everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "scorer/stats.h"

namespace sim {

class Draws {
 public:
  explicit Draws(uint64_t seed) : rng_(seed) {}
  double uniform() { return (double(rng_() >> 11) + 0.5) * 0x1p-53; }  // in (0, 1)
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // Marsaglia's polar form of Box-Muller: a point drawn in the unit disc.
    double x, y, r2;
    do {
      x = 2 * uniform() - 1;
      y = 2 * uniform() - 1;
      r2 = x * x + y * y;
    } while (r2 >= 1);
    const double f = std::sqrt(-2 * std::log(r2) / r2);
    spare_ = y * f;
    has_spare_ = true;
    return x * f;
  }

 private:
  std::mt19937_64 rng_;
  bool has_spare_ = false;
  double spare_ = 0;
};

struct Shape {
  std::string name, regime;
  double speedup;  // true: baseline time / candidate time
  double base_sd;  // sd of the baseline's log time within a replicate
  double cand_sd;  // the candidate's
};

struct Noise {
  double rho = 0.7;              // AR(1) coefficient of each side's within-replicate noise
  double base_offset_sd = 0.01;  // sd of a replicate's offset of the baseline's log time
  double cand_offset_sd = 0.0025;
  bool shared = false;       // one offset per replicate for every shape, else one per shape
  double spike_prob = 0.02;  // a trial slowed by up to spike_size, on either side alike
  double spike_size = 0.2;
  double trial_s = 0.002;  // seconds one paired trial takes (for the time cap)
};

struct Replicate {
  std::vector<double> base, cand;  // paired trials, µs
  std::vector<double> ratios() const { return scorer::paired_ratios(base, cand); }
};
using Run = std::vector<std::vector<Replicate>>;  // [shape][replicate]

// One side's within-replicate noise: a stationary AR(1) process of sd `sd`.
class Ar1 {
 public:
  Ar1(Draws& d, double rho, double sd) : d_(d), rho_(rho), innovation_(sd * std::sqrt(1 - rho * rho)) {
    x_ = sd * d.normal();
  }
  double next() {
    const double v = x_;
    x_ = rho_ * x_ + innovation_ * d_.normal();
    return v;
  }

 private:
  Draws& d_;
  double rho_, innovation_, x_;
};

// One run of `shapes`, R replicates each; the candidate's true time of shape s
// is 10 µs times cand_scale[s] (1 when empty), the baseline's 10 µs times the
// shape's speedup.
inline Run simulate_run(Draws& d, const std::vector<Shape>& shapes, const Noise& noise,
                        const scorer::StoppingRule& rule, int R, const std::vector<double>& cand_scale = {}) {
  Run run(shapes.size(), std::vector<Replicate>(R));
  for (int r = 0; r < R; ++r) {
    const double shared_b = noise.base_offset_sd * d.normal(), shared_c = noise.cand_offset_sd * d.normal();
    for (size_t s = 0; s < shapes.size(); ++s) {
      const Shape& sh = shapes[s];
      const double off_b = noise.shared ? shared_b : noise.base_offset_sd * d.normal();
      const double off_c = noise.shared ? shared_c : noise.cand_offset_sd * d.normal();
      const double cand_us = 10.0 * (cand_scale.empty() ? 1.0 : cand_scale[s]);
      const double base_us = 10.0 * sh.speedup;
      Ar1 nb(d, noise.rho, sh.base_sd), nc(d, noise.rho, sh.cand_sd);
      Replicate& rep = run[s][r];
      scorer::TrialStopper stop(rule);
      for (;;) {
        // One uniform decides a spike on either side and its size.
        const double u = d.uniform(), p = noise.spike_prob;
        const double spike_b = u < p ? std::log1p(noise.spike_size * u / p) : 0.0;
        const double spike_c = u > 1 - p ? std::log1p(noise.spike_size * (1 - u) / p) : 0.0;
        const double b = base_us * std::exp(off_b + nb.next() + spike_b);
        const double c = cand_us * std::exp(off_c + nc.next() + spike_c);
        rep.base.push_back(b);
        rep.cand.push_back(c);
        if (stop.add(b / c, noise.trial_s * double(rep.base.size())) != scorer::StopDecision::go_on) break;
      }
    }
  }
  return run;
}

// values[shape][replicate]: the paired ratios, or the candidate's times.
inline std::vector<std::vector<std::vector<double>>> ratios_of(const Run& run) {
  std::vector<std::vector<std::vector<double>>> out(run.size());
  for (size_t s = 0; s < run.size(); ++s)
    for (const Replicate& r : run[s]) out[s].push_back(r.ratios());
  return out;
}
inline std::vector<std::vector<std::vector<double>>> candidate_times_of(const Run& run) {
  std::vector<std::vector<std::vector<double>>> out(run.size());
  for (size_t s = 0; s < run.size(); ++s)
    for (const Replicate& r : run[s]) out[s].push_back(r.cand);
  return out;
}

// The public shapes' make-up: 26 shapes in four regimes, the baselines
// noisier than the submission, the MoE baselines most.
inline std::vector<Shape> realistic_shapes() {
  std::vector<Shape> v;
  const double speedups[] = {1.4, 2.2, 0.9, 3.1, 1.7, 2.6, 1.2, 4.0};
  int i = 0;
  auto add = [&](const std::string& regime, int n, double base_sd, double cand_sd) {
    for (int k = 0; k < n; ++k, ++i)
      v.push_back({regime + "_" + std::to_string(k), regime, speedups[i % 8], base_sd * (1 + 0.25 * (k % 3)),
                   cand_sd * (1 + 0.5 * (k % 2))});
  };
  add("dense", 6, 0.015, 0.008);
  add("pooler", 5, 0.015, 0.008);
  add("router", 4, 0.02, 0.01);
  add("moe", 11, 0.03, 0.008);
  return v;
}

}  // namespace sim
