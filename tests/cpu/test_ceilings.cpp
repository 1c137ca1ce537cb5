// Ceilings as data: the datasheet table, the probe groups, the JSON of a CeilingSet and the cache file
// (atomic write, round trip, and every way a cache can be untrustworthy).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "core/ceilings/ceilings.hpp"
#include "core/base/error.hpp"
#include "ceilings_fixtures.hpp"

namespace {

using namespace aisp;
using aisp::testing::measured;
namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("aisp_ceilings_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

CeilingSet sample_set() {
  CeilingSet s;
  s.gpu_name = "NVIDIA H100 80GB HBM3";
  s.gpu_uuid = "GPU-01234567-89ab-cdef-0123-456789abcdef";
  s.driver_version = "580.159.04";
  s.hardware_key = "h100_sxm";
  s.cc = 90;
  s.sm_count = 132;
  s.l2_bytes = 50 << 20;
  s.aisp_git_sha = "abc";
  s.entries.push_back(measured("dram_copy", "dram", k_unit_gb_s, 3012.4));
  s.entries.push_back(measured("tensor_bf16", "tensor", k_unit_tflop_s, 781.3));
  s.entries.push_back(measured("launch_kernel", "launch", k_unit_us, 2.5));
  CeilingEntry p2p;
  p2p.name = "p2p";
  p2p.group = "p2p";
  p2p.unit = std::string(k_unit_gb_s);
  p2p.skipped = "one GPU visible";
  s.entries.push_back(p2p);
  return s;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

TEST(Datasheet, KnownModelsAndTheirNumbers) {
  const auto sxm = datasheet_for("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(sxm);
  EXPECT_EQ(sxm->model, "H100 SXM");
  EXPECT_EQ(sxm->value("dram_copy"), 3350);
  EXPECT_EQ(sxm->value("tensor_bf16"), 989);
  EXPECT_EQ(sxm->value("tensor_fp16"), 989);
  EXPECT_EQ(sxm->value("tensor_tf32"), 494);
  EXPECT_EQ(sxm->value("tensor_fp8"), 1979);
  EXPECT_EQ(sxm->value("fp32_fma"), 67);
  const auto h200 = datasheet_for("NVIDIA H200");
  ASSERT_TRUE(h200);
  EXPECT_EQ(h200->value("dram_read"), 4800);
  EXPECT_EQ(h200->value("tensor_bf16"), 989);
  const auto pcie = datasheet_for("NVIDIA H100 PCIe");
  ASSERT_TRUE(pcie);
  EXPECT_EQ(pcie->value("dram_copy"), 2000);
  EXPECT_EQ(pcie->value("tensor_bf16"), 756);
  EXPECT_FALSE(pcie->value("l2_read")) << "no datasheet number is invented for what the sheet does not list";
  EXPECT_FALSE(datasheet_for("NVIDIA GeForce RTX 4090"));
  EXPECT_FALSE(datasheet_for(""));
}

TEST(ExpectedCeilings, GroupsPairsAndUnknownGroups) {
  EXPECT_EQ(expected_ceilings({"dram"}, 0, 1), (std::vector<std::string>{"dram_read", "dram_write", "dram_copy"}));
  EXPECT_EQ(expected_ceilings({"p2p"}, 0, 1), (std::vector<std::string>{"p2p"}));
  const auto pairs = expected_ceilings({"p2p"}, 1, 3);
  EXPECT_EQ(pairs.size(), 8u);  // 2 peers x 2 directions x (staged, peer)
  for (const char* n : {"p2p_1_to_0_peer", "p2p_0_to_1_peer", "p2p_1_to_2_staged", "p2p_2_to_1_staged"}) {
    EXPECT_NE(std::find(pairs.begin(), pairs.end(), n), pairs.end()) << n;
  }
  EXPECT_EQ(std::find(pairs.begin(), pairs.end(), "p2p_0_to_2_peer"), pairs.end()) << "pairs involve the device";
  const auto all = expected_ceilings(ceiling_groups(), 0, 1);
  EXPECT_EQ(all.size(), 22u);
  EXPECT_THROW(expected_ceilings({"dram", "warp_drive"}, 0, 1), UsageError);
  EXPECT_EQ(p2p_ceiling_name(3, 1, false), "p2p_3_to_1_staged");
  EXPECT_EQ(ceiling_label("p2p_3_to_1_peer"), "GPU 3 -> GPU 1, peer access");
  EXPECT_EQ(ceiling_label("dram_copy"), "DRAM copy (read + write)");
}

TEST(CeilingSetJson, RoundTripsEveryField) {
  const CeilingSet s = sample_set();
  const auto text = to_json(s).dump(2);
  const CeilingSet back = ceiling_set_from_json(nlohmann::json::parse(text));
  EXPECT_EQ(to_json(back).dump(2), text);
  EXPECT_EQ(back.value("dram_copy"), 3012.4);
  EXPECT_FALSE(back.value("p2p")) << "a skipped ceiling has no value";
  ASSERT_TRUE(back.find("p2p"));
  EXPECT_EQ(back.find("p2p")->skipped, "one GPU visible");
  EXPECT_FALSE(back.value("l2_read"));
}

TEST(CeilingSetJson, RejectsWhatIsNotAMeasurement) {
  auto j = to_json(sample_set());
  j["ceilings"][0]["value"] = -3;
  EXPECT_THROW(ceiling_set_from_json(j), DataError);
  j = to_json(sample_set());
  j["ceilings"][0]["value"] = 0;
  EXPECT_THROW(ceiling_set_from_json(j), DataError);
  j = to_json(sample_set());
  j["ceilings"][0]["unit"] = "furlongs";
  EXPECT_THROW(ceiling_set_from_json(j), DataError);
  j = to_json(sample_set());
  j["ceilings"].push_back(j["ceilings"][0]);
  EXPECT_THROW(ceiling_set_from_json(j), DataError);
  j = to_json(sample_set());
  j["schema_version"] = k_peaks_schema_version + 1;
  EXPECT_THROW(ceiling_set_from_json(j), DataError);
  j = to_json(sample_set());
  j["ceilings"][1].erase("method");
  EXPECT_THROW(ceiling_set_from_json(j), DataError);
  EXPECT_THROW(ceiling_set_from_json(nlohmann::json::parse(R"({"schema":"aisp.results"})")), DataError);
}

TEST(CeilingCache, PathIsKeyedByUuidAndDriverAndSafe) {
  EXPECT_EQ(peaks_cache_path("artifacts/peaks", "GPU-1234", "580.159.04"), "artifacts/peaks/GPU-1234_580.159.04.json");
  EXPECT_EQ(peaks_cache_path("d", "GPU/../x", "a b"), "d/GPU-..-x_a-b.json");
}

TEST(CeilingCache, SaveLoadRoundTripAndAtomicWrite) {
  const fs::path dir = temp_dir("roundtrip");
  const CeilingSet s = sample_set();
  const std::string path = peaks_cache_path((dir / "nested").string(), s.gpu_uuid, s.driver_version);
  EXPECT_EQ(load_ceiling_cache(path, s.gpu_uuid, s.driver_version).status, CacheLoad::Status::missing);
  save_ceiling_cache(path, s);
  const CacheLoad l = load_ceiling_cache(path, s.gpu_uuid, s.driver_version);
  ASSERT_EQ(l.status, CacheLoad::Status::ok) << l.problem;
  EXPECT_EQ(to_json(*l.set).dump(), to_json(s).dump());
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir / "nested")) {
    ++files;
    EXPECT_EQ(e.path().extension(), ".json") << "a temporary file was left behind: " << e.path();
  }
  EXPECT_EQ(files, 1u);
  fs::remove_all(dir);
}

TEST(CeilingCache, CorruptFilesAreReportedNeverTrusted) {
  const fs::path dir = temp_dir("corrupt");
  const CeilingSet s = sample_set();
  const std::string path = peaks_cache_path(dir.string(), s.gpu_uuid, s.driver_version);
  const auto expect_corrupt = [&](const std::string& text, const std::string& needle) {
    write(path, text);
    const CacheLoad l = load_ceiling_cache(path, s.gpu_uuid, s.driver_version);
    EXPECT_EQ(l.status, CacheLoad::Status::corrupt) << text.substr(0, 60);
    EXPECT_FALSE(l.set) << "a corrupt cache must not hand out values";
    EXPECT_NE(l.problem.find(needle), std::string::npos) << l.problem;
  };
  expect_corrupt("{\"schema\": \"aisp.peaks\", \"schema_v", "not valid JSON");  // truncated by a crash
  expect_corrupt("", "not valid JSON");
  expect_corrupt("[1, 2, 3]", "not an aisp peaks document");
  auto j = to_json(s);
  j["ceilings"][0]["value"] = "fast";
  expect_corrupt(j.dump(), "malformed");
  CeilingSet other = s;
  other.gpu_uuid = "GPU-ffffffff";
  expect_corrupt(to_json(other).dump(), "belongs to GPU GPU-ffffffff");
  other = s;
  other.driver_version = "570.1";
  expect_corrupt(to_json(other).dump(), "driver 570.1");
  // Moved aside, never silently overwritten.
  const std::string aside = quarantine_ceiling_cache(path);
  EXPECT_EQ(aside, path + ".corrupt");
  EXPECT_TRUE(fs::exists(aside));
  EXPECT_FALSE(fs::exists(path));
  fs::remove_all(dir);
}

TEST(PeaksReport, TableShowsDatasheetBesideAndErrors) {
  PeaksReport r;
  r.set = sample_set();
  r.path = "artifacts/peaks/x.json";
  r.cache_note = "measured now";
  r.measured = {"dram_copy", "tensor_bf16"};
  r.errors = {{"tensor_fp8", "tensor_fp8: output is wrong: D[0, 0] = nan"}};
  const std::string t = render_peaks_table(r);
  EXPECT_NE(t.find("datasheet (H100 SXM)"), std::string::npos) << t;
  EXPECT_NE(t.find("3012 GB/s"), std::string::npos) << t;
  EXPECT_NE(t.find("3350 GB/s"), std::string::npos) << t;
  EXPECT_NE(t.find("89.9%"), std::string::npos) << t;  // 3012.4 / 3350
  EXPECT_NE(t.find("781.3 TFLOP/s"), std::string::npos) << t;
  EXPECT_NE(t.find("2.50 us"), std::string::npos) << t;
  EXPECT_NE(t.find("skipped"), std::string::npos) << t;
  EXPECT_NE(t.find("tensor_fp8: tensor_fp8: output is wrong"), std::string::npos) << t;
  const auto j = peaks_report_json(r);
  EXPECT_EQ(j["datasheet"]["model"], "H100 SXM");
  EXPECT_EQ(j["errors"][0]["name"], "tensor_fp8");
  EXPECT_EQ(j["peaks"]["schema"], "aisp.peaks");
}

}  // namespace
