// ch14's on-disk kernel cache (common/kernel_cache.hpp): keys, the file format, and that bad files are
// ignored with one warning line instead of trusted or crashed on.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "chapters/ch14_compilers/common/kernel_cache.hpp"

namespace {

using namespace aisp::ch14;
namespace fs = std::filesystem;

TEST(Ch14CacheKey, Fnv1aMatchesThePublishedVectors) {
  // Test vectors of the FNV-1a 64-bit hash (the reference implementation's test suite).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(hex64(0x85944171f73967e8ull), "85944171f73967e8");
  EXPECT_EQ(hex64(1), "0000000000000001");
}

TEST(Ch14CacheKey, EveryFieldChangesTheKeyAndTheFileName) {
  const auto key = [](std::string device, int cc, std::string options) {
    CacheKey k;
    k.add("source", "abc").add("device", device).add("cc", cc).add("options", options);
    return k;
  };
  const CacheKey base = key("NVIDIA H100", 90, "-arch=sm_90");
  EXPECT_EQ(base.text(), "source=abc\ndevice=NVIDIA H100\ncc=90\noptions=-arch=sm_90\n");
  for (const CacheKey& other : {key("NVIDIA H200", 90, "-arch=sm_90"), key("NVIDIA H100", 100, "-arch=sm_90"),
                                key("NVIDIA H100", 90, "-arch=sm_100")}) {
    EXPECT_NE(other.text(), base.text());
    EXPECT_NE(other.file_name("cubin"), base.file_name("cubin"));
  }
  EXPECT_EQ(base.file_name("cubin"), key("NVIDIA H100", 90, "-arch=sm_90").file_name("cubin"));
  EXPECT_EQ(base.file_name("cubin").rfind("cubin-", 0), 0u);
  EXPECT_NE(base.file_name("cubin"), base.file_name("autotune"));
}

TEST(Ch14CacheKey, NewlinesInAValueCannotForgeAnotherField) {
  CacheKey forged, honest;
  forged.add("device", "X\ncc=90");
  honest.add("device", "X").add("cc", 90);
  EXPECT_NE(forged.text(), honest.text());
  EXPECT_EQ(forged.text(), "device=X cc=90\n");
}

TEST(Ch14CacheEntry, RoundTripsAnyBytes) {
  std::string payload = "cubin";
  payload.push_back('\0');
  payload += "\xff\x01 binary";
  const std::string bytes = encode_cache_entry("k=1\n", payload);
  EXPECT_EQ(bytes.size(), k_cache_header_bytes + 4 + payload.size());
  std::string why = "stale";
  const auto got = decode_cache_entry(bytes, "k=1\n", &why);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, payload);
  EXPECT_TRUE(why.empty());
  EXPECT_TRUE(decode_cache_entry(encode_cache_entry("k", ""), "k", nullptr).has_value());
}

TEST(Ch14CacheEntry, RejectsEveryKindOfDamageWithAReason) {
  const std::string good = encode_cache_entry("key=1\n", "payload bytes");
  const auto reason = [](const std::string& bytes, const std::string& key) {
    std::string why;
    EXPECT_FALSE(decode_cache_entry(bytes, key, &why).has_value());
    return why;
  };
  EXPECT_NE(reason("", "key=1\n").find("truncated"), std::string::npos);
  EXPECT_NE(reason(good.substr(0, 10), "key=1\n").find("truncated"), std::string::npos);
  std::string magic = good;
  magic[0] = 'X';
  EXPECT_NE(reason(magic, "key=1\n").find("magic"), std::string::npos);
  EXPECT_NE(reason(good.substr(0, good.size() - 1), "key=1\n").find("size"), std::string::npos);
  EXPECT_NE(reason(good + "x", "key=1\n").find("size"), std::string::npos);
  EXPECT_NE(reason(good, "key=2\n").find("key differs"), std::string::npos);
  std::string flipped = good;
  flipped.back() ^= 0x01;
  EXPECT_NE(reason(flipped, "key=1\n").find("checksum"), std::string::npos);
  std::string huge = good;
  huge[12 + 7] = '\x7f';  // the payload length's top byte
  EXPECT_NE(reason(huge, "key=1\n").find("implausible"), std::string::npos);
}

