// The split-K kernels' cost model (dev/small_m_splitk.cuh): how many k splits a wide or narrow
// kernel takes for a shape. Host code, compiled once.
#pragma once

namespace submission::small_m {

// How many k splits a wide or narrow kernel takes, from a model of the machine
// rather than a table of shapes. A configuration runs `units` = tiles x splits x token
// chunks blocks, `slots` of them at a time (SMs x blocks per SM, from the
// occupancy API). Per wave of `a` blocks:
//   time = latency + bytes of the wave / min(HBM bandwidth, a x in-flight bytes / latency)
// i.e. the wave streams at HBM speed if its blocks keep enough bytes in flight
// (Little's law), else at what they can keep in flight; each wave also pays one
// memory latency to fill and drain its pipelines. Two more limits:
//   * L2 -> SM traffic (weights + each block's copy of the activations +
//     partials written and read back) over the L2 bandwidth: this is what rules
//     out narrow tiles for large weights (16-row tiles reread the activations
//     once per 16 rows);
//   * a split costs a fixed fix-up (partials, fence, atomic, the last block's
//     reads) on the critical path.
// The constants come from the H200 measurements of these kernels (times less
// the ~2.8 us a cold launch costs); only their ratios steer the choice.
struct Machine {
  double hbm_bytes_per_us;  // sustained weight stream
  double l2_bytes_per_us;   // bytes into the SMs: weights + activations + partials
  double latency_us;        // loaded DRAM round trip
  double fixup_us;          // split-K fix-up: fence, election and the last block's reads
};

// The per-thread cp.async kernels (wide and narrow).
//   hbm 2.6 TB/s: wide, no split, on dense gate_up streamed 237 MB in ~92 us.
//   l2 2.6 TB/s: narrow pooler B=8 H=4096 moved ~50 MB into the SMs (33.5 MB
//     of weights, the activations once per 16 rows) in ~22 us and lost to wide
//     at 4 splits (~35 MB, ~20.3 us); at 7 TB/s the model ranked narrow first
//     there. This is the ~20-23 GB/s per SM these kernels reached.
//   latency 2.0 us: the narrow pooler at H = 1024 (one wave of 64 blocks, all
//     its 2 MB requested at once) took ~4.2 us; with it narrow stays ahead of
//     wide at H = 1024 (wide at 4 splits measured ~7.3 and ~9.4 us, B = 8, 16).
//   fix-up 2.5 us: wide dense o (4 splits, 16 stages per block) took ~23 us
//     where the stream alone models ~20.5.
constexpr Machine kCpAsyncMachine{2.6e6, 2.6e6, 2.0, 2.5};
// The bulk-copy wide kernel, not measured yet: the copy bandwidth the scorer
// measured (4.2 TB/s, ~3.9 net of the floor kernel's own costs), and bytes
// into the SMs no longer capped by per-thread copies; latency and fix-up as
// above.
constexpr Machine kBulkMachine{3.9e6, 7.0e6, 2.0, 2.5};

struct ConfigCost {
  int rows;           // weight rows per tile
  int stage_k;        // k per stage
  int stages;         // ring depth
  int blocks_per_sm;  // occupancy
};

double estimate_us(const ConfigCost& c, int splits, int M, int N, int K, int ng, int sms, const Machine& mc);

}  // namespace submission::small_m
