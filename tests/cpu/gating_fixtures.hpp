// Shared by the regression-gating tests: the two stored runs under fixtures/runs/, a scratch
// chapters tree, and golden-file comparison (AISP_UPDATE_GOLDEN=1 rewrites the golden files
// instead).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/results/run_folder.hpp"

namespace aisp::testing {

inline const std::string k_data_dir = AISP_TEST_DATA_DIR;
// Run A: every ch07:copy variant PASS, no ceilings. Run B, a day later on a dirty tree:
// 03_vectorized at twice A's time (the AISP_TEST_SLOWDOWN build), 02_coalesced NOISY, ceilings and
// roofline placements.
inline const std::string k_run_a = k_data_dir + "/fixtures/runs/20261120T090000Z_ch07-copy";
inline const std::string k_run_b = k_data_dir + "/fixtures/runs/20261121T093000Z_ch07-copy";

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void spit(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A fresh folder under the build tree's temp area, removed at the end of the test.
class ScratchDir {
public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    m_path = std::filesystem::temp_directory_path() /
             (std::string("aisp_") + info->test_suite_name() + "_" + info->name() + "_" +
              std::to_string(::getpid()));
    std::filesystem::remove_all(m_path);
    std::filesystem::create_directories(m_path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  std::string str() const { return m_path.string(); }
  std::string operator/(const std::string& rel) const { return (m_path / rel).string(); }

private:
  std::filesystem::path m_path;
};

// chapters/ch07_memory_access/copy/ with its problem.hpp and a README carrying the markers, under `root`.
inline std::string make_chapters(const ScratchDir& root) {
  const std::string chapters = root / "chapters";
  spit(chapters + "/ch07_memory_access/copy/problem.hpp", "// fixture: marks a ladder folder\n");
  spit(chapters + "/ch07_memory_access/copy/README.md",
       "# ch07:copy\n\nWhat the ladder teaches.\n\n## Results\n\n<!-- aisp:results:begin -->\n"
       "(typed by hand: must be replaced)\n<!-- aisp:results:end -->\n\nAfter the table.\n");
  return chapters;
}

// Compares `text` with the golden file; with AISP_UPDATE_GOLDEN=1 in the environment, rewrites it.
inline void expect_golden(const std::string& text, const std::string& golden_rel) {
  const std::string path = k_data_dir + "/golden/" + golden_rel;
  if (const char* u = std::getenv("AISP_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    spit(path, text);
    return;
  }
  const std::string want = slurp(path);
  ASSERT_FALSE(want.empty()) << "missing golden file " << path
                             << " (AISP_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(text, want) << "differs from " << path
                        << " (AISP_UPDATE_GOLDEN=1 rewrites it after a deliberate change)";
}

} // namespace aisp::testing
