// Quantiles of the normal and Student t distributions against tables and
// closed forms, and Welch's degrees of freedom.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "scorer/student_t.h"

TEST_CASE("student t and normal quantiles: known values and closed forms") {
  using scorer::student_t_quantile;
  CHECK(scorer::normal_quantile(0.975) == doctest::Approx(1.959963984540054).epsilon(1e-12));
  CHECK(scorer::normal_quantile(0.5) == 0);
  CHECK(scorer::normal_quantile(0.001) == doctest::Approx(-3.090232306167814).epsilon(1e-10));
  // Tables: t_{0.975} on 2, 4, 10 and 30 degrees of freedom.
  CHECK(student_t_quantile(0.975, 2) == doctest::Approx(4.302652729749464).epsilon(1e-10));
  CHECK(student_t_quantile(0.975, 4) == doctest::Approx(2.776445105197793).epsilon(1e-10));
  CHECK(student_t_quantile(0.975, 10) == doctest::Approx(2.228138851986274).epsilon(1e-10));
  CHECK(student_t_quantile(0.975, 30) == doctest::Approx(2.042272456301238).epsilon(1e-10));
  CHECK(student_t_quantile(0.975, scorer::kInfiniteDf) == doctest::Approx(1.959963984540054).epsilon(1e-12));
  // Closed forms: one degree of freedom is Cauchy; two, t = (2p - 1) / sqrt(2 p (1 - p)).
  for (double p : {0.6, 0.9, 0.995, 0.02}) {
    CAPTURE(p);
    CHECK(student_t_quantile(p, 1) == doctest::Approx(std::tan(M_PI * (p - 0.5))).epsilon(1e-9));
    CHECK(student_t_quantile(p, 2) == doctest::Approx((2 * p - 1) / std::sqrt(2 * p * (1 - p))).epsilon(1e-9));
    CHECK(scorer::student_t_cdf(student_t_quantile(p, 3.7), 3.7) == doctest::Approx(p).epsilon(1e-10));
  }
  CHECK(student_t_quantile(0.025, 5) == doctest::Approx(-student_t_quantile(0.975, 5)).epsilon(1e-12));
  CHECK_THROWS_AS(student_t_quantile(1, 3), std::invalid_argument);
  CHECK_THROWS_AS(student_t_quantile(0.9, 0), std::invalid_argument);
  // Welch: equal variances of equal df add their df; a known variance adds none.
  CHECK(scorer::welch_df(1, 2, 1, 2) == doctest::Approx(4));
  CHECK(scorer::welch_df(1, 2, 0, 2) == doctest::Approx(2));
  CHECK(scorer::welch_df(1, scorer::kInfiniteDf, 1, scorer::kInfiniteDf) == scorer::kInfiniteDf);
}
