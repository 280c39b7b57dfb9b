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
#include "libsplat/analysis/columns.h"
#include "libsplat/report/analysis_report.h"
#include "libsplat/report/picture.h"

namespace splatc {

namespace {

struct AnalyzeArgs {
  std::string pattern, coo;
  bool json = false, validate = false, columns = false;
  int64_t head = -1;
};

struct ShowArgs {
  std::string pattern, output, rows, cols;
  int cells = 512;
  int64_t head = -1;
};

// --head H: the problem of head H's pattern (its head group; the problem itself without per-head
// patterns). Unset (-1): the problem as it is.
splat::Problem select_head(splat::Problem p, int64_t head) {
  if (head < 0) return p;
  if (head >= p.heads)
    throw splat::Error("", "--head", "expected a head in [0, " + std::to_string(p.heads) + "), got " + std::to_string(head));
  return p.head_groups.empty() ? p : splat::head_group(p, splat::head_group_of(p, head));
}

// One pattern's analysis: the report (text or JSON) and --coo.
struct Analysed {
  std::string text;
  nlohmann::json json;
};
Analysed analyse_one(const splat::Problem& p, const AnalyzeArgs& args) {
  auto t0 = std::chrono::steady_clock::now();
  splat::AnalyzeOptions opt;
  opt.validate = args.validate;
  splat::Acsr acsr = splat::analyze(p, opt);
  auto t1 = std::chrono::steady_clock::now();
  splat::AnalysisStats st = splat::stats(p, acsr);
  const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  spdlog::debug("analysis {:.3f} ms ({})", ms, p.name);
  if (!args.coo.empty()) {
    splat::WorkMeter(p.limits, args.coo, "writing every kept position (--coo)").add(st.nnz);
    splat::write_coo(acsr, args.coo);
  }
  std::optional<splat::Acsr> columns;
  if (args.columns) columns = splat::column_acsr(acsr, p.limits, p.file);
  Analysed r;
  if (args.json) {
    r.json = splat::analysis_json(p, acsr, st);
    r.json["analysis_ms"] = ms;
    r.json["validated"] = args.validate;
    if (columns) r.json["columns"] = splat::columns_json(*columns);
  } else {
    r.text = splat::analysis_text(p, acsr, st);
    if (args.validate) r.text += "  validated        every row equals direct evaluation of the terms\n";
    if (columns) r.text += splat::columns_text(*columns);
  }
  return r;
}

int run_analyze(const AnalyzeArgs& args) {
  const splat::Problem p = select_head(splat::load_problem(args.pattern, limits()), args.head);
  if (!p.head_groups.empty() && !args.coo.empty())
    throw splat::Error("", "--coo", "per-head patterns: --coo writes one head's positions; add --head H");
  if (p.head_groups.empty()) {
    const Analysed r = analyse_one(p, args);
    std::cout << (args.json ? r.json.dump() + "\n" : r.text);
    return cli::kOk;
  }
  nlohmann::json groups = nlohmann::json::array();
  std::string text = p.name + ": per-head patterns, " + std::to_string(p.head_groups.size()) + " head groups of " +
                     std::to_string(p.heads) + " heads (each a module of its own)\n";
  for (const splat::Problem& g : splat::head_group_problems(p)) {
    Analysed r = analyse_one(g, args);
    groups.push_back(std::move(r.json));
    text += "\n" + r.text;
  }
  if (args.json)
    std::cout << nlohmann::json{{"name", p.name}, {"heads", p.heads}, {"head_groups", std::move(groups)}}.dump() << "\n";
  else
    std::cout << text;
  return cli::kOk;
}

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
  sub->add_flag("--columns", args->columns,
                "Also the column ACSR: the query rows of each key, as a backward pass walks them for dK and dV");
  sub->add_option("--head", args->head,
                  "Per-head patterns: analyse head H's pattern only (default: every head group in turn)")
      ->check(CLI::NonNegativeNumber);
  return {sub, [args]() { return run_analyze(*args); }};
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
  sub->add_option("--head", args->head, "Per-head patterns: draw head H's pattern (default 0)")
      ->check(CLI::NonNegativeNumber);
  return {sub, [args]() {
            splat::PictureOptions o;
            o.max_cells = args->cells;
            o.rows = parse_range(args->rows, "--rows");
            o.cols = parse_range(args->cols, "--cols");
            splat::Problem p = splat::load_problem(args->pattern, limits());
            if (!p.head_groups.empty() && args->head < 0)
              spdlog::info("{}: per-head patterns: drawing head 0's (--head picks another)", p.name);
            p = select_head(std::move(p), !p.head_groups.empty() && args->head < 0 ? 0 : args->head);
            splat::Acsr acsr = splat::analyze(p);
            splat::AnalysisStats st = splat::stats(p, acsr);
            splat::write_picture(p, acsr, st, args->output, o);
            spdlog::info("wrote {}", args->output);
            return static_cast<int>(cli::kOk);
          }};
}

}  // namespace splatc
