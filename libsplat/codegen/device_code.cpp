#include "libsplat/codegen/device_code.h"

#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "libsplat/device/embedded.h"

namespace splat {
namespace {

// The module's headers: common helpers and the plan's tables, the online softmax, the engines, the
// pass drivers, the split-KV combine and the pipeline. Each includes what it needs itself.
constexpr const char* kModuleHeaders[] = {
    "common.cuh",        "plan.cuh",          "online_softmax.cuh", "engine_mma.cuh",   "engine_wgmma.cuh",
    "engine_tf32.cuh",   "engine_tf32x3.cuh", "engine_traits.cuh",  "runs.cuh", "fused_driver.cuh", "band_driver.cuh",
    "lattice_driver.cuh", "decode_driver.cuh", "combine.cuh",      "pipeline.cuh"};

const char* header_text(std::string_view name) {
  for (const EmbeddedFile& f : device_files())
    if (name == f.name) return f.text;
  throw std::logic_error("no embedded device header \"" + std::string(name) + "\"");
}

// The name in `#include "splat/..."` (with nothing else on the line but blanks), or "".
std::string_view included_name(std::string_view line) {
  const size_t a = line.find_first_not_of(" \t");
  if (a == std::string_view::npos || line.substr(a, 8) != "#include") return {};
  const size_t q = line.find_first_not_of(" \t", a + 8);
  if (q == std::string_view::npos || line.substr(q, 7) != "\"splat/") return {};
  const size_t e = line.find('"', q + 1);
  if (e == std::string_view::npos || line.find_first_not_of(" \t\r", e + 1) != std::string_view::npos) return {};
  return line.substr(q + 1, e - q - 1);
}

void inline_into(std::ostringstream& out, std::string_view text, std::set<std::string>& done, bool header) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    const size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    const std::string_view line = text.substr(pos, end - pos);
    pos = end;
    const std::string_view body = line.substr(0, line.find_last_not_of("\r\n") + 1);
    if (header && body == "#pragma once") continue;
    const std::string_view name = included_name(body);
    if (name.empty()) {
      out << line;
      continue;
    }
    if (!done.insert(std::string(name)).second) continue;
    const char* h = header_text(name);
    out << "// ---- " << name << " (libsplat/device/" << name.substr(6) << ") ----\n";
    inline_into(out, h, done, true);
    if (!std::string_view(h).ends_with('\n')) out << '\n';
    out << "// ---- end of " << name << " ----\n";
  }
}

}  // namespace

const std::string& device_includes() {
  static const std::string text = [] {
    std::string s;
    for (const char* h : kModuleHeaders) {
      header_text(std::string("splat/") + h);  // present (an internal error otherwise)
      s += std::string("#include \"splat/") + h + "\"\n";
    }
    return s;
  }();
  return text;
}

std::string inline_device_headers(const std::string& source) {
  std::ostringstream out;
  std::set<std::string> done;
  inline_into(out, source, done, false);
  return out.str();
}

}  // namespace splat
