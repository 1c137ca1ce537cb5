// safetensors: the writer round-trips, and every way the format can be broken is a one-line DataError
// naming the file, never a crash or a read past the end.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "serving/safetensors.hpp"

namespace aisp::serving {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    m_path = fs::temp_directory_path() / ("aisp_safetensors_" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(m_path);
  }
  ~TempDir() { fs::remove_all(m_path); }
  [[nodiscard]] const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  if (!s.empty()) std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// A file from a raw header text and `data_bytes` bytes of buffer.
std::vector<std::byte> raw_file(const std::string& header, std::size_t data_bytes, std::uint64_t declared_length = 0) {
  const std::uint64_t n = declared_length != 0 ? declared_length : header.size();
  std::vector<std::byte> file(8);
  for (int i = 0; i < 8; ++i) file[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  const auto h = bytes_of(header);
  file.insert(file.end(), h.begin(), h.end());
  file.resize(file.size() + data_bytes, std::byte{0x5a});
  return file;
}

// Asserts a DataError whose one-line message names the file and contains `fragment`.
void expect_data_error(const std::vector<std::byte>& file, const std::string& fragment) {
  try {
    (void)parse_safetensors(file, "bad.safetensors");
    FAIL() << "no error; expected one containing '" << fragment << "'";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("bad.safetensors: ", 0), 0u) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

std::vector<TensorBytes> sample_tensors() {
  std::vector<TensorBytes> t;
  const auto fill = [](std::size_t n, int salt) {
    std::vector<std::byte> b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((i * 7 + salt) & 0xff);
    return b;
  };
  // Deliberately not in name order: the writer sorts.
  t.push_back({"z.weight", "BF16", {2, 3}, fill(12, 1)});
  t.push_back({"a.bias", "F32", {5}, fill(20, 2)});
  t.push_back({"m.scalar", "I64", {}, fill(8, 3)});
  t.push_back({"e.empty", "F16", {0, 4}, {}});
  return t;
}

TEST(Safetensors, RoundTripKeepsBytesShapesAndMetadata) {
  TempDir dir;
  const fs::path path = dir.path() / "x.safetensors";
  const auto tensors = sample_tensors();
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "test"}});
  const auto file = SafetensorsFile::open(path);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (const auto& t : tensors) {
    const auto& got = file.tensors().at(t.name);
    EXPECT_EQ(got.dtype, t.dtype) << t.name;
    EXPECT_EQ(got.shape, t.shape) << t.name;
    ASSERT_EQ(got.bytes.size(), t.bytes.size()) << t.name;
    if (!t.bytes.empty()) {
      EXPECT_EQ(std::memcmp(got.bytes.data(), t.bytes.data(), t.bytes.size()), 0) << t.name;
    }
  }
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "test");
  // Sorted by name: "a.bias" starts the buffer, which is 8-byte aligned in the file.
  const auto whole = file.mapping()->bytes();
  const auto data_start = static_cast<std::size_t>(file.tensors().at("a.bias").bytes.data() - whole.data());
  EXPECT_EQ(data_start % 8, 0u);
  EXPECT_LT(file.tensors().at("a.bias").bytes.data(), file.tensors().at("m.scalar").bytes.data());
  EXPECT_LT(file.tensors().at("m.scalar").bytes.data(), file.tensors().at("z.weight").bytes.data());
  EXPECT_FALSE(fs::exists(path.string() + ".partial"));
}

TEST(Safetensors, EmptyHeaderAndNoDataIsValid) {
  const auto h = parse_safetensors(raw_file("{}", 0), "ok.safetensors");
  EXPECT_TRUE(h.tensors.empty());
  // Trailing spaces are allowed by the spec.
  EXPECT_NO_THROW((void)parse_safetensors(raw_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}   )", 2),
                                          "ok.safetensors"));
}

TEST(Safetensors, ShortFileAndHeaderLengthErrors) {
  expect_data_error({std::byte{1}, std::byte{0}, std::byte{0}}, "shorter than the 8-byte header length");
  expect_data_error(raw_file("{}", 0, 1000), "runs past the end of the file");
  expect_data_error(raw_file("{}", 0, 200'000'000), "100 MB");
  expect_data_error(raw_file("{}", 0, ~0ULL), "100 MB");
}

TEST(Safetensors, BadHeaderJson) {
  expect_data_error(raw_file(R"({"a": )", 0), "not valid JSON");
  expect_data_error(raw_file("[1, 2]", 0), "does not start with '{'");
  expect_data_error(raw_file("", 0), "does not start with '{'");
  expect_data_error(raw_file(R"({"a":1} trailing)", 0), "not valid JSON");
  expect_data_error(raw_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                             R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                             2),
                    "names 'a' twice");
  expect_data_error(raw_file(R"({"__metadata__":{"format":3}})", 0), "__metadata__ 'format' is not a string");
  expect_data_error(raw_file(R"({"a":5})", 0), "tensor 'a': expected an object");
}

