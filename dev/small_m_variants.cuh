// The small-M variants under dev/, the same for pooler and dense (dev/pooler.cu, dev/dense.cu):
// the direct kernel on other layouts of the packed copy, or on W as it is, and the split-K
// kernels. Each lost to the default where it ran (docs/perf-log.md, rounds 7, 14, 33, 51, 89).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dev/small_m_engines.cuh"
#include "submission/small_m_rows.cuh"

namespace submission::small_m {

inline std::vector<std::string> dev_variant_names() {
  return {"direct_rotated_mma",  // the default's kernel and layout, forced on every shape
          "direct_interleaved_mma", "direct_tiles_mma", "direct_packed_mma", "direct_mma", "splitk_mma",
          "splitk_bulk_mma",        "narrow_mma",       "cluster_splitk_mma"};
}

// Op<E>: PoolerOn or DenseOn, over an engine E.
template <template <template <class, class> class> class Op,
          class Base,     // Pooler or Dense
          class Dims,     // its dims
          class Weights>  // its weights
std::unique_ptr<Base> make_dev_variant(const Dims& d, const Weights& w, const std::string& variant) {
  using direct::TileOrder;
  // The packed copy: chunk c of every tile side by side (chunk-major) or each tile one run
  // (tile-major); each block's walk in an order of its own (rotated) or not; tiles per block.
  if (variant == "direct_rotated_mma") return std::make_unique<Op<Engine>>(d, w, Path::direct, kRotatedLayout);
  if (variant == "direct_interleaved_mma")
    return std::make_unique<Op<Engine>>(d, w, Path::direct, DirectLayout{TileOrder::chunk_major, 1, kDirectMaxTiles});
  if (variant == "direct_tiles_mma")
    return std::make_unique<Op<Engine>>(d, w, Path::direct, DirectLayout{TileOrder::tile_major, 1, kDirectMaxTiles});
  if (variant == "direct_packed_mma")
    return std::make_unique<Op<Engine>>(d, w, Path::direct, DirectLayout{TileOrder::tile_major, 1, 1});
  if (variant == "direct_mma") return std::make_unique<Op<DirectUnpackedEngine>>(d, w);
  if (variant == "splitk_mma") return std::make_unique<Op<SplitKEngine>>(d, w, SplitKKind::wide);
  if (variant == "splitk_bulk_mma") return std::make_unique<Op<SplitKEngine>>(d, w, SplitKKind::wide_bulk);
  if (variant == "narrow_mma") return std::make_unique<Op<SplitKEngine>>(d, w, SplitKKind::narrow);
  if (variant == "cluster_splitk_mma") return std::make_unique<Op<ClusterEngine>>(d, w);
  throw std::invalid_argument("unknown small-M variant '" + variant + "'");
}

}  // namespace submission::small_m
