// `scorer merge`: joins the files of the shards of one run (`scorer run
// --shard I/N` on N hosts) into one results file of the same form as a run
// on one host. The shards must come from one build, shapes file, seed,
// replicate count, set of variants and baselines, scoring rule and GPU
// model, and hold every (shape, replicate) exactly once; the shapes are then
// assembled, judged and given their intervals as `scorer run` does
// (dispatch.h: assemble_run; stats.h: compute_statistics).
#pragma once

#include <string>
#include <vector>

#include "scorer/results.h"

namespace scorer {

struct ShardFile {
  std::string path;  // names the file in errors
  RunResult run;
};

// Throws InputError, one line naming the file and the field, when the
// shards do not make one run. The merged meta is shard 1's, with every
// shard's GPUs (replicates renumbered into that list), the earliest start,
// and `command_line`.
RunResult merge_shards(const std::vector<ShardFile>& shards, const std::string& command_line);

int merge_main(const std::vector<std::string>& args);

}  // namespace scorer
