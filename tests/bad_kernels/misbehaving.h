// The submission's own kernels (dense, pooler, router) with one misbehaviour
// added, built only into the GPU test binary, to prove that the scorer's
// timing guards catch each (issues 40 and 34). Their results are right unless
// the misbehaviour is a wrong result; what they do wrong is where, when or
// beside what they run.
#pragma once

#include <memory>
#include <string>

#include "scorer/op_case.h"

namespace bad_kernels {

enum class Guarded {
  none,             // the real kernel unchanged: the control
  background_load,  // leaves a bandwidth-heavy kernel running on a stream of its own after each call,
                    // stopped when its next call begins (so it runs while the baseline is timed)
  late_thread,      // a thread of its own launches kernels after each call returned, until the next call
  persisting_l2,    // reserves the largest persisting-L2 carve-out in prepare
  wrong_in_timed,   // the output goes wrong in one timed call only (it sees the scorer's stream held)
  side_stream,      // does the work on a stream of its own while the scorer's stream is held, and waits
                    // for it from the host: right results, none of the work inside the events
  cached_result,    // computes once, then copies that result on every later call (one small kernel)
};

struct Misdeed {
  Guarded kind = Guarded::none;
  int timed_call = 0;  // wrong_in_timed: which timed call of the candidate (1-based) goes wrong
};

// "real", "background_load", "late_thread", "persisting_l2", "wrong_in_timed_N",
// "side_stream", "cached_result".
bool parse_guarded(const std::string& name, Misdeed* m);

// A candidate whose dense, pooler and router kernels are the submission's
// default variant with `m` added.
scorer::Candidate misbehaving_candidate(const Misdeed& m);

}  // namespace bad_kernels
