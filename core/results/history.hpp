// The history store: every `aisp bench run` recorded in an embedded SQLite database (default
// artifacts/history.sqlite, beside the runs folder), so that `aisp history` shows a target's trend
// across runs with nothing to install or start. Schema and migrations: docs/regression-gating.md
// "History".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/results/render.hpp"
#include "core/results/run_folder.hpp"

struct sqlite3;

namespace aisp {

// PRAGMA user_version of a database this aisp writes; older ones are migrated forward on open.
// 2: the axes joined variant_results' primary key (sweeps record several points per run).
inline constexpr int k_history_schema_version = 2;

// One variant of one recorded run, as `aisp history` shows it.
struct HistoryEntry {
  std::string run_id;
  std::string created_utc;
  std::string hardware_key;
  std::string git_sha;
  std::string git_dirty;
  std::string target;
  AxisValues axes; // the point the target was measured at
  std::string variant;
  std::string kind;
  std::string mode;
  std::string verdict;
  std::string reason;
  std::optional<double> median_ms, ci_low_ms, ci_high_ms;
  std::size_t samples = 0;
  double gb_per_s = 0;
  double tflop_per_s = 0;
  std::optional<double> percent_of_ceiling;
  std::optional<double> speedup_vs_baseline;
};

class History {
public:
  enum class Access { read_only, read_write };

  // read_write creates the file when missing and migrates an older schema (in one transaction);
  // read_only needs an existing database and changes nothing. Throws UsageError for a missing file
  // (read_only) or an unusable path, DataError for a file that is not a history database or has a
  // newer schema: such a file is never modified.
  History(const std::string& path, Access access);
  ~History();
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  int schema_version() const;

  // Records a run in one transaction; recording the same run_id again replaces it. Waits (busy
  // timeout) while another process writes.
  void record(const LoadedRun& run);

  // Variants matching the selectors, grouped by target and then by axis point (in axis order),
  // newest run first; `last_runs` > 0 keeps only each target's most recent runs.
  std::vector<HistoryEntry> trend(const std::vector<std::string>& selectors, int last_runs) const;

  std::size_t run_count() const;
  std::string integrity() const; // "ok" for a sound database (PRAGMA integrity_check)

private:
  void exec(const char* sql) const;
  void migrate();

  sqlite3* m_db = nullptr;
  std::string m_path;
};

// The default database of a runs folder: beside it ("artifacts/runs" ->
// "artifacts/history.sqlite").
std::string default_history_path(const std::string& runs_folder);

// table, markdown, csv or json. Table and markdown: one block per target, or per target and axis
// point when the entries hold several points of it.
std::string render_history(const std::vector<HistoryEntry>& entries, OutputFormat f);

} // namespace aisp
