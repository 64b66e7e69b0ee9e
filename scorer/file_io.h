// Reading input files with bounds, and writing output files atomically: the
// one way the scorer reads a file it did not write and replaces a file.
//
// Reading: only a regular file is read (a device such as /dev/zero or a FIFO
// is refused before a byte is read: the file is opened with O_NONBLOCK and
// fstat'ed first), and one larger than its kind's limit is refused.
//
// Writing: the bytes go to a temporary file created exclusively beside the
// target (mkstemp: a fresh random name, O_CREAT|O_EXCL, so a planted symbolic
// link is never followed), are synced, and the temporary is renamed over the
// target, so readers see the old file or the new one, never half of one. A
// target that exists and is not a regular file (a directory, a device, a
// FIFO, a symbolic link) is refused, never replaced.
#pragma once

#include <cstddef>
#include <string>

namespace scorer {

// Size limits of the files the scorer reads (stated in the README and --help).
constexpr size_t kMaxShapesFileBytes = size_t(1) << 20;     // shapes.toml
constexpr size_t kMaxResultsFileBytes = size_t(128) << 20;  // results/*.json, recorded baselines
constexpr size_t kMaxIndexFileBytes = size_t(16) << 20;     // results/history/index.tsv

// The bytes of the regular file `path`, at most `max_bytes` of them. Throws
// InputError ("PATH: not a regular file", "PATH: larger than N MiB, ...",
// "PATH: cannot read: <reason>"); `what` names the kind in the size message
// ("a results file").
std::string read_input_file(const std::string& path, size_t max_bytes, const std::string& what);

// Replaces (or creates) `path` with `data` atomically, as above; creates the
// parent directories. Throws std::runtime_error naming the path and reason.
void write_file_atomic(const std::string& path, const std::string& data);

// Writes `data` to a temporary file created exclusively in `dir` (its name
// starts with `prefix`) and returns its path; the caller renames or removes it.
std::string write_temp_file(const std::string& dir, const std::string& prefix, const std::string& data);

// Refuses a target that exists and is not a regular file (std::runtime_error).
void require_regular_or_absent(const std::string& path);

}  // namespace scorer
