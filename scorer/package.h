// The upload tarball (`scorer package`, `make package`): a .tar.gz of the
// submission's files, reproducible byte for byte from the same tree, with a
// MANIFEST that ties it to the scored run it was selected with.
//
// Files: those scripts/tree-hash hashes under submission/ (in a git checkout
// the tracked and untracked-but-not-ignored files, elsewhere every regular
// file), so nothing built and nothing ignored. Entries are sorted by name and
// carry mtime 0, owner and group 0 and modes 0644/0755; gzip stores no name or
// time. GNU tar and gzip do the writing, run as child processes without a
// shell.
//
// MANIFEST, the tarball's first entry:
//   # comment lines
//   key: value lines: submission_sha256, git_commit, git_dirty, selected_run,
//     forced (only when --force overrode a check), and run_* (the selected
//     run's GPU, date, commit, submission_sha256, aggregate, regimes)
//   a blank line
//   one line per file in sha256sum's format ("<sha256>  submission/<path>");
//   the sha256 of these lines is submission_sha256, i.e. what
//   `scripts/tree-hash submission` prints.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace scorer {

struct PackageOptions {
  std::string root = ".";               // the checkout whose submission/ is packaged
  std::string results_dir = "results";  // where best.json is
  std::string out;                      // default: <results_dir>/submission.tar.gz
  bool force = false;                   // package without a selected best, or one
                                        // scored with another submission
};

// The submission's files, relative to root, sorted by bytes.
std::vector<std::string> submission_files(const std::string& root);

// Refuses (kExitIncorrect) when there is no selected best or its
// meta.submission_sha256 is not the hash of the submission being packaged,
// unless forced; kExitBadInput on bad input (no submission/, unreadable
// best.json, failing tar).
int build_package(const PackageOptions& opt, std::ostream& out, std::ostream& err);

// Checks a tarball against its MANIFEST: every listed file present with its
// sha256, nothing else in it, and submission_sha256 matching the list.
// kExitOk, kExitIncorrect with the reason, or kExitBadInput when the file is
// not a readable .tar.gz.
int verify_package(const std::string& tarball, std::ostream& out, std::ostream& err);

}  // namespace scorer
