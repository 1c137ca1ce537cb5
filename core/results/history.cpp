#include "core/results/history.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "core/base/error.hpp"
#include "core/results/text_table.hpp"

namespace aisp {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

// k_migrations[v] brings a database from user_version v to v + 1. Append, never edit: a database in
// the field may stand at any of these versions.
const char* const k_migrations[] = {
    R"sql(
CREATE TABLE runs (
  id              INTEGER PRIMARY KEY,
  run_id          TEXT NOT NULL UNIQUE,
  run_dir         TEXT NOT NULL,
  created_utc     TEXT NOT NULL,
  recorded_utc    TEXT NOT NULL,
  hardware_key    TEXT NOT NULL,
  device_name     TEXT NOT NULL,
  gpu_uuid        TEXT NOT NULL,
  driver_version  INTEGER NOT NULL,
  runtime_version INTEGER NOT NULL,
  git_sha         TEXT NOT NULL,
  git_dirty       TEXT NOT NULL,
  build_type      TEXT NOT NULL,
  hostname        TEXT NOT NULL,
  clocks_policy   TEXT NOT NULL,
  manifest_json   TEXT NOT NULL
);
CREATE TABLE variant_results (
  run                 INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  target              TEXT NOT NULL,
  variant             TEXT NOT NULL,
  kind                TEXT NOT NULL,
  mode                TEXT NOT NULL,
  clock               TEXT NOT NULL,
  axes_json           TEXT NOT NULL,
  verdict             TEXT NOT NULL,
  reason              TEXT NOT NULL,
  samples             INTEGER NOT NULL,
  median_ms           REAL,
  ci_low_ms           REAL,
  ci_high_ms          REAL,
  mean_ms             REAL,
  stdev_ms            REAL,
  min_ms              REAL,
  max_ms              REAL,
  gb_per_s            REAL NOT NULL,
  tflop_per_s         REAL NOT NULL,
  percent_of_ceiling  REAL,
  ceiling             TEXT NOT NULL,
  speedup_vs_baseline REAL,
  speedup_low         REAL,
  speedup_high        REAL,
  fraction_of_vendor  REAL,
  PRIMARY KEY (run, variant)
);
CREATE INDEX variant_results_by_target ON variant_results(target, variant);
)sql",
    // v1 -> v2: a sweep records one variant at several axis points of one run, so the axes join the
    // primary key. SQLite cannot alter a primary key: the table is rebuilt, its rows copied as they are.
    R"sql(
CREATE TABLE variant_results_v2 (
  run                 INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  target              TEXT NOT NULL,
  variant             TEXT NOT NULL,
  kind                TEXT NOT NULL,
  mode                TEXT NOT NULL,
  clock               TEXT NOT NULL,
  axes_json           TEXT NOT NULL,
  verdict             TEXT NOT NULL,
  reason              TEXT NOT NULL,
  samples             INTEGER NOT NULL,
  median_ms           REAL,
  ci_low_ms           REAL,
  ci_high_ms          REAL,
  mean_ms             REAL,
  stdev_ms            REAL,
  min_ms              REAL,
  max_ms              REAL,
  gb_per_s            REAL NOT NULL,
  tflop_per_s         REAL NOT NULL,
  percent_of_ceiling  REAL,
  ceiling             TEXT NOT NULL,
  speedup_vs_baseline REAL,
  speedup_low         REAL,
  speedup_high        REAL,
  fraction_of_vendor  REAL,
  PRIMARY KEY (run, variant, axes_json)
);
INSERT INTO variant_results_v2 SELECT * FROM variant_results;
DROP TABLE variant_results;
ALTER TABLE variant_results_v2 RENAME TO variant_results;
CREATE INDEX variant_results_by_target ON variant_results(target, variant);
)sql",
};
constexpr int k_migration_count = static_cast<int>(sizeof k_migrations / sizeof k_migrations[0]);
static_assert(k_migration_count == k_history_schema_version, "one migration per schema version");

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A prepared statement; binds are 1-based like SQLite's.
class Statement {
public:
  Statement(sqlite3* db, const char* sql) : m_db(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &m_stmt, nullptr) != SQLITE_OK) {
      throw DataError(std::string("history database: ") + sqlite3_errmsg(db));
    }
  }
  ~Statement() { sqlite3_finalize(m_stmt); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, const std::string& s) {
    sqlite3_bind_text(m_stmt, i, s.c_str(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(m_stmt, i, v);
    return *this;
  }
  Statement& bind(int i, double v) {
    sqlite3_bind_double(m_stmt, i, v);
    return *this;
  }
  Statement& bind(int i, const std::optional<double>& v) {
    if (v)
      return bind(i, *v);
    sqlite3_bind_null(m_stmt, i);
    return *this;
  }
  // Ready for the next set of binds.
  void reset() {
    sqlite3_reset(m_stmt);
    sqlite3_clear_bindings(m_stmt);
  }
  // True while there is a row; throws on an error.
  bool step() {
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW)
      return true;
    if (rc == SQLITE_DONE)
      return false;
    throw DataError(std::string("history database: ") + sqlite3_errmsg(m_db));
  }
  std::string text(int col) const {
    const auto* p = sqlite3_column_text(m_stmt, col);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  std::int64_t integer(int col) const { return sqlite3_column_int64(m_stmt, col); }
  std::optional<double> real(int col) const {
    if (sqlite3_column_type(m_stmt, col) == SQLITE_NULL)
      return std::nullopt;
    return sqlite3_column_double(m_stmt, col);
  }

private:
  sqlite3* m_db;
  sqlite3_stmt* m_stmt = nullptr;
};

int user_version(sqlite3* db, const std::string& path) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr);
  int version = -1;
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
      version = sqlite3_column_int(stmt, 0);
  }
  const std::string why = sqlite3_errmsg(db);
  sqlite3_finalize(stmt);
  if (version < 0) {
    throw DataError(
        fmt::format("{} is not a usable history database ({}); it was left as it is", path, why));
  }
  return version;
}

} // namespace

