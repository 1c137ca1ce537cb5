#include "device/ladder.hpp"

#include <algorithm>
#include <stdexcept>

namespace aisp {

LadderRegistry& LadderRegistry::instance() {
  static LadderRegistry registry;
  return registry;
}

namespace {
// Numbered steps first by step number, then vendor references by slug.
bool ladder_order(const VariantInfo& a, const VariantInfo& b) {
  const bool va = a.kind == VariantKind::vendor;
  const bool vb = b.kind == VariantKind::vendor;
  if (va != vb) return vb;
  if (va) return a.slug < b.slug;
  return a.step < b.step;
}
}  // namespace

void LadderRegistry::add(const TargetInfo& target,
                         std::function<std::unique_ptr<ProblemBase>()> make_problem,
                         VariantEntry variant) {
  auto it = std::find_if(m_targets.begin(), m_targets.end(),
                         [&](const TargetEntry& t) { return t.info.name() == target.name(); });
  if (it == m_targets.end()) {
    m_targets.push_back({target, std::move(make_problem), {}});
    m_targets.back().info.variants.clear();
    it = m_targets.end() - 1;
  }
  for (const auto& v : it->variants) {
    if (v.info.file_stem() == variant.info.file_stem()) {
      // Two files registering one name is a build mistake; refuse loudly at start-up.
      throw std::logic_error("variant registered twice: " + target.variant_name(v.info));
    }
  }
  it->variants.push_back(std::move(variant));
  std::stable_sort(it->variants.begin(), it->variants.end(),
                   [](const VariantEntry& a, const VariantEntry& b) { return ladder_order(a.info, b.info); });
  it->info.variants.clear();
  for (const auto& v : it->variants) it->info.variants.push_back(v.info);
}

std::vector<TargetInfo> LadderRegistry::catalogue() const {
  std::vector<TargetInfo> out;
  for (const auto& t : m_targets) out.push_back(t.info);
  std::sort(out.begin(), out.end(),
            [](const TargetInfo& a, const TargetInfo& b) { return a.name() < b.name(); });
  return out;
}

const TargetEntry* LadderRegistry::find(const std::string& target_name) const {
  for (const auto& t : m_targets) {
    if (t.info.name() == target_name) return &t;
  }
  return nullptr;
}

}  // namespace aisp