TEST(Ch14CacheDir, FollowsTheEnvironmentInOrder) {
  EXPECT_EQ(resolve_cache_dir("/c", "/x", "/h"), fs::path("/c"));
  EXPECT_EQ(resolve_cache_dir("", "/x", "/h"), fs::path("/x/aisp/jit"));
  EXPECT_EQ(resolve_cache_dir(nullptr, nullptr, "/h"), fs::path("/h/.cache/aisp/jit"));
  EXPECT_TRUE(resolve_cache_dir(nullptr, "", nullptr).empty());
}

class Ch14CacheFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("aisp_ch14_cache_test_" + std::to_string(::getpid()));
    fs::remove_all(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }
  static void write_file(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  }
  fs::path m_dir;
  std::ostringstream m_log;
};

TEST_F(Ch14CacheFiles, AMissIsSilentAndAStoreIsReadBack) {
  const KernelCache cache(m_dir / "nested" / "jit", m_log, "test");
  CacheKey key;
  key.add("shape", "16x64");
  EXPECT_FALSE(cache.load(key, "cubin").has_value());
  EXPECT_TRUE(m_log.str().empty());
  ASSERT_TRUE(cache.store(key, "cubin", "the cubin"));
  EXPECT_TRUE(fs::is_regular_file(cache.path_of(key, "cubin")));
  EXPECT_EQ(cache.load(key, "cubin").value_or(""), "the cubin");
  EXPECT_TRUE(m_log.str().empty());
  // No temporary files left beside the entry.
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(cache.dir())) ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(Ch14CacheFiles, ACorruptFileIsIgnoredWithOneWarningLineThenReplaced) {
  const KernelCache cache(m_dir, m_log, "aisp ch14:test");
  CacheKey key;
  key.add("shape", "16x64");
  fs::create_directories(m_dir);
  write_file(cache.path_of(key, "cubin"), "garbage that is long enough to have a header");
  EXPECT_FALSE(cache.load(key, "cubin").has_value());
  const std::string log = m_log.str();
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_EQ(log.rfind("aisp ch14:test: warning: cache ignoring ", 0), 0u) << log;
  EXPECT_NE(log.find("bad magic"), std::string::npos) << log;
  ASSERT_TRUE(cache.store(key, "cubin", "fresh"));
  EXPECT_EQ(cache.load(key, "cubin").value_or(""), "fresh");
}

TEST_F(Ch14CacheFiles, AnotherKeysFileUnderThisNameIsAMiss) {
  const KernelCache cache(m_dir, m_log, "test");
  CacheKey mine, theirs;
  mine.add("shape", "a");
  theirs.add("shape", "b");
  fs::create_directories(m_dir);
  // As if the two keys' hashes collided: their entry under my file name.
  write_file(cache.path_of(mine, "cubin"), encode_cache_entry(theirs.text(), "their cubin"));
  EXPECT_FALSE(cache.load(mine, "cubin").has_value());
  EXPECT_NE(m_log.str().find("key differs"), std::string::npos);
}

TEST_F(Ch14CacheFiles, ADirectoryInTheWayOrNoDirectoryNeverThrows) {
  CacheKey key;
  key.add("k", "v");
  fs::create_directories(m_dir);
  write_file(m_dir / "file", "x");
  const KernelCache blocked(m_dir / "file" / "sub", m_log, "test");  // a file where a directory should be
  EXPECT_FALSE(blocked.store(key, "cubin", "bytes"));
  EXPECT_NE(m_log.str().find("cannot create"), std::string::npos);
  EXPECT_FALSE(blocked.load(key, "cubin").has_value());
  const KernelCache off({}, m_log, "test");
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.store(key, "cubin", "bytes"));
  EXPECT_FALSE(off.load(key, "cubin").has_value());
}

}  // namespace
