#include "core/base/axes.hpp"

#include <limits>
#include <optional>

#include "core/base/error.hpp"

namespace aisp {

namespace {

constexpr std::int64_t k_max = std::numeric_limits<std::int64_t>::max();

constexpr std::string_view k_forms =
    "expected a non-negative integer such as 1024, 0x400, 1<<10, 2^10, 4*256, 1Ki, 64Mi or 4Gi";

[[noreturn]] void bad_value(std::string_view text) {
  throw UsageError("invalid axis value '" + std::string(text) + "': " + std::string(k_forms));
}

[[noreturn]] void overflow(std::string_view text) {
  throw UsageError("axis value '" + std::string(text) + "' does not fit in a 64-bit integer");
}

// All operands are non-negative (the grammar has no minus sign), so one bound check suffices.
std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  if (a != 0 && b > k_max / a) return std::nullopt;
  return a * b;
}

// A recursive-descent reader over the value text. The grammar is deliberately small:
//   product := term ('*' term)*
//   term    := operand [('<<' | '^') number]
//   operand := number [suffix]        suffix: Ki | Mi | Gi (powers of 1024)
//   number  := decimal | '0x' hex
// '^' and '<<' bind tighter than '*', and their right side is a plain number, so "2*2^3" is 16 and
// "2^3^2" is rejected instead of guessing an associativity.
class ValueParser {
 public:
  explicit ValueParser(std::string_view text) : m_text(text) {}

  std::int64_t parse() {
    std::int64_t value = term();
    while (accept("*")) value = mul(value, term());
    if (m_pos != m_text.size()) bad_value(m_text);
    return value;
  }

 private:
  std::int64_t term() {
    const std::int64_t base = operand();
    if (accept("<<")) {
      const std::int64_t shift = number();
      if (base == 0) return 0;
      if (shift >= 63 || base > (k_max >> shift)) overflow(m_text);
      return base << shift;
    }
    if (accept("^")) {
      const std::int64_t exponent = number();
      std::int64_t result = 1;
      for (std::int64_t i = 0; i < exponent; ++i) {
        result = mul(result, base);
        if (result == 0 || result == 1) break;  // 0^k and 1^k stay put; avoids a 2^63-step loop
      }
      return result;
    }
    return base;
  }

  std::int64_t operand() {
    const std::int64_t value = number();
    if (accept("Ki")) return mul(value, std::int64_t{1} << 10);
    if (accept("Mi")) return mul(value, std::int64_t{1} << 20);
    if (accept("Gi")) return mul(value, std::int64_t{1} << 30);
    return value;
  }

  std::int64_t number() {
    int radix = 10;
    if (m_text.substr(m_pos, 2) == "0x" || m_text.substr(m_pos, 2) == "0X") {
      radix = 16;
      m_pos += 2;
    }
    const std::size_t start = m_pos;
    std::int64_t value = 0;
    while (m_pos < m_text.size()) {
      const int digit = digit_value(m_text[m_pos], radix);
      if (digit < 0) break;
      if (value > (k_max - digit) / radix) overflow(m_text);
      value = value * radix + digit;
      ++m_pos;
    }
    if (m_pos == start) bad_value(m_text);
    return value;
  }

