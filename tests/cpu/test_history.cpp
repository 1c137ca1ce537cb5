#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "core/base/error.hpp"
#include "core/results/history.hpp"
#include "gating_fixtures.hpp"

namespace {

using namespace aisp;
using namespace aisp::testing;

int raw_user_version(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  int v = -1;
  if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    v = sqlite3_column_int(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

TEST(History, RoundTripNewestFirst) {
  ScratchDir dir;
  const std::string path = dir / "artifacts/history.sqlite"; // the folder is created on first use
  {
    History h(path, History::Access::read_write);
    EXPECT_EQ(h.schema_version(), k_history_schema_version);
    h.record(load_run(k_run_a));
    h.record(load_run(k_run_b));
  }
  const History h(path, History::Access::read_only);
  EXPECT_EQ(h.run_count(), 2u);
  const auto all = h.trend({"ch07:copy:03_vectorized"}, 0);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].run_id, "20261121T093000Z_ch07-copy"); // newest first
  EXPECT_EQ(all[0].git_dirty, "true");
  ASSERT_TRUE(all[0].median_ms);
  EXPECT_NEAR(*all[0].median_ms, 6.1589, 1e-4);
  ASSERT_TRUE(all[0].percent_of_ceiling);
  EXPECT_NEAR(*all[0].percent_of_ceiling, 48.006, 0.01);
  EXPECT_EQ(all[0].samples, 40u);
  EXPECT_EQ(all[1].run_id, "20261120T090000Z_ch07-copy");
  EXPECT_FALSE(all[1].percent_of_ceiling);
  EXPECT_EQ(all[1].git_sha, "e63b87c2a1d94f0b8c7e6d5a4b3c2d1e0f9a8b7c");
  EXPECT_EQ(all[1].verdict, "PASS");
  // Verdicts and their reasons are kept.
  const auto noisy = h.trend({"ch07:copy:02_coalesced"}, 1);
  ASSERT_EQ(noisy.size(), 1u);
  EXPECT_EQ(noisy[0].verdict, "NOISY");
  EXPECT_NE(noisy[0].reason.find("3.4%"), std::string::npos);
  EXPECT_EQ(h.trend({"ch07"}, 0).size(), 10u);
  EXPECT_EQ(h.trend({"ch07:copy"}, 1).size(), 5u);
  EXPECT_TRUE(h.trend({"ch09"}, 0).empty());
  EXPECT_EQ(h.integrity(), "ok");
}

TEST(History, RecordingARunAgainReplacesIt) {
  ScratchDir dir;
  History h(dir / "h.sqlite", History::Access::read_write);
  h.record(load_run(k_run_a));
  LoadedRun again = load_run(k_run_a);
  again.results.targets[0].variants.resize(1);
  h.record(again);
  EXPECT_EQ(h.run_count(), 1u);
  EXPECT_EQ(h.trend({}, 0).size(), 1u);
}

TEST(History, MigratesAnEmptyDatabaseFile) {
  ScratchDir dir;
  const std::string path = dir / "empty.sqlite";
  spit(path, ""); // a zero-byte file is an empty SQLite database at user_version 0
  {
    const History ro(path, History::Access::read_only);
    EXPECT_EQ(ro.schema_version(), 0);
    EXPECT_TRUE(ro.trend({}, 0).empty()); // read-only never migrates
  }
  EXPECT_EQ(raw_user_version(path), 0);
  History h(path, History::Access::read_write);
  EXPECT_EQ(raw_user_version(path), k_history_schema_version);
  h.record(load_run(k_run_a));
  EXPECT_EQ(h.run_count(), 1u);
}

TEST(History, NewerSchemaOrForeignFileIsRefusedAndLeftAlone) {
  ScratchDir dir;
  const std::string newer = dir / "newer.sqlite";
  {
    sqlite3* db = nullptr;
    sqlite3_open(newer.c_str(), &db);
    sqlite3_exec(db, "CREATE TABLE future (x); PRAGMA user_version = 99;", nullptr, nullptr,
                 nullptr);
    sqlite3_close(db);
  }
  const std::string before = slurp(newer);
  for (auto access : {History::Access::read_write, History::Access::read_only}) {
    try {
      History h(newer, access);
      ADD_FAILURE() << "opened a schema-99 database";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("newer than this aisp"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(slurp(newer), before);

  const std::string text = dir / "notes.sqlite";
  spit(text, "these are my notes, not a database\n");
  EXPECT_THROW(History(text, History::Access::read_write), DataError);
  EXPECT_EQ(slurp(text), "these are my notes, not a database\n");
}

TEST(History, ReadOnlyNeedsAnExistingFile) {
  ScratchDir dir;
  EXPECT_THROW(History(dir / "absent.sqlite", History::Access::read_only), UsageError);
  EXPECT_FALSE(std::filesystem::exists(dir / "absent.sqlite"));
}

TEST(History, DefaultPathIsBesideTheRunsFolder) {
  EXPECT_EQ(default_history_path("artifacts/runs"), "artifacts/history.sqlite");
  EXPECT_EQ(default_history_path("/tmp/x/runs/"), "/tmp/x/history.sqlite");
  EXPECT_EQ(default_history_path("runs"), "history.sqlite");
}

// Records `count` copies of run A under distinct run ids, each in its own transaction.
void record_many(const std::string& path, const std::string& prefix, int count) {
  History h(path, History::Access::read_write);
  LoadedRun run = load_run(k_run_a);
  for (int i = 0; i < count; ++i) {
    run.results.run_id = prefix + std::to_string(i);
    h.record(run);
  }
}

TEST(History, TwoProcessesAndTwoThreadsWriteAtOnce) {
  ScratchDir dir;
  const std::string path = dir / "shared.sqlite";
  constexpr int per_writer = 15;
  // Two processes start on a file that does not exist yet: creation and migration race too.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      record_many(path, "child-", per_writer);
    } catch (...) {
      _exit(1);
    }
    _exit(0);
  }
  std::thread t1([&] { record_many(path, "thread1-", per_writer); });
  std::thread t2([&] { record_many(path, "thread2-", per_writer); });
  t1.join();
  t2.join();
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child writer failed";
  const History h(path, History::Access::read_only);
  EXPECT_EQ(h.run_count(), 3u * per_writer);
  EXPECT_EQ(h.trend({}, 0).size(), 3u * per_writer * 5);
  EXPECT_EQ(h.integrity(), "ok");
}

TEST(History, RenderedFormats) {
  ScratchDir dir;
  History h(dir / "h.sqlite", History::Access::read_write);
  h.record(load_run(k_run_a));
  h.record(load_run(k_run_b));
  const auto entries = h.trend({"ch07:copy"}, 0);
  const std::string table = render_history(entries, OutputFormat::table);
  EXPECT_EQ(table.rfind("ch07:copy\n", 0), 0u) << table;
  // Newest first: B's dirty SHA appears before A's.
  EXPECT_LT(table.find("4b1d0c9e8f+dirty"), table.find("e63b87c2a1"));
  EXPECT_NE(table.find("48.0%"), std::string::npos);
  EXPECT_NE(table.find("NOISY: 95% CI"), std::string::npos);
  const auto j = nlohmann::json::parse(render_history(entries, OutputFormat::json));
  EXPECT_EQ(j["entries"].size(), 10u);
  EXPECT_EQ(j["entries"][0]["run_id"], "20261121T093000Z_ch07-copy");
  const std::string md = render_history(entries, OutputFormat::markdown);
  EXPECT_NE(md.find("### ch07:copy"), std::string::npos);
  EXPECT_NE(md.find("| --- |"), std::string::npos);
  const std::string csv = render_history(entries, OutputFormat::csv);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 11);
}

// A sweep's points are stored with their axes and shown as one block per point, in axis order.
TEST(History, AxisPointsAreStoredAndShownApart) {
  ScratchDir dir;
  History h(dir / "h.sqlite", History::Access::read_write);
  LoadedRun run = load_run(k_run_a);
  TargetResult small = run.results.targets[0];
  small.axes["n"] = 1 << 20;
  run.results.targets.insert(run.results.targets.begin(), small);
  run.results.targets[1].axes["n"] = std::int64_t{1} << 30;
  h.record(run);
  h.record(load_run(k_run_b)); // n=2^30 only
  const auto entries = h.trend({"ch07:copy:01_chunked"}, 0);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].axes.at("n"), 1 << 20); // numeric axis order, not the stored text's
  EXPECT_EQ(entries[1].axes.at("n"), std::int64_t{1} << 30);
  EXPECT_EQ(entries[1].run_id, "20261121T093000Z_ch07-copy"); // newest first within a point
  const std::string table = render_history(entries, OutputFormat::table);
  EXPECT_EQ(table.rfind("ch07:copy n=1048576\n", 0), 0u) << table;
  EXPECT_NE(table.find("\nch07:copy n=1073741824\n"), std::string::npos) << table;
  const auto j = nlohmann::json::parse(render_history(entries, OutputFormat::json));
  EXPECT_EQ(j["entries"][0]["axes"]["n"], 1 << 20);
  EXPECT_NE(render_history(entries, OutputFormat::csv).find(",n=1048576\n"), std::string::npos);
}