std::string default_history_path(const std::string& runs_folder) {
  fs::path runs = fs::path(runs_folder).lexically_normal();
  if (runs.filename().empty())
    runs = runs.parent_path(); // "artifacts/runs/" names the same folder
  return (runs.parent_path() / "history.sqlite").string();
}

History::History(const std::string& path, Access access) : m_path(path) {
  std::error_code ec;
  if (access == Access::read_only && !fs::exists(path, ec)) {
    throw UsageError(
        fmt::format("no history database at {} (every aisp bench run records one beside its "
                    "runs folder; see --history)",
                    path));
  }
  if (access == Access::read_write) {
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty())
      fs::create_directories(parent, ec);
  }
  const int flags = access == Access::read_only ? SQLITE_OPEN_READONLY
                                                : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (sqlite3_open_v2(path.c_str(), &m_db, flags, nullptr) != SQLITE_OK) {
    const std::string why = m_db ? sqlite3_errmsg(m_db) : "out of memory";
    sqlite3_close(m_db);
    m_db = nullptr;
    throw UsageError(fmt::format("cannot open the history database {}: {}", path, why));
  }
  // Concurrent `bench run`s take turns: a writer waits for the lock instead of failing.
  sqlite3_busy_timeout(m_db, 30000);
  try {
    const int version = user_version(m_db, path);
    if (version > k_history_schema_version) {
      throw DataError(fmt::format(
          "history database {} has schema version {}, newer than this aisp writes ({}); "
          "it was left as it is: use a newer aisp or another --history",
          path, version, k_history_schema_version));
    }
    exec("PRAGMA foreign_keys = ON");
    if (access == Access::read_write)
      migrate();
  } catch (...) {
    sqlite3_close(m_db);
    m_db = nullptr;
    throw;
  }
}

History::~History() {
  sqlite3_close(m_db);
}

