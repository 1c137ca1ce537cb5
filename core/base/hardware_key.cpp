#include "core/base/hardware_key.hpp"

#include <array>
#include <utility>

namespace aisp {

namespace {

// Locale-independent on purpose: std::isalnum/std::tolower depend on the C locale, and a key must
// not.
bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

char to_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Lowercase words of alphanumerics joined by single '_', no leading or trailing '_'.
std::string generic_slug(std::string_view name) {
  std::string slug;
  bool pending_separator = false;
  for (char c : name) {
    if (!is_alnum(c)) {
      pending_separator = !slug.empty();
      continue;
    }
    if (pending_separator) slug += '_';
    pending_separator = false;
    slug += to_lower(c);
  }
  return slug;
}

// Drops `word` when it is the first whole word of the slug ("nvidia_h200" -> "h200", but "nvidiax"
// stays).
std::string drop_leading_word(std::string slug, std::string_view word) {
  if (slug == word) return {};
  if (slug.size() > word.size() && slug.compare(0, word.size(), word) == 0 &&
      slug[word.size()] == '_') {
    return slug.substr(word.size() + 1);
  }
  return slug;
}

// Names the driver reports for parts whose generic slug would hide the form factor or differ
// between otherwise identical machines. The SXM H100/H800 report only their memory ("80GB HBM3");
// the PCIe and NVL parts already name themselves and the generic slug is right for them.
constexpr std::array<std::pair<std::string_view, std::string_view>, 3> k_aliases{{
    {"h100_80gb_hbm3", "h100_sxm"},
    {"h100_sxm5_80gb", "h100_sxm"},
    {"h800_80gb_hbm3", "h800_sxm"},
}};

}  // namespace

std::string gpu_model_slug(std::string_view device_name) {
  std::string slug = generic_slug(device_name);
  slug = drop_leading_word(std::move(slug), "nvidia");
  slug = drop_leading_word(std::move(slug), "geforce");
  for (const auto& [from, to] : k_aliases) {
    if (slug == from) return std::string(to);
  }
  if (slug.empty()) return "unknown_gpu";
  return slug;
}

std::string hardware_key(std::string_view device_name, int gpu_count) {
  std::string slug = gpu_model_slug(device_name);
  if (gpu_count > 1) return std::to_string(gpu_count) + "x_" + slug;
  return slug;
}

}  // namespace aisp
