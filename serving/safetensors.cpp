// safetensors reading (mmap + validation) and streaming writing. Every rule checked here is one the
// format's README states or the reference implementation (safetensors/src/tensor.rs) enforces: a
// file that breaks one is refused with a one-line aisp::DataError, never read past its end.
#include "serving/safetensors.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/error.hpp"
#include "serving/json_file.hpp"

namespace aisp::serving {

namespace {

using nlohmann::json;

std::uint64_t read_le64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(p[i]);
  return v;
}

std::string shape_string(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

struct Entry {
  std::string name;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

// One tensor's header entry -> TensorData (without the bytes), checking the entry's own consistency.
TensorData parse_entry(const std::string& file, const std::string& key, const json& v, Entry& entry) {
  const auto fail = [&](const std::string& problem) -> DataError {
    return DataError(fmt::format("{}: tensor '{}': {}", file, key, problem));
  };
  if (!v.is_object()) throw fail(fmt::format("expected an object, got {}", v.type_name()));
  const auto dtype_it = v.find("dtype");
  if (dtype_it == v.end() || !dtype_it->is_string()) throw fail("no \"dtype\" string");
  TensorData t;
  t.dtype = dtype_it->get<std::string>();
  const auto size = safetensors_dtype_size(t.dtype);
  if (!size) throw fail(fmt::format("unknown dtype '{}'", t.dtype));

  const auto shape_it = v.find("shape");
  if (shape_it == v.end() || !shape_it->is_array()) throw fail("no \"shape\" list");
  std::uint64_t elements = 1;
  for (const auto& d : *shape_it) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
      throw fail(fmt::format("shape {} has a dimension that is not a non-negative integer", shape_it->dump()));
    const auto n = d.get<std::uint64_t>();
    if (n > static_cast<std::uint64_t>(INT64_MAX) || __builtin_mul_overflow(elements, n, &elements))
      throw fail(fmt::format("shape {} overflows", shape_it->dump()));
    t.shape.push_back(static_cast<std::int64_t>(n));
  }
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(*size), &bytes))
    throw fail(fmt::format("shape {} overflows", shape_it->dump()));

  const auto off_it = v.find("data_offsets");
  if (off_it == v.end() || !off_it->is_array() || off_it->size() != 2)
    throw fail("no \"data_offsets\" [begin, end]");
  for (const auto& o : *off_it)
    if (!o.is_number_integer() || o.get<std::int64_t>() < 0)
      throw fail(fmt::format("data_offsets {} are not non-negative integers", off_it->dump()));
  entry.name = key;
  entry.begin = (*off_it)[0].get<std::uint64_t>();
  entry.end = (*off_it)[1].get<std::uint64_t>();
  if (entry.end < entry.begin) throw fail(fmt::format("data_offsets {} end before they begin", off_it->dump()));
  if (entry.end - entry.begin != bytes)
    throw fail(fmt::format("data_offsets {} hold {} bytes but {} {} needs {}", off_it->dump(), entry.end - entry.begin,
                           t.dtype, shape_string(t.shape), bytes));
  return t;
}

// The header as JSON, with duplicate top-level keys refused (the README: "Duplicate keys are
// disallowed"; nlohmann would silently keep the last one).
json parse_header_json(const std::string& file, std::string_view text) {
  if (text.empty() || text.front() != '{')
    throw DataError(fmt::format("{}: header does not start with '{{' (not a safetensors file?)", file));
  std::set<std::string> keys;
  std::string duplicate;
  const json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && duplicate.empty()) {
      auto key = parsed.get<std::string>();
      if (!keys.insert(key).second) duplicate = std::move(key);
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), on_event);
  } catch (const json::exception& e) {
    throw DataError(fmt::format("{}: header is not valid JSON: {}", file, one_line(e.what())));
  }
  if (!duplicate.empty()) throw DataError(fmt::format("{}: header names '{}' twice", file, duplicate));
  if (!header.is_object()) throw DataError(fmt::format("{}: header is not a JSON object", file));
  return header;
}

}  // namespace