// A database written before sweeps (schema 1: primary key (run, variant)) is migrated forward with its
// rows, after which one run may hold a variant at several axis points.
TEST(History, SchemaOneDatabaseIsMigratedWithItsRows) {
  ScratchDir dir;
  const std::string path = dir / "v1.sqlite";
  {
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    const char* v1 = R"sql(
CREATE TABLE runs (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE, run_dir TEXT NOT NULL,
  created_utc TEXT NOT NULL, recorded_utc TEXT NOT NULL, hardware_key TEXT NOT NULL, device_name TEXT NOT NULL,
  gpu_uuid TEXT NOT NULL, driver_version INTEGER NOT NULL, runtime_version INTEGER NOT NULL, git_sha TEXT NOT NULL,
  git_dirty TEXT NOT NULL, build_type TEXT NOT NULL, hostname TEXT NOT NULL, clocks_policy TEXT NOT NULL,
  manifest_json TEXT NOT NULL);
CREATE TABLE variant_results (run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, target TEXT NOT NULL,
  variant TEXT NOT NULL, kind TEXT NOT NULL, mode TEXT NOT NULL, clock TEXT NOT NULL, axes_json TEXT NOT NULL,
  verdict TEXT NOT NULL, reason TEXT NOT NULL, samples INTEGER NOT NULL, median_ms REAL, ci_low_ms REAL,
  ci_high_ms REAL, mean_ms REAL, stdev_ms REAL, min_ms REAL, max_ms REAL, gb_per_s REAL NOT NULL,
  tflop_per_s REAL NOT NULL, percent_of_ceiling REAL, ceiling TEXT NOT NULL, speedup_vs_baseline REAL,
  speedup_low REAL, speedup_high REAL, fraction_of_vendor REAL, PRIMARY KEY (run, variant));
CREATE INDEX variant_results_by_target ON variant_results(target, variant);
INSERT INTO runs VALUES (1, 'old_run', '/x', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 'h200', 'GPU', 'U',
  13000, 13000, 'abc', 'false', 'Release', 'host', 'as found', '{}');
INSERT INTO variant_results VALUES (1, 'ch07:copy', 'ch07:copy:01_chunked', 'baseline', 'cold', 'gpu',
  '{"n":1024}', 'PASS', '', 10, 2.0, 1.9, 2.1, 2.0, 0.1, 1.8, 2.2, 1.0, 0.0, NULL, '', NULL, NULL, NULL, NULL);
PRAGMA user_version = 1;
)sql";
    ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  History h(path, History::Access::read_write);
  EXPECT_EQ(raw_user_version(path), k_history_schema_version);
  auto entries = h.trend({}, 0);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].run_id, "old_run");
  EXPECT_EQ(entries[0].axes.at("n"), 1024);
  EXPECT_EQ(h.integrity(), "ok");
  LoadedRun sweep = load_run(k_run_a);
  TargetResult small = sweep.results.targets[0];
  small.axes["n"] = 1 << 20;
  sweep.results.targets.push_back(small);
  h.record(sweep); // two points of each variant in one run
  EXPECT_EQ(h.trend({}, 0).size(), 1u + 2 * 5);
}

} // namespace