TEST(Safetensors, BadTensorEntries) {
  expect_data_error(raw_file(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", 2), "unknown dtype 'Q4'");
  expect_data_error(raw_file(R"({"a":{"shape":[2],"data_offsets":[0,2]}})", 2), "no \"dtype\"");
  expect_data_error(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4), "needs 8");
  expect_data_error(raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "not a non-negative");
  expect_data_error(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), "end before");
  expect_data_error(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8), "data_offsets");
  expect_data_error(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8.5]}})", 8), "non-negative");
  // A shape whose byte count overflows 64 bits.
  expect_data_error(
      raw_file(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8), "overflows");
}

TEST(Safetensors, BufferMustBeExactlyCovered) {
  // Out of range: the data buffer holds 4 bytes, the tensor claims 8.
  expect_data_error(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
                    "run past the data buffer");
  // Overlapping tensors.
  expect_data_error(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                             12),
                    "overlap");
  // A hole between tensors (the spec: the byte buffer cannot contain holes).
  expect_data_error(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                             12),
                    "belong to no tensor");
  // Bytes after the last tensor.
  expect_data_error(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8), "tensors cover 4");
  // A hole at the start.
  expect_data_error(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "belong to no tensor");
}

TEST(Safetensors, TruncatedFilesOnDiskAreRefusedWithTheirName) {
  TempDir dir;
  const fs::path path = dir.path() / "t.safetensors";
  write_safetensors(path, sample_tensors());
  const auto size = fs::file_size(path);
  for (const auto cut : {size - 1, size / 2, std::uintmax_t{20}, std::uintmax_t{4}, std::uintmax_t{0}}) {
    fs::resize_file(path, cut);
    try {
      (void)SafetensorsFile::open(path);
      FAIL() << "truncated to " << cut << " bytes but opened";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW((void)SafetensorsFile::open(dir.path() / "absent.safetensors"), DataError);
  EXPECT_THROW((void)SafetensorsFile::open(dir.path()), DataError);  // a directory
}

// Every prefix and every single-byte corruption of a valid file parses or is a DataError: no other
// exception, no crash (run under ASan/UBSan this also proves no read past the span).
TEST(Safetensors, PrefixesAndByteFlipsNeverCrash) {
  TempDir dir;
  const fs::path path = dir.path() / "f.safetensors";
  write_safetensors(path, sample_tensors());
  std::vector<std::byte> good(fs::file_size(path));
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(good.data()), static_cast<std::streamsize>(good.size()));
  ASSERT_NO_THROW((void)parse_safetensors(good, "good"));
  for (std::size_t n = 0; n < good.size(); ++n) {
    const std::vector<std::byte> prefix(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW((void)parse_safetensors(prefix, "prefix"), DataError) << n;
  }
  std::mt19937 rng(7);
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    auto bad = good;
    const std::size_t at = rng() % (bad.size() - 8 > 200 ? 8 + 200 : bad.size());  // length + header region
    bad[at] = static_cast<std::byte>(rng() & 0xff);
    try {
      (void)parse_safetensors(bad, "flipped");
    } catch (const DataError&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 1000);  // most flips in the header must be caught
}

TEST(Safetensors, WriterRefusesInconsistentInput) {
  TempDir dir;
  EXPECT_THROW(write_safetensors(dir.path() / "a.safetensors", {{"a", "F32", {2}, std::vector<std::byte>(4)}}),
               UsageError);
  EXPECT_THROW(write_safetensors(dir.path() / "b.safetensors", {{"a", "Q4", {2}, std::vector<std::byte>(2)}}),
               UsageError);
  EXPECT_THROW(write_safetensors(dir.path() / "c.safetensors",
                                 {{"a", "U8", {1}, std::vector<std::byte>(1)}, {"a", "U8", {1}, std::vector<std::byte>(1)}}),
               UsageError);
  EXPECT_THROW(write_safetensors(dir.path() / "no_such_dir" / "d.safetensors", {}), UsageError);
  EXPECT_EQ(safetensors_dtype_size("BF16"), 2u);
  EXPECT_EQ(safetensors_dtype_size("F8_E4M3"), 1u);
  EXPECT_FALSE(safetensors_dtype_size("bf16"));
}

}  // namespace
}  // namespace aisp::serving