std::optional<std::size_t> safetensors_dtype_size(std::string_view dtype) {
  static constexpr std::pair<std::string_view, std::size_t> k_sizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"I16", 2},
      {"U16", 2},  {"F16", 2}, {"BF16", 2}, {"I32", 4},    {"U32", 4},     {"F32", 4},     {"F64", 8},
      {"I64", 8},  {"U64", 8},
  };
  for (const auto& [name, size] : k_sizes)
    if (name == dtype) return size;
  return std::nullopt;
}

SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& name) {
  if (file.size() < 8)
    throw DataError(fmt::format("{}: {} bytes, shorter than the 8-byte header length", name, file.size()));
  const std::uint64_t n = read_le64(file.data());
  if (n > k_safetensors_max_header)
    throw DataError(fmt::format("{}: header length {} exceeds the format's 100 MB limit", name, n));
  if (n > file.size() - 8)
    throw DataError(fmt::format("{}: header length {} runs past the end of the file ({} bytes)", name, n, file.size()));
  const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), n);
  const json header = parse_header_json(name, text);

  SafetensorsHeader out;
  out.data_offset = 8 + n;
  const std::span<const std::byte> data = file.subspan(out.data_offset);
  std::vector<Entry> entries;
  for (const auto& [key, v] : header.items()) {
    if (key == "__metadata__") {
      if (!v.is_object()) throw DataError(fmt::format("{}: __metadata__ is not an object", name));
      for (const auto& [mk, mv] : v.items()) {
        if (!mv.is_string())
          throw DataError(fmt::format("{}: __metadata__ '{}' is not a string", name, mk));
        out.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    Entry e;
    TensorData t = parse_entry(name, key, v, e);
    if (e.end > data.size())
      throw DataError(fmt::format("{}: tensor '{}': data_offsets [{}, {}] run past the data buffer ({} bytes)", name,
                                  key, e.begin, e.end, data.size()));
    t.bytes = data.subspan(e.begin, e.end - e.begin);
    out.tensors.emplace(key, std::move(t));
    entries.push_back(std::move(e));
  }
  // "The byte buffer needs to be entirely indexed, and cannot contain holes": sorted by position, each
  // tensor starts where the previous one ended, and the last ends at the end of the file.
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  std::uint64_t at = 0;
  const Entry* previous = nullptr;
  for (const auto& e : entries) {
    if (e.begin < at)
      throw DataError(fmt::format("{}: tensors '{}' and '{}' overlap (bytes [{}, {}) and [{}, {}))", name,
                                  previous->name, e.name, previous->begin, previous->end, e.begin, e.end));
    if (e.begin > at)
      throw DataError(fmt::format("{}: data bytes [{}, {}) belong to no tensor (before '{}')", name, at, e.begin,
                                  e.name));
    at = e.end;
    previous = &e;
  }
  if (at != data.size())
    throw DataError(fmt::format("{}: data buffer is {} bytes but the tensors cover {}", name, data.size(), at));
  return out;
}

// --- MappedFile / SafetensorsFile ---

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw DataError(fmt::format("{}: not a regular file", path.string()));
  }
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->m_path = path;
  m->m_size = static_cast<std::size_t>(st.st_size);
  if (m->m_size > 0) {  // mmap refuses a zero length; an empty file simply has no bytes
    void* p = ::mmap(nullptr, m->m_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw DataError(fmt::format("{}: cannot map: {}", path.string(), std::strerror(err)));
    }
    m->m_data = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  return m;
}

MappedFile::~MappedFile() {
  if (m_data != nullptr) ::munmap(const_cast<std::byte*>(m_data), m_size);
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile f;
  f.m_file = MappedFile::open(path);
  f.m_header = parse_safetensors(f.m_file->bytes(), path.string());
  return f;
}

