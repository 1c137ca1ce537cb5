// The HTML report opened in a real browser: headless Chromium renders run B's page, dumps the DOM
// it parsed and takes a screenshot (kept in the build folder for people to look at). Skipped, with
// the reason, where no Chromium is installed (scripts/setup.sh installs Debian's `chromium` as an optional
// package: where the mirror lacks it, this test skips).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#ifdef AISP_HAVE_PNG
#include <png.h>
#endif

#include "core/report/report_html.hpp"
#include "core/report/report_serving.hpp"
#include "core/report/report_summary.hpp"
#include "gating_fixtures.hpp"

namespace {

using namespace aisp;
using namespace aisp::testing;
namespace fs = std::filesystem;

std::string find_chromium() {
  if (const char* env = std::getenv("AISP_CHROMIUM"); env && *env)
    return env;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (const char* name :
       {"chromium", "chromium-browser", "chromium-headless-shell", "google-chrome"}) {
    std::size_t start = 0;
    while (start <= dirs.size()) {
      const auto colon = dirs.find(':', start);
      const fs::path candidate =
          fs::path(
              dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start)) /
          name;
      std::error_code ec;
      if (fs::exists(candidate, ec))
        return candidate.string();
      if (colon == std::string::npos)
        break;
      start = colon + 1;
    }
  }
  return {};
}

// Runs a command, returning its exit status and stdout.
int run(const std::string& cmd, std::string* out) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p)
    return -1;
  char buf[65536];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) {
    if (out)
      out->append(buf, n);
  }
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `stderr_to`: where Chromium's own log goes ("/dev/null", or a file to read console messages from).
std::string chromium_command(const std::string& chromium, const std::string& args,
                             const std::string& stderr_to = "/dev/null") {
  // --no-sandbox: CI containers run as root; the page has no scripts and fetches nothing anyway.
  return "timeout 120 '" + chromium +
         "' --headless --no-sandbox --disable-gpu --disable-dev-shm-usage " +
         "--hide-scrollbars --no-first-run --user-data-dir='" +
         (fs::temp_directory_path() / "aisp-chromium").string() + "' " + args + " 2>'" +
         stderr_to + "'";
}

#ifdef AISP_HAVE_PNG
// Counts pixels within `tolerance` of each colour.
std::vector<std::size_t> count_colours(const std::string& path, const std::vector<unsigned>& rgb,
                                       int tolerance) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  std::vector<std::size_t> counts(rgb.size(), 0);
  if (!png_image_begin_read_from_file(&image, path.c_str()))
    return counts;
  image.format = PNG_FORMAT_RGB;
  std::vector<unsigned char> pixels(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr))
    return counts;
  for (std::size_t i = 0; i + 2 < pixels.size(); i += 3) {
    for (std::size_t c = 0; c < rgb.size(); ++c) {
      const int r = (rgb[c] >> 16) & 255, g = (rgb[c] >> 8) & 255, b = rgb[c] & 255;
      if (std::abs(pixels[i] - r) <= tolerance && std::abs(pixels[i + 1] - g) <= tolerance &&
          std::abs(pixels[i + 2] - b) <= tolerance) {
        ++counts[c];
      }
    }
  }
  return counts;
}
#endif

