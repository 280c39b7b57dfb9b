#pragma once
// trverify's run: verifies the selected rules, prints each rule's report as soon as it is decided
// (in file-then-line order), shows [n/N] progress on a terminal, and on SIGINT/SIGTERM writes the
// reports of what was decided and exits 130/143. Report files are written to a temporary name
// and renamed, so none is ever left half-written.
#include <string>

#include "libtensorright/report/report.h"
#include "libtensorright/report/select.h"
#include "libtensorright/verify/verify.h"

namespace trverify {

struct Run {
  tr::report::RuleList rules;  // the selected rules, in file-then-line order
  tr::VerifyOptions verify;
  tr::report::Batch batch;     // failed files and the run's settings; results are filled in
  bool check = false, json = false, jsonl = false;
  tr::report::HumanOptions human;
  bool progress = false;       // [n/N] on stderr (a terminal)
  std::string junit, sarif;    // report files, empty when not asked for
};

// Blocks SIGINT and SIGTERM in the calling thread (and so in every thread it starts): they are
// taken by execute(). Call first thing in main.
void block_signals();

// Verifies, streams and writes the reports; returns the exit code. Does not return after a signal
// (the process exits with 128 + signal once the reports are written). Throws tr::InternalError
// (exit 3) and std::runtime_error for a report file that cannot be written (exit 3).
int execute(Run& run);

// Writes text to path through a temporary file in the same directory and a rename.
void write_atomically(const std::string& path, const std::string& text);

}  // namespace trverify