// --- writing ---

std::int64_t tensor_byte_size(const TensorSpec& tensor) {
  const auto size = safetensors_dtype_size(tensor.dtype);
  if (!size) throw UsageError(fmt::format("tensor '{}': unknown dtype '{}'", tensor.name, tensor.dtype));
  std::int64_t n = static_cast<std::int64_t>(*size);
  for (auto d : tensor.shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      throw UsageError(fmt::format("tensor '{}': bad shape {}", tensor.name, shape_string(tensor.shape)));
  return n;
}

void write_safetensors_streaming(const std::filesystem::path& path, std::vector<TensorSpec> tensors,
                                 const TensorFiller& fill, const std::map<std::string, std::string>& metadata,
                                 const WriteProgress& progress) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (t.name == "__metadata__" || (i > 0 && tensors[i - 1].name == t.name))
      throw UsageError(fmt::format("{}: tensor name '{}' is reserved or repeated", path.string(), t.name));
    const std::int64_t bytes = tensor_byte_size(t);
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the spec allows trailing spaces; keeps the data 8-aligned
  const std::int64_t total = 8 + static_cast<std::int64_t>(text.size()) + offset;

  const std::filesystem::path partial = path.string() + ".partial";
  std::FILE* f = std::fopen(partial.c_str(), "wb");
  if (f == nullptr) throw UsageError(fmt::format("{}: cannot write: {}", partial.string(), std::strerror(errno)));
  const auto write_or_throw = [&](const void* p, std::size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, f) != n) {
      const int err = errno;
      std::fclose(f);
      std::filesystem::remove(partial);
      throw UsageError(fmt::format("{}: write failed: {}", partial.string(), std::strerror(err)));
    }
  };
  std::byte length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<std::byte>((text.size() >> (8 * i)) & 0xff);
  write_or_throw(length, 8);
  write_or_throw(text.data(), text.size());
  std::int64_t written = 8 + static_cast<std::int64_t>(text.size());

  constexpr std::int64_t k_chunk = 64 << 20;  // large writes keep the disk busy; small enough to stay in RAM
  std::vector<std::byte> buffer;
  for (const auto& t : tensors) {
    const std::int64_t bytes = tensor_byte_size(t);
    for (std::int64_t at = 0; at < bytes; at += k_chunk) {
      const std::int64_t n = std::min(k_chunk, bytes - at);
      buffer.resize(static_cast<std::size_t>(n));
      try {
        fill(t, at, std::span<std::byte>(buffer.data(), buffer.size()));
      } catch (...) {
        std::fclose(f);
        std::filesystem::remove(partial);
        throw;
      }
      write_or_throw(buffer.data(), buffer.size());
      written += n;
      if (progress) progress(written, total);
    }
  }
  if (std::fclose(f) != 0) {
    std::filesystem::remove(partial);
    throw UsageError(fmt::format("{}: write failed: {}", partial.string(), std::strerror(errno)));
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) throw UsageError(fmt::format("{}: cannot rename from {}: {}", path.string(), partial.string(), ec.message()));
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorBytes>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  std::map<std::string, const TensorBytes*> by_name;
  for (const auto& t : tensors) {
    TensorSpec s{t.name, t.dtype, t.shape};
    if (tensor_byte_size(s) != static_cast<std::int64_t>(t.bytes.size()))
      throw UsageError(fmt::format("tensor '{}': {} bytes given, {} {} needs {}", t.name, t.bytes.size(), t.dtype,
                                   shape_string(t.shape), tensor_byte_size(s)));
    by_name[t.name] = &t;
    specs.push_back(std::move(s));
  }
  write_safetensors_streaming(
      path, std::move(specs),
      [&](const TensorSpec& t, std::int64_t offset, std::span<std::byte> out) {
        std::memcpy(out.data(), by_name.at(t.name)->bytes.data() + offset, out.size());
      },
      metadata);
}

}  // namespace aisp::serving