TEST(ReportInBrowser, RendersWithItsCharts) {
  const std::string chromium = find_chromium();
  if (chromium.empty())
    GTEST_SKIP() << "no Chromium found (install Debian's chromium, or set AISP_CHROMIUM)";
  const fs::path out_dir = fs::path(AISP_TEST_BINARY_DIR) / "report_browser";
  fs::create_directories(out_dir);
  const std::string html = (out_dir / "report_run_b.html").string();
  const std::string png = (out_dir / "report_run_b.png").string();
  spit(html, render_html_report(load_run(k_run_b)));
  fs::remove(png);

  std::string dom;
  ASSERT_EQ(run(chromium_command(chromium, "--dump-dom 'file://" + html + "'"), &dom), 0)
      << "chromium --dump-dom failed";
  // What the browser parsed, not what we wrote: the SVG elements are in its DOM.
  EXPECT_NE(dom.find("<svg class=\"aisp-ladder\""), std::string::npos) << dom.substr(0, 400);
  EXPECT_NE(dom.find("<figure class=\"roofline\"><svg"), std::string::npos);
  EXPECT_NE(dom.find("ch07:copy"), std::string::npos);

  ASSERT_EQ(run(chromium_command(chromium, "--window-size=1280,2200 --screenshot='" + png +
                                               "' 'file://" + html + "'"),
                nullptr),
            0);
  ASSERT_TRUE(fs::exists(png)) << "no screenshot at " << png;
  const std::string bytes = slurp(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  const auto be32 = [&](std::size_t at) {
    return (unsigned(static_cast<unsigned char>(bytes[at])) << 24) |
           (unsigned(static_cast<unsigned char>(bytes[at + 1])) << 16) |
           (unsigned(static_cast<unsigned char>(bytes[at + 2])) << 8) |
           unsigned(static_cast<unsigned char>(bytes[at + 3]));
  };
  EXPECT_EQ(be32(16), 1280u); // IHDR width
#ifdef AISP_HAVE_PNG
  // The bars are drawn: pixels in the step, optimized and vendor colours of the ladder chart.
  const auto counts = count_colours(png, {0x3d6fb6, 0x2e8b57, 0xe8710a}, 6);
  EXPECT_GT(counts[0], 2000u) << "step bars (blue) not visible";
  EXPECT_GT(counts[1], 1000u) << "optimized bars (green) not visible";
  EXPECT_GT(counts[2], 1000u) << "vendor bars (orange) not visible";
#endif
  std::printf("screenshot: %s\n", png.c_str());
}

// The page of a real sweep (ch19:fp8_gemm on an H100, 4 points): the summary table and the sweep
// charts are in the DOM Chromium built, the page logs nothing to the console (a Content-Security-
// Policy violation would), and the screenshot shows the charts' lines. AISP_REPORT_SHOT=path keeps
// a copy of the screenshot there.
TEST(ReportInBrowser, SummaryAndSweepChartsOfASweep) {
  const std::string chromium = find_chromium();
  if (chromium.empty())
    GTEST_SKIP() << "no Chromium found (install Debian's chromium, or set AISP_CHROMIUM)";
  const fs::path out_dir = fs::path(AISP_TEST_BINARY_DIR) / "report_browser";
  fs::create_directories(out_dir);
  const std::string html = (out_dir / "report_ch19_sweep.html").string();
  const std::string png = (out_dir / "report_ch19_sweep.png").string();
  const std::string log = (out_dir / "report_ch19_sweep.log").string();
  spit(html, render_html_report(
                 load_run(k_data_dir + "/fixtures/runs/20261125T004800Z_ch19-fp8_gemm")));
  fs::remove(png);

  std::string dom;
  ASSERT_EQ(run(chromium_command(chromium,
                                 "--enable-logging=stderr --v=0 --dump-dom 'file://" + html + "'",
                                 log),
                &dom),
            0)
      << "chromium --dump-dom failed";
  EXPECT_NE(dom.find("<table class=\"summary\">"), std::string::npos) << dom.substr(0, 400);
  EXPECT_NE(dom.find("<a href=\"#t-ch19-fp8-gemm\">ch19:fp8_gemm</a>"), std::string::npos);
  std::size_t sweeps = 0;
  for (auto p = dom.find("<svg class=\"aisp-sweep\""); p != std::string::npos;
       p = dom.find("<svg class=\"aisp-sweep\"", p + 1))
    ++sweeps;
  EXPECT_EQ(sweeps, 2u);
  EXPECT_NE(dom.find("<polyline points="), std::string::npos);
  // Console messages (CSP violations, parse errors reported to the console) show as "CONSOLE".
  const std::string messages = slurp(log);
  EXPECT_EQ(messages.find("CONSOLE"), std::string::npos) << messages;
  EXPECT_EQ(messages.find("Content Security Policy"), std::string::npos) << messages;

  ASSERT_EQ(run(chromium_command(chromium, "--window-size=1280,1800 --screenshot='" + png +
                                               "' 'file://" + html + "'"),
                nullptr),
            0);
  ASSERT_TRUE(fs::exists(png)) << "no screenshot at " << png;
#ifdef AISP_HAVE_PNG
  // The sweep lines are drawn: pixels in the first step colours and the vendor orange.
  const auto counts = count_colours(png, {0x4e79a7, 0x59a14f, 0xe8710a}, 6);
  EXPECT_GT(counts[0], 300u) << "first step line (blue) not visible";
  EXPECT_GT(counts[1], 300u) << "second step line (green) not visible";
  EXPECT_GT(counts[2], 300u) << "vendor line (orange) not visible";
#endif
  if (const char* keep = std::getenv("AISP_REPORT_SHOT"); keep && *keep)
    fs::copy_file(png, keep, fs::copy_options::overwrite_existing);
  std::printf("screenshot: %s\n", png.c_str());
}

// A page of loadgen files alone (the measured rate sweep): its table and latency-throughput curve.
TEST(ReportInBrowser, ServingLoadTestsPage) {
  const std::string chromium = find_chromium();
  if (chromium.empty())
    GTEST_SKIP() << "no Chromium found (install Debian's chromium, or set AISP_CHROMIUM)";
  const fs::path out_dir = fs::path(AISP_TEST_BINARY_DIR) / "report_browser";
  fs::create_directories(out_dir);
  const std::string html = (out_dir / "report_serving.html").string();
  const std::string png = (out_dir / "report_serving.png").string();
  const std::string log = (out_dir / "report_serving.log").string();
  spit(html, render_html_report(std::vector<LoadgenFile>{load_loadgen_file(
                 k_data_dir + "/../../docs/results/serving/h100_sxm_llama3-8b_sweep.json")}));
  fs::remove(png);

  std::string dom;
  ASSERT_EQ(run(chromium_command(chromium,
                                 "--enable-logging=stderr --v=0 --dump-dom 'file://" + html + "'",
                                 log),
                &dom),
            0)
      << "chromium --dump-dom failed";
  EXPECT_NE(dom.find("<table class=\"serving\">"), std::string::npos) << dom.substr(0, 400);
  EXPECT_NE(dom.find("<svg class=\"aisp-sweep\""), std::string::npos);
  EXPECT_NE(dom.find("<polyline points="), std::string::npos);
  const std::string messages = slurp(log);
  EXPECT_EQ(messages.find("CONSOLE"), std::string::npos) << messages;
  EXPECT_EQ(messages.find("Content Security Policy"), std::string::npos) << messages;

  ASSERT_EQ(run(chromium_command(chromium, "--window-size=1280,1400 --screenshot='" + png +
                                               "' 'file://" + html + "'"),
                nullptr),
            0);
  ASSERT_TRUE(fs::exists(png)) << "no screenshot at " << png;
#ifdef AISP_HAVE_PNG
  // The three latency lines are drawn: TPOT p50 blue, TPOT p99 red, TTFT p50 green.
  const auto counts = count_colours(png, {0x4e79a7, 0xe15759, 0x59a14f}, 6);
  EXPECT_GT(counts[0], 300u) << "TPOT p50 line (blue) not visible";
  EXPECT_GT(counts[1], 300u) << "TPOT p99 line (red) not visible";
  EXPECT_GT(counts[2], 300u) << "TTFT p50 line (green) not visible";
#endif
  std::printf("screenshot: %s\n", png.c_str());
}

} // namespace
