// The safetensors format (https://github.com/huggingface/safetensors, README "Format"): an 8-byte
// little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]},
// optional "__metadata__": {string: string}}, then the data buffer. The reader memory-maps a file and
// checks every rule the format states (the byte buffer fully indexed: no holes, no overlaps, nothing past
// the last tensor); the writer streams tensors to disk so a 16 GB model never sits in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "serving/model_weights.hpp"

namespace aisp::serving {

// Bytes per element of a safetensors dtype string ("BF16" -> 2); nullopt for an unknown one or a
// sub-byte one (F4, F6_*) that this engine never reads.
[[nodiscard]] std::optional<std::size_t> safetensors_dtype_size(std::string_view dtype);

// The spec's limit on the JSON header (it guards against header bombs).
inline constexpr std::uint64_t k_safetensors_max_header = 100'000'000;

// A read-only memory map of a whole file, unmapped when the last owner goes.
class MappedFile {
 public:
  // Throws aisp::DataError naming the file when it cannot be opened or mapped.
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  [[nodiscard]] std::span<const std::byte> bytes() const { return {m_data, m_size}; }
  [[nodiscard]] const std::filesystem::path& path() const { return m_path; }

 private:
  MappedFile() = default;
  std::filesystem::path m_path;
  const std::byte* m_data = nullptr;
  std::size_t m_size = 0;
};

struct SafetensorsHeader {
  std::map<std::string, TensorData> tensors;       // views into the buffer given to the parser
  std::map<std::string, std::string> metadata;     // "__metadata__"
  std::uint64_t data_offset = 0;                   // 8 + N: where the byte buffer starts
};

// Parses and validates a whole safetensors file held in `file`; `name` heads every error message
// ("<name>: ..."). Throws aisp::DataError, one line, on anything the format forbids.
[[nodiscard]] SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& name);

// A mapped, validated safetensors file. Its TensorData views live as long as the mapping does.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);
  [[nodiscard]] const std::filesystem::path& path() const { return m_file->path(); }
  [[nodiscard]] const std::map<std::string, TensorData>& tensors() const { return m_header.tensors; }
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const { return m_header.metadata; }
  [[nodiscard]] const std::shared_ptr<const MappedFile>& mapping() const { return m_file; }

 private:
  std::shared_ptr<const MappedFile> m_file;
  SafetensorsHeader m_header;
};

// --- writing ---

struct TensorSpec {
  std::string name;
  std::string dtype;                   // "BF16", "F32", ...
  std::vector<std::int64_t> shape;
};

// Fills `out` with bytes [offset, offset + out.size()) of `tensor`'s data. Called in order, chunk by chunk.
using TensorFiller =
    std::function<void(const TensorSpec& tensor, std::int64_t offset, std::span<std::byte> out)>;
// Bytes written so far and the file's total, after each chunk.
using WriteProgress = std::function<void(std::int64_t written, std::int64_t total)>;

// Bytes of one tensor's data (element count x dtype size); throws aisp::UsageError on an unknown dtype,
// a negative dimension or an overflow.
[[nodiscard]] std::int64_t tensor_byte_size(const TensorSpec& tensor);

// Writes a safetensors file with the tensors sorted by name, the header padded with spaces to a multiple
// of 8 (so every BF16/F32 tensor stays aligned in a mapping), "__metadata__" = `metadata` (transformers'
// from_pretrained wants {"format": "pt"}). The data is streamed: `fill` produces it chunk by chunk.
// Writes to "<path>.partial" and renames at the end, so a killed writer never leaves a plausible file.
// Throws aisp::UsageError when the file cannot be written (unwritable folder, full disk).
void write_safetensors_streaming(const std::filesystem::path& path, std::vector<TensorSpec> tensors,
                                 const TensorFiller& fill,
                                 const std::map<std::string, std::string>& metadata = {{"format", "pt"}},
                                 const WriteProgress& progress = {});

struct TensorBytes {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;        // exactly tensor_byte_size({name, dtype, shape}) bytes
};
// In-memory convenience over write_safetensors_streaming (tests, small files).
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorBytes>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace aisp::serving
