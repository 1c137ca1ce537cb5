// ch14's on-disk cache: compiled cubins (ch14:jit_specialize) and autotuning winners (ch14:autotune),
// one file per key, in $AISP_CACHE_DIR (else $XDG_CACHE_HOME/aisp/jit, else ~/.cache/aisp/jit).
//
// Not a ladder: host code both ch14 ladders share. Header-only and free of CUDA headers, so that the CPU
// tests (common/cpu_test_kernel_cache.cpp) cover the key, the file format and its validation.
//
// The key is a text of "field=value" lines: everything the cached bytes depend on (the full source's hash,
// the compiler options and version, the device's name and compute capability, the shape). The file name is
// the key's 64-bit FNV-1a hash; the file stores the whole key too, so that a hash collision or a stale file
// reads as a miss, never as someone else's cubin.
//
// File format (integers little-endian):
//   8 bytes  magic "AISPKC01"
//   4 bytes  key length      8 bytes payload length      8 bytes payload FNV-1a
//   key bytes, payload bytes: nothing after them
// A file that is absent is a plain miss. A file that is short, long, has the wrong magic, another key or a
// payload whose checksum does not match is ignored with a one-line warning and replaced by the next store.
// Nothing here throws on a bad file or an unwritable directory: a cache that cannot help costs a compile.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace aisp::ch14 {

inline constexpr std::string_view k_cache_magic = "AISPKC01";
inline constexpr std::size_t k_cache_header_bytes = 8 + 4 + 8 + 8;
inline constexpr std::size_t k_cache_max_key_bytes = std::size_t{1} << 16;       // keys are a few lines
inline constexpr std::size_t k_cache_max_payload_bytes = std::size_t{256} << 20;  // a cubin is KBs to MBs

// 64-bit FNV-1a: tiny, deterministic across hosts and runs (std::hash is neither), good enough to name
// files and catch a torn or bit-flipped payload. Not a cryptographic hash; the key text is checked too.
inline std::uint64_t fnv1a64(std::string_view data, std::uint64_t h = 14695981039346656037ull) {
  for (const unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

inline std::string hex64(std::uint64_t v) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = k_digits[v & 0xf];
  return s;
}

// Builds a key text, one "name=value" line per field, in the order added. A newline inside a value would
// let two different field lists print the same text; it becomes a space.
class CacheKey {
 public:
  CacheKey& add(std::string_view name, std::string_view value) {
    m_text.append(name);
    m_text.push_back('=');
    for (const char c : value) m_text.push_back(c == '\n' || c == '\r' ? ' ' : c);
    m_text.push_back('\n');
    return *this;
  }
  CacheKey& add(std::string_view name, long long value) { return add(name, std::to_string(value)); }
  const std::string& text() const { return m_text; }
  // "<kind>-<16 hex digits>.bin": what the entry is, and the key's hash.
  std::string file_name(std::string_view kind) const {
    return std::string(kind) + "-" + hex64(fnv1a64(m_text)) + ".bin";
  }

 private:
  std::string m_text;
};

namespace detail {

inline void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i, v >>= 8) out.push_back(static_cast<char>(v & 0xff));
}

inline std::uint64_t get_le(std::string_view in, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[at + static_cast<std::size_t>(i)]);
  return v;
}

}  // namespace detail

// The bytes of one cache file.
inline std::string encode_cache_entry(std::string_view key, std::string_view payload) {
  std::string out;
  out.reserve(k_cache_header_bytes + key.size() + payload.size());
  out.append(k_cache_magic);
  detail::put_le(out, key.size(), 4);
  detail::put_le(out, payload.size(), 8);
  detail::put_le(out, fnv1a64(payload), 8);
  out.append(key);
  out.append(payload);
  return out;
}

// The payload of `bytes` when they are a valid entry for `key`; else nullopt and `why` says what is wrong.
inline std::optional<std::string> decode_cache_entry(std::string_view bytes, std::string_view key, std::string* why) {
  const auto fail = [&](std::string reason) -> std::optional<std::string> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (bytes.size() < k_cache_header_bytes) return fail("truncated header (" + std::to_string(bytes.size()) + " bytes)");
  if (bytes.substr(0, k_cache_magic.size()) != k_cache_magic) return fail("bad magic (not an aisp cache file)");
  const std::uint64_t key_len = detail::get_le(bytes, 8, 4);
  const std::uint64_t payload_len = detail::get_le(bytes, 12, 8);
  const std::uint64_t checksum = detail::get_le(bytes, 20, 8);
  if (key_len > k_cache_max_key_bytes || payload_len > k_cache_max_payload_bytes) {
    return fail("implausible lengths in header");
  }
  const std::uint64_t want_size = k_cache_header_bytes + key_len + payload_len;
  if (bytes.size() != want_size) {
    return fail("size " + std::to_string(bytes.size()) + " bytes, header says " + std::to_string(want_size));
  }
  if (bytes.substr(k_cache_header_bytes, key_len) != key) return fail("stored key differs (stale entry or hash collision)");
  const std::string_view payload = bytes.substr(k_cache_header_bytes + key_len);
  if (fnv1a64(payload) != checksum) return fail("payload checksum mismatch (corrupt file)");
  if (why) why->clear();
  return std::string(payload);
}

