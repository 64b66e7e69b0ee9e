// Quantiles of the normal and Student t distributions: an interval from R
// replicates uses t with R - 1 degrees of freedom, and `scorer diff` compares
// two runs with Welch's non-integer degrees of freedom.
#pragma once

#include <limits>

namespace scorer {

constexpr double kInfiniteDf = std::numeric_limits<double>::infinity();  // the normal distribution

double normal_cdf(double x);
double normal_quantile(double p);  // p in (0, 1)

// P(T <= t) for Student's t with df > 0 degrees of freedom (df may be
// fractional; kInfiniteDf gives the normal).
double student_t_cdf(double t, double df);
// The t with P(T <= t) = p, p in (0, 1).
double student_t_quantile(double p, double df);

// Welch-Satterthwaite degrees of freedom of var_a + var_b, each a variance of
// a mean with its own degrees of freedom (kInfiniteDf for a known variance).
double welch_df(double var_a, double df_a, double var_b, double df_b);

}  // namespace scorer
