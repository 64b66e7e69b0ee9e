#include "scorer/student_t.h"

#include <cmath>
#include <stdexcept>

namespace scorer {
namespace {

constexpr double kTiny = 1e-300;  // keeps the continued fraction's divisions finite

// The continued fraction of the regularized incomplete beta function I_x(a, b)
// (without its prefactor), evaluated by Lentz's method; it converges quickly
// for x < (a + 1) / (a + b + 2).
double beta_fraction(double a, double b, double x) {
  auto guard = [](double v) { return std::fabs(v) < kTiny ? kTiny : v; };
  double c = 1, d = 1 / guard(1 - (a + b) * x / (a + 1));
  double f = d;
  for (int m = 1; m <= 500; ++m) {
    const double even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
    d = 1 / guard(1 + even * d);
    c = guard(1 + even / c);
    f *= d * c;
    const double odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    d = 1 / guard(1 + odd * d);
    c = guard(1 + odd / c);
    const double step = d * c;
    f *= step;
    if (std::fabs(step - 1) < 1e-15) break;
  }
  return f;
}

// Regularized incomplete beta I_x(a, b), x in [0, 1].
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  if (x > (a + 1) / (a + b + 2)) return 1 - incomplete_beta(b, a, 1 - x);
  const double log_front = a * std::log(x) + b * std::log1p(-x) + std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b);
  return std::exp(log_front) / a * beta_fraction(a, b, x);
}

bool is_normal(double df) { return !(df < 1e8); }

double student_t_pdf(double t, double df) {
  if (is_normal(df)) return std::exp(-0.5 * t * t) / std::sqrt(2 * M_PI);
  return std::exp(std::lgamma(0.5 * (df + 1)) - std::lgamma(0.5 * df) - 0.5 * std::log(df * M_PI) -
                  0.5 * (df + 1) * std::log1p(t * t / df));
}

// The x >= 0 with cdf(x) = q for q in [0.5, 1): the root is bracketed first,
// then found by Newton steps that fall back to bisection when they leave the
// bracket.
template <typename Cdf, typename Pdf>
double upper_quantile(double q, Cdf cdf, Pdf pdf) {
  double lo = 0, hi = 1;
  while (cdf(hi) < q) {
    lo = hi;
    hi *= 2;
    if (hi > 1e300) return INFINITY;
  }
  double x = 0.5 * (lo + hi);
  for (int i = 0; i < 200; ++i) {
    const double f = cdf(x) - q;
    if (f == 0) return x;
    (f < 0 ? lo : hi) = x;
    double next = x - f / pdf(x);
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    if (std::fabs(next - x) <= 1e-14 * std::fmax(1.0, x)) return next;
    x = next;
  }
  return x;
}

void check_p(double p, const char* what) {
  if (!(p > 0 && p < 1)) throw std::invalid_argument(std::string(what) + ": p must lie in (0, 1)");
}

}  // namespace

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double normal_quantile(double p) { return student_t_quantile(p, kInfiniteDf); }

double student_t_cdf(double t, double df) {
  if (!(df > 0)) throw std::invalid_argument("student_t_cdf: degrees of freedom must be positive");
  if (is_normal(df)) return normal_cdf(t);
  const double tail = 0.5 * incomplete_beta(0.5 * df, 0.5, df / (df + t * t));
  return t > 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  check_p(p, "student_t_quantile");
  if (!(df > 0)) throw std::invalid_argument("student_t_quantile: degrees of freedom must be positive");
  if (p == 0.5) return 0;
  const double q = p > 0.5 ? p : 1 - p;
  const double x = upper_quantile(
      q, [df](double t) { return student_t_cdf(t, df); }, [df](double t) { return student_t_pdf(t, df); });
  return p > 0.5 ? x : -x;
}

double welch_df(double var_a, double df_a, double var_b, double df_b) {
  const double denominator =
      (is_normal(df_a) ? 0 : var_a * var_a / df_a) + (is_normal(df_b) ? 0 : var_b * var_b / df_b);
  if (!(denominator > 0)) return kInfiniteDf;
  return (var_a + var_b) * (var_a + var_b) / denominator;
}

}  // namespace scorer