  static int digit_value(char c, int radix) {
    if (c >= '0' && c <= '9') return c - '0';
    if (radix == 16 && c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (radix == 16 && c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  bool accept(std::string_view token) {
    if (m_text.substr(m_pos, token.size()) != token) return false;
    m_pos += token.size();
    return true;
  }

  std::int64_t mul(std::int64_t a, std::int64_t b) const {
    const auto product = checked_mul(a, b);
    if (!product) overflow(m_text);
    return *product;
  }

  std::string_view m_text;
  std::size_t m_pos = 0;
};

std::string axis_list(const std::vector<AxisSpec>& specs) {
  if (specs.empty()) return "(none)";
  std::string list;
  for (const AxisSpec& spec : specs) {
    if (!list.empty()) list += ", ";
    list += spec.name + " (default " + std::to_string(spec.default_value) + ")";
  }
  return list;
}

}  // namespace

std::int64_t parse_axis_value(std::string_view text) {
  if (text.empty()) bad_value(text);
  return ValueParser(text).parse();
}

std::pair<std::string, std::int64_t> parse_axis_assignment(std::string_view text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    throw UsageError("invalid axis assignment '" + std::string(text) + "': expected NAME=VALUE");
  }
  if (eq == 0) {
    throw UsageError("invalid axis assignment '" + std::string(text) + "': the axis name is empty");
  }
  return {std::string(text.substr(0, eq)), parse_axis_value(text.substr(eq + 1))};
}

AxisValues resolve_axes(const std::vector<AxisSpec>& specs,
                        const std::vector<std::pair<std::string, std::int64_t>>& overrides,
                        std::string_view target_name) {
  AxisValues values;
  for (const AxisSpec& spec : specs) values[spec.name] = spec.default_value;

  // Later overrides of the same axis win, as with most command-line flags given twice.
  for (const auto& [name, value] : overrides) {
    const AxisSpec* spec = nullptr;
    for (const AxisSpec& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      throw UsageError("target '" + std::string(target_name) + "' has no axis '" + name +
                       "'; its axes: " + axis_list(specs));
    }
    if (value < spec->min_value) {
      throw UsageError("axis '" + name + "' of target '" + std::string(target_name) +
                       "' must be >= " + std::to_string(spec->min_value) + ", got " +
                       std::to_string(value) + "; its axes: " + axis_list(specs));
    }
    values[name] = value;
  }
  return values;
}

AxisRequest parse_axis_sweep(std::string_view text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    throw UsageError("invalid axis assignment '" + std::string(text) + "': expected NAME=VALUE or NAME=V1,V2,...");
  }
  if (eq == 0) {
    throw UsageError("invalid axis assignment '" + std::string(text) + "': the axis name is empty");
  }
  AxisRequest request{std::string(text.substr(0, eq)), {}};
  // The value grammar has no commas, so a comma always separates two values.
  std::string_view rest = text.substr(eq + 1);
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    if (item.empty()) {
      throw UsageError("invalid axis assignment '" + std::string(text) + "': an empty value (" +
                       std::string(k_forms) + ", comma-separated)");
    }
    const std::int64_t value = parse_axis_value(item);
    for (const std::int64_t seen : request.second) {
      if (seen == value) {
        throw UsageError("invalid axis assignment '" + std::string(text) + "': the value " + std::to_string(value) +
                         " is given twice");
      }
    }
    request.second.push_back(value);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return request;
}

std::vector<AxisValues> expand_axis_points(const std::vector<AxisSpec>& specs, const std::vector<AxisRequest>& requests,
                                           std::string_view target_name, std::size_t cap) {
  // Per axis, the values to visit; resolve_axes checks names and minimums one value at a time.
  std::vector<std::vector<std::int64_t>> values;
  for (const AxisSpec& spec : specs) {
    values.push_back(spec.default_sweep.empty() ? std::vector<std::int64_t>{spec.default_value} : spec.default_sweep);
  }
  for (const auto& [name, wanted] : requests) {
    if (wanted.empty()) throw UsageError("axis '" + name + "' is given no value");
    for (const std::int64_t v : wanted) resolve_axes(specs, {{name, v}}, target_name);
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].name == name) values[i] = wanted;
    }
  }
  // A default sweep is the ladder's own promise: check it as strictly as what the CLI asks for.
  for (std::size_t i = 0; i < specs.size(); ++i) {
    for (const std::int64_t v : values[i]) {
      if (v < specs[i].min_value) {
        throw UsageError("axis '" + specs[i].name + "' of target '" + std::string(target_name) + "' sweeps " +
                         std::to_string(v) + ", under its minimum " + std::to_string(specs[i].min_value));
      }
    }
  }
  std::size_t total = 1;
  for (const auto& list : values) {
    if (total > cap / list.size()) total = cap + 1; else total *= list.size();
  }
  if (total > cap) {
    std::string sizes;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (values[i].size() > 1) sizes += (sizes.empty() ? "" : " x ") + specs[i].name + " " + std::to_string(values[i].size());
    }
    throw UsageError("target '" + std::string(target_name) + "' would be measured at more than " +
                     std::to_string(cap) + " axis points (" + sizes + "): sweep fewer values");
  }
  // An odometer over the axes: the last one turns fastest.
  std::vector<AxisValues> points;
  std::vector<std::size_t> index(specs.size(), 0);
  while (true) {
    AxisValues point;
    for (std::size_t i = 0; i < specs.size(); ++i) point[specs[i].name] = values[i][index[i]];
    points.push_back(std::move(point));
    std::size_t k = specs.size();
    while (k > 0 && ++index[k - 1] == values[k - 1].size()) index[--k] = 0;
    if (k == 0) break;
  }
  return points;
}

AxisValues test_axes(const std::vector<AxisSpec>& specs) {
  AxisValues values;
  for (const auto& a : specs) values[a.name] = a.test_value.value_or(a.default_value);
  return values;
}

AxisValues recorded_axes(const std::vector<AxisSpec>& specs, const AxisValues& values) {
  AxisValues out = values;
  for (const AxisSpec& spec : specs) {
    const auto it = out.find(spec.name);
    if (spec.omit_at_default && it != out.end() && it->second == spec.default_value) out.erase(it);
  }
  return out;
}

std::vector<std::string> key_axis_names(const std::vector<AxisSpec>& specs) {
  std::vector<std::string> names;
  for (const AxisSpec& spec : specs) {
    if (!spec.omit_at_default) names.push_back(spec.name);
  }
  return names;
}

std::string format_axes(const AxisValues& axes, std::string_view separator) {
  std::string out;
  for (const auto& [name, value] : axes) {
    if (!out.empty()) out += separator;
    out += name + "=" + std::to_string(value);
  }
  return out;
}

std::string format_axis_default(const AxisSpec& spec) {
  if (spec.default_sweep.empty()) return spec.name + "=" + std::to_string(spec.default_value);
  std::string out = spec.name + "=";
  for (std::size_t i = 0; i < spec.default_sweep.size(); ++i) out += (i ? "," : "") + std::to_string(spec.default_sweep[i]);
  return out;
}

}  // namespace aisp
