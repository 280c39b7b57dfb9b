// splatc analyze / show: flags only; the work is in libsplat (pattern, analysis, report).
#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <iostream>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "commands.h"
#include "common/cli.h"
#include "libsplat/analysis/analysis.h"
#include "libsplat/report/analysis_report.h"
#include "libsplat/report/picture.h"

namespace splatc {

namespace {

struct AnalyzeArgs {
  std::string pattern, coo;
  bool json = false, validate = false;
};

struct ShowArgs {
  std::string pattern, output, rows, cols;
  int cells = 512;
};

// "A:B" (non-negative integers) of a zoom flag; unset when empty.
std::optional<std::pair<int64_t, int64_t>> parse_range(const std::string& text, const char* flag) {
  if (text.empty()) return std::nullopt;
  const size_t colon = text.find(':');
  const auto number = [&](const std::string& x) {
    if (x.empty() || x.size() > 18 || x.find_first_not_of("0123456789") != std::string::npos)
      throw splat::Error("", flag, "expected A:B (two non-negative integers), got '" + text + "'");
    return std::stoll(x);
  };
  if (colon == std::string::npos) number("");
  return std::pair<int64_t, int64_t>{number(text.substr(0, colon)), number(text.substr(colon + 1))};
}

}  // namespace

Command register_analyze(CLI::App& app) {
  auto args = std::make_shared<AnalyzeArgs>();
  auto* sub = app.add_subcommand("analyze", "Analyse a pattern: nnz, density, ACSR segments, metadata bytes per format");
  sub->add_option("pattern", args->pattern, "Pattern JSON file (docs/splatc-patterns.md); - reads it from standard input")->required();
  sub->add_flag("--json", args->json, "Print one JSON object instead of the report");
  sub->add_option("--coo", args->coo, "Also write every kept position as a line 'i j' (row-major) to FILE");
  sub->add_flag("--validate", args->validate, "Check every row of the ACSR against direct evaluation of the terms");
  return {sub, [args]() {
            splat::Problem p = splat::load_problem(args->pattern, limits());
            auto t0 = std::chrono::steady_clock::now();
            splat::AnalyzeOptions opt;
            opt.validate = args->validate;
            splat::Acsr acsr = splat::analyze(p, opt);
            auto t1 = std::chrono::steady_clock::now();
            splat::AnalysisStats st = splat::stats(p, acsr);
            spdlog::debug("analysis {:.3f} ms", std::chrono::duration<double, std::milli>(t1 - t0).count());
            if (!args->coo.empty()) {
              splat::WorkMeter(p.limits, args->coo, "writing every kept position (--coo)").add(st.nnz);
              splat::write_coo(acsr, args->coo);
            }
            if (args->json) {
              nlohmann::json j = splat::analysis_json(p, acsr, st);
              j["analysis_ms"] = std::chrono::duration<double, std::milli>(t1 - t0).count();
              j["validated"] = args->validate;
              std::cout << j.dump() << "\n";
            } else {
              std::cout << splat::analysis_text(p, acsr, st);
              if (args->validate) std::cout << "  validated        every row equals direct evaluation of the terms\n";
            }
            return static_cast<int>(cli::kOk);
          }};
}

Command register_show(CLI::App& app) {
  auto args = std::make_shared<ShowArgs>();
  auto* sub = app.add_subcommand("show", "Draw the mask as an SVG or PNG picture");
  sub->add_option("pattern", args->pattern, "Pattern JSON file")->required();
  sub->add_option("-o,--output", args->output, "Output picture, FILE.svg or FILE.png")->required();
  sub->add_option("--cells", args->cells, "Largest number of cells per side (downsampling)")
      ->check(CLI::Range(16, 4096));
  sub->add_option("--rows", args->rows, "Draw query rows A:B only (A inclusive, B exclusive)");
  sub->add_option("--cols", args->cols, "Draw key positions A:B only (A inclusive, B exclusive)");
  return {sub, [args]() {
            splat::PictureOptions o;
            o.max_cells = args->cells;
            o.rows = parse_range(args->rows, "--rows");
            o.cols = parse_range(args->cols, "--cols");
            splat::Problem p = splat::load_problem(args->pattern, limits());
            splat::Acsr acsr = splat::analyze(p);
            splat::AnalysisStats st = splat::stats(p, acsr);
            splat::write_picture(p, acsr, st, args->output, o);
            spdlog::info("wrote {}", args->output);
            return static_cast<int>(cli::kOk);
          }};
}

}  // namespace splatc