void History::exec(const char* sql) const {
  char* err = nullptr;
  if (sqlite3_exec(m_db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string why = err ? err : sqlite3_errmsg(m_db);
    sqlite3_free(err);
    throw DataError(fmt::format("history database {}: {}", m_path, why));
  }
}

void History::migrate() {
  if (user_version(m_db, m_path) == k_history_schema_version)
    return;
  // IMMEDIATE takes the write lock first, so two processes opening a fresh file cannot both migrate
  // it.
  exec("BEGIN IMMEDIATE");
  try {
    const int version = user_version(m_db, m_path);
    if (version > k_history_schema_version) {
      throw DataError(
          fmt::format("history database {} has schema version {}, newer than this aisp writes ({})",
                      m_path, version, k_history_schema_version));
    }
    for (int v = version; v < k_history_schema_version; ++v)
      exec(k_migrations[v]);
    exec(fmt::format("PRAGMA user_version = {}", k_history_schema_version).c_str());
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

int History::schema_version() const {
  return user_version(m_db, m_path);
}

void History::record(const LoadedRun& run) {
  const auto& p = run.provenance;
  exec("BEGIN IMMEDIATE");
  try {
    Statement(m_db,
              "DELETE FROM variant_results WHERE run IN (SELECT id FROM runs WHERE run_id = ?1)")
        .bind(1, run.results.run_id)
        .step();
    Statement(m_db, "DELETE FROM runs WHERE run_id = ?1").bind(1, run.results.run_id).step();
    Statement ins(
        m_db,
        "INSERT INTO runs (run_id, run_dir, created_utc, recorded_utc, hardware_key, device_name, "
        "gpu_uuid, driver_version, runtime_version, git_sha, git_dirty, build_type, hostname, "
        "clocks_policy, manifest_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
        "?13, ?14, ?15)");
    ins.bind(1, run.results.run_id)
        .bind(2, run.dir)
        .bind(3, run.results.created_utc)
        .bind(4, utc_now());
    ins.bind(5, run.results.hardware_key).bind(6, p.device_name).bind(7, p.gpu_uuid);
    ins.bind(8, std::int64_t{p.driver_version}).bind(9, std::int64_t{p.runtime_version});
    ins.bind(10, p.git_sha).bind(11, p.git_dirty).bind(12, p.build_type).bind(13, p.hostname);
    ins.bind(14, p.clocks_policy)
        .bind(15, run.manifest.is_null() ? std::string("{}") : run.manifest.dump());
    ins.step();
    const std::int64_t id = sqlite3_last_insert_rowid(m_db);
    Statement var(
        m_db,
        "INSERT INTO variant_results (run, target, variant, kind, mode, clock, axes_json, verdict, "
        "reason, samples, median_ms, ci_low_ms, ci_high_ms, mean_ms, stdev_ms, min_ms, max_ms, "
        "gb_per_s, tflop_per_s, percent_of_ceiling, ceiling, speedup_vs_baseline, speedup_low, "
        "speedup_high, fraction_of_vendor) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
        "?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25)");
    for (const auto& t : run.results.targets) {
      ojson axes = ojson::object();
      for (const auto& [k, v] : t.axes)
        axes[k] = v;
      for (const auto& v : t.variants) {
        const auto* s = v.stats ? &*v.stats : nullptr;
        const auto opt = [&](double x) { return s ? std::optional<double>(x) : std::nullopt; };
        const auto* c = v.speedup_vs_baseline ? &*v.speedup_vs_baseline : nullptr;
        const auto pct = percent_of_ceiling(v);
        var.bind(1, id).bind(2, t.name).bind(3, v.name).bind(4, std::string(to_string(v.kind)));
        var.bind(5, std::string(to_string(t.mode)))
            .bind(6, std::string(to_string(t.clock)))
            .bind(7, axes.dump());
        var.bind(8, std::string(to_string(v.verdict))).bind(9, v.reason);
        var.bind(10, static_cast<std::int64_t>(v.samples_ms.size()));
        var.bind(11, opt(s ? s->median : 0)).bind(12, opt(s ? s->median_ci.low : 0));
        var.bind(13, opt(s ? s->median_ci.high : 0)).bind(14, opt(s ? s->mean : 0));
        var.bind(15, opt(s ? s->stdev : 0))
            .bind(16, opt(s ? s->min : 0))
            .bind(17, opt(s ? s->max : 0));
        var.bind(18, v.gb_per_s).bind(19, v.tflop_per_s);
        var.bind(20, pct).bind(21, pct ? v.roofline->ceiling : std::string());
        var.bind(22, c ? std::optional<double>(c->value) : std::nullopt);
        var.bind(23, c ? std::optional<double>(c->low) : std::nullopt);
        var.bind(24, c ? std::optional<double>(c->high) : std::nullopt);
        var.bind(25, v.fraction_of_vendor ? std::optional<double>(v.fraction_of_vendor->value)
                                          : std::nullopt);
        var.step();
        var.reset();
      }
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::vector<HistoryEntry> History::trend(const std::vector<std::string>& selectors,
                                         int last_runs) const {
  std::vector<HistoryEntry> out;
  if (schema_version() == 0)
    return out; // created but never written: no runs yet
  Statement q(
      m_db,
      "SELECT r.run_id, r.created_utc, r.hardware_key, r.git_sha, r.git_dirty, v.target, "
      "v.variant, "
      "v.kind, v.mode, v.verdict, v.reason, v.median_ms, v.ci_low_ms, v.ci_high_ms, v.samples, "
      "v.gb_per_s, v.tflop_per_s, v.percent_of_ceiling, v.speedup_vs_baseline, v.axes_json "
      "FROM variant_results v JOIN runs r ON r.id = v.run "
      "ORDER BY v.target, r.created_utc DESC, r.id DESC, v.variant");
  std::map<std::string, std::set<std::string>> runs_of_target;
  while (q.step()) {
    HistoryEntry e;
    e.target = q.text(5);
    e.variant = q.text(6);
    if (!selector_matches(e.variant, selectors))
      continue;
    e.run_id = q.text(0);
    auto& seen = runs_of_target[e.target];
    if (last_runs > 0 && !seen.count(e.run_id) &&
        seen.size() >= static_cast<std::size_t>(last_runs))
      continue;
    seen.insert(e.run_id);
    e.created_utc = q.text(1);
    e.hardware_key = q.text(2);
    e.git_sha = q.text(3);
    e.git_dirty = q.text(4);
    e.kind = q.text(7);
    e.mode = q.text(8);
    e.verdict = q.text(9);
    e.reason = q.text(10);
    e.median_ms = q.real(11);
    e.ci_low_ms = q.real(12);
    e.ci_high_ms = q.real(13);
    e.samples = static_cast<std::size_t>(q.integer(14));
    e.gb_per_s = q.real(15).value_or(0);
    e.tflop_per_s = q.real(16).value_or(0);
    e.percent_of_ceiling = q.real(17);
    e.speedup_vs_baseline = q.real(18);
    try {
      const auto axes = nlohmann::json::parse(q.text(19)); // named: items() must not outlive it
      for (const auto& [k, v] : axes.items())
        e.axes[k] = v.get<std::int64_t>();
    } catch (const std::exception&) {
      throw DataError("history " + m_path + ": unreadable axes_json of run " + e.run_id);
    }
    out.push_back(std::move(e));
  }
  // Points of a target in axis order (numeric, unlike the stored text); newest first within each.
  std::stable_sort(out.begin(), out.end(), [](const HistoryEntry& a, const HistoryEntry& b) {
    return std::tie(a.target, a.axes) < std::tie(b.target, b.axes);
  });
  return out;
}

std::size_t History::run_count() const {
  if (schema_version() == 0)
    return 0;
  Statement q(m_db, "SELECT COUNT(*) FROM runs");
  q.step();
  return static_cast<std::size_t>(q.integer(0));
}

std::string History::integrity() const {
  Statement q(m_db, "PRAGMA integrity_check");
  std::string out;
  while (q.step())
    out += (out.empty() ? "" : "; ") + q.text(0);
  return out;
}

namespace {

std::string short_date(const std::string& utc) {
  // "2026-11-21T12:00:00Z" -> "2026-11-21 12:00"
  if (utc.size() >= 16 && utc[10] == 'T')
    return utc.substr(0, 10) + " " + utc.substr(11, 5);
  return utc;
}

std::string short_sha(const HistoryEntry& e) {
  std::string s = e.git_sha.substr(0, std::min<std::size_t>(10, e.git_sha.size()));
  if (e.git_dirty == "true")
    s += "+dirty";
  return s.empty() ? "-" : s;
}

} // namespace

std::string render_history(const std::vector<HistoryEntry>& entries, OutputFormat f) {
  const auto opt = [](const std::optional<double>& v) { return v ? ojson(*v) : ojson(nullptr); };
  if (f == OutputFormat::json) {
    ojson rows = ojson::array();
    for (const auto& e : entries) {
      rows.push_back(ojson{{"run_id", e.run_id},
                           {"created_utc", e.created_utc},
                           {"hardware_key", e.hardware_key},
                           {"git_sha", e.git_sha},
                           {"git_dirty", e.git_dirty},
                           {"target", e.target},
                           {"axes", e.axes},
                           {"variant", e.variant},
                           {"kind", e.kind},
                           {"mode", e.mode},
                           {"verdict", e.verdict},
                           {"reason", e.reason},
                           {"median_ms", opt(e.median_ms)},
                           {"ci_low_ms", opt(e.ci_low_ms)},
                           {"ci_high_ms", opt(e.ci_high_ms)},
                           {"samples", e.samples},
                           {"gb_per_s", e.gb_per_s},
                           {"tflop_per_s", e.tflop_per_s},
                           {"percent_of_ceiling", opt(e.percent_of_ceiling)},
                           {"speedup_vs_baseline", opt(e.speedup_vs_baseline)}});
    }
    return ojson{{"schema", "aisp.history"}, {"schema_version", 1}, {"entries", rows}}.dump(2) +
           "\n";
  }
  const auto cell = [](const std::optional<double>& v, const char* spec) {
    return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
  };
  if (f == OutputFormat::csv) {
    TextTable t{{"target", "variant", "created_utc", "run_id", "hardware_key", "git_sha",
                 "git_dirty", "mode", "median_ms", "ci_low_ms", "ci_high_ms", "samples", "gb_per_s",
                 "tflop_per_s", "percent_of_ceiling", "speedup_vs_baseline", "verdict", "reason", "axes"},
                {}};
    for (const auto& e : entries) {
      t.rows.push_back({e.target, e.variant, e.created_utc, e.run_id, e.hardware_key, e.git_sha,
                        e.git_dirty, e.mode, cell(e.median_ms, "{:.6g}"),
                        cell(e.ci_low_ms, "{:.6g}"), cell(e.ci_high_ms, "{:.6g}"),
                        std::to_string(e.samples), fmt::format("{:.3f}", e.gb_per_s),
                        fmt::format("{:.5f}", e.tflop_per_s), cell(e.percent_of_ceiling, "{:.2f}"),
                        cell(e.speedup_vs_baseline, "{:.4f}"), e.verdict, e.reason,
                        format_axes(e.axes, " ")});
    }
    return render_text_table(t, f);
  }
  // table / markdown: one block per target (per target and point when it has several), newest run
  // first.
  std::string out;
  for (std::size_t i = 0; i < entries.size();) {
    const std::string target = entries[i].target;
    const AxisValues axes = entries[i].axes;
    const bool swept = std::any_of(entries.begin(), entries.end(),
                                   [&](const HistoryEntry& e) { return e.target == target && e.axes != axes; });
    const std::string heading = swept ? target + " " + format_axes(axes, " ") : target;
    TextTable t{{"date (UTC)", "git", "hardware", "variant", "median", "95% CI", "% of ceiling",
                 "speedup", "verdict"},
                {}};
    for (; i < entries.size() && entries[i].target == target && (!swept || entries[i].axes == axes); ++i) {
      const auto& e = entries[i];
      std::string verdict = e.verdict + (e.reason.empty() ? "" : ": " + e.reason);
      t.rows.push_back(
          {short_date(e.created_utc), short_sha(e), e.hardware_key,
           e.variant.substr(std::min(e.variant.size(), target.size() + 1)),
           e.median_ms ? format_duration_ms(*e.median_ms) : "-",
           e.ci_low_ms && e.ci_high_ms ? fmt::format("[{}, {}]", format_duration_ms(*e.ci_low_ms),
                                                     format_duration_ms(*e.ci_high_ms))
                                       : "-",
           cell(e.percent_of_ceiling, "{:.1f}%"), cell(e.speedup_vs_baseline, "{:.2f}x"), verdict});
    }
    out += (out.empty() ? "" : "\n") +
           (f == OutputFormat::markdown ? "### " + heading + "\n\n" : heading + "\n");
    out += render_text_table(t, f);
  }
  return out;
}

} // namespace aisp
