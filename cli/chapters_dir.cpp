// Where aisp finds the chapters' data (expectations_*.json, ladder READMEs): the one lookup every command
// uses, so a built aisp and an installed one (docs/install.md) agree on the order:
//   1. --chapters-dir, when given;
//   2. the source tree's chapters/ ($AISP_SOURCE_DIR if set, else the checkout aisp was built from), when
//      it exists: a developer's build reads and writes the expectations beside the ladders;
//   3. <folder of the aisp executable>/../share/aisp/chapters: what `cmake --install` and the .deb put there;
//   4. ./chapters.
// AISP_SOURCE_DIR in the environment replaces the compiled-in checkout; set to a folder without chapters/
// (the install test uses /nonexistent) it skips step 2, which is how an installed copy is tested on the
// machine that built it.
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "cli/commands.hpp"

namespace aisp::cli {

namespace fs = std::filesystem;

namespace {

fs::path source_tree() {
  if (const char* env = std::getenv("AISP_SOURCE_DIR")) return env;
#ifdef AISP_SOURCE_DIR
  return AISP_SOURCE_DIR;
#else
  return {};
#endif
}

// The running executable's folder, from /proc (argv[0] may be a bare name found on PATH).
fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path{} : exe.parent_path();
}

}  // namespace

ChaptersDir find_chapters_dir(const std::string& option) {
  if (!option.empty()) return {option, "--chapters-dir"};
  std::error_code ec;
  if (const fs::path source = source_tree(); !source.empty()) {
    if (fs::is_directory(source / "chapters", ec))
      return {(source / "chapters").string(), "source tree"};
  }
  if (const fs::path exe = executable_dir(); !exe.empty()) {
    const fs::path installed = (exe / ".." / "share" / "aisp" / "chapters").lexically_normal();
    if (fs::is_directory(installed, ec)) return {installed.string(), "installed"};
  }
  return {"chapters", "working directory"};
}

std::string chapters_dir_or_default(const std::string& option) {
  return find_chapters_dir(option).path;
}

}  // namespace aisp::cli