// The cache directory from the environment's values (each may be null or empty): $AISP_CACHE_DIR as is,
// else $XDG_CACHE_HOME/aisp/jit, else $HOME/.cache/aisp/jit; empty when none is set (caching off).
inline std::filesystem::path resolve_cache_dir(const char* aisp_cache_dir, const char* xdg_cache_home,
                                               const char* home) {
  const auto set = [](const char* v) { return v != nullptr && *v != '\0'; };
  if (set(aisp_cache_dir)) return std::filesystem::path(aisp_cache_dir);
  if (set(xdg_cache_home)) return std::filesystem::path(xdg_cache_home) / "aisp" / "jit";
  if (set(home)) return std::filesystem::path(home) / ".cache" / "aisp" / "jit";
  return {};
}

inline std::filesystem::path cache_dir_from_env() {
  return resolve_cache_dir(std::getenv("AISP_CACHE_DIR"), std::getenv("XDG_CACHE_HOME"), std::getenv("HOME"));
}

// Loads and stores entries in one directory. Warnings (one line each) go to `log`; `who` prefixes them
// ("aisp ch14:jit_specialize").
class KernelCache {
 public:
  KernelCache(std::filesystem::path dir, std::ostream& log, std::string who)
      : m_dir(std::move(dir)), m_log(&log), m_who(std::move(who)) {}

  bool enabled() const { return !m_dir.empty(); }
  const std::filesystem::path& dir() const { return m_dir; }
  std::filesystem::path path_of(const CacheKey& key, std::string_view kind) const {
    return m_dir / key.file_name(kind);
  }

  // The payload stored under `key`, or nullopt: absent (silently) or invalid (with a warning).
  std::optional<std::string> load(const CacheKey& key, std::string_view kind) const {
    if (!enabled()) return std::nullopt;
    const std::filesystem::path path = path_of(key, kind);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      warn("ignoring " + path.string() + ": cannot open it");
      return std::nullopt;
    }
    // Read at most one byte past the largest valid file, so that a huge file is refused, not loaded.
    const std::size_t limit = k_cache_header_bytes + k_cache_max_key_bytes + k_cache_max_payload_bytes + 1;
    std::string bytes;
    char buf[1 << 16];
    while (bytes.size() < limit && in.read(buf, sizeof buf).gcount() > 0) {
      bytes.append(buf, static_cast<std::size_t>(in.gcount()));
    }
    std::string why;
    auto payload = decode_cache_entry(bytes, key.text(), &why);
    if (!payload) warn("ignoring " + path.string() + ": " + why);
    return payload;
  }

  // Writes the entry atomically (a temporary file in the same directory, then rename), so that a reader
  // racing a writer (two workers on one machine) sees the old file or the new one, never half of one.
  // Returns false, with a warning, when the directory or the file cannot be written.
  bool store(const CacheKey& key, std::string_view kind, std::string_view payload) const {
    if (!enabled()) return false;
    const std::filesystem::path path = path_of(key, kind);
    std::error_code ec;
    std::filesystem::create_directories(m_dir, ec);
    if (ec) {
      warn("cannot create " + m_dir.string() + ": " + ec.message() + " (not cached)");
      return false;
    }
    static std::atomic<unsigned> counter{0};
    const std::filesystem::path tmp =
        path.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      const std::string bytes = encode_cache_entry(key.text(), payload);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      out.close();
      if (!out) {
        std::filesystem::remove(tmp, ec);
        warn("cannot write " + tmp.string() + " (not cached)");
        return false;
      }
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      warn("cannot rename into " + path.string() + ": " + ec.message() + " (not cached)");
      return false;
    }
    return true;
  }

  void note(const std::string& line) const { *m_log << m_who << ": " << line << '\n' << std::flush; }

 private:
  void warn(const std::string& line) const { note("warning: cache " + line); }

  std::filesystem::path m_dir;
  std::ostream* m_log;
  std::string m_who;
};

}  // namespace aisp::ch14
