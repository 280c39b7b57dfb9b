#include <sstream>
#include <stdexcept>

#include "libsplat/codegen/codegen.h"

namespace splat {
namespace {

// Every key: its field and allowed values (the unknown-key message lists them all).
struct Key {
  const char* name;
  int KernelTuning::*field;
  bool (*ok)(int);
  const char* what;
  int unset;
};

const Key kKeys[] = {
    {"mw", &KernelTuning::warp_rows, [](int x) { return x == 16 || x == 32; }, "16 or 32", 0},
    {"stages", &KernelTuning::stages, [](int x) { return x == 2 || x == 3; }, "2 or 3", 0},
    {"bc", &KernelTuning::key_tile, [](int x) { return x == 64 || x == 128; }, "64 or 128", 0},
    {"minb", &KernelTuning::min_blocks, [](int x) { return x >= 0 && x <= 16; }, "in 0..16", -1},
    {"qs", &KernelTuning::q_shared, [](int x) { return x == 0 || x == 1; }, "0 or 1", -1},
    {"decode", &KernelTuning::decode, [](int x) { return x == 0 || x == 1; }, "0 or 1", -1},
};

}  // namespace

KernelTuning parse_tuning(const std::string& spec) {
  KernelTuning t;
  std::istringstream in(spec);
  std::string kv;
  while (std::getline(in, kv, ',')) {
    if (kv.empty()) continue;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("tuning: expected key=value, got '" + kv + "'");
    const std::string key = kv.substr(0, eq), val = kv.substr(eq + 1);
    int v = 0;
    try {
      size_t used = 0;
      v = std::stoi(val, &used);
      if (used != val.size()) throw std::invalid_argument(val);
    } catch (const std::exception&) {
      throw std::invalid_argument("tuning: '" + key + "' needs an integer, got '" + val + "'");
    }
    const Key* k = nullptr;
    for (const Key& c : kKeys)
      if (key == c.name) k = &c;
    if (!k) {
      std::string names;
      for (const Key& c : kKeys) names += std::string(names.empty() ? "" : ", ") + c.name;
      throw std::invalid_argument("tuning: unknown key '" + key + "' (" + names + ")");
    }
    if (!k->ok(v)) throw std::invalid_argument("tuning: " + key + " must be " + k->what + ", got " + val);
    t.*(k->field) = v;
  }
  return t;
}

std::string format_tuning(const KernelTuning& t) {
  std::string out;
  for (const Key& k : kKeys)
    if (t.*(k.field) != k.unset) out += (out.empty() ? "" : ",") + std::string(k.name) + "=" + std::to_string(t.*(k.field));
  return out;
}

}  // namespace splat
