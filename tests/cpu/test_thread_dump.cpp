// core/base/thread_dump: a process asked from outside (kill) writes one stack per thread to stderr. Run in
// a forked child whose stderr is a pipe, with two more threads parked in a wait, as a hung worker's are.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "core/base/thread_dump.hpp"

namespace {

[[noreturn]] void child(int write_end) {
  dup2(write_end, STDERR_FILENO);
  if (!aisp::install_thread_dump(SIGUSR2)) _exit(3);
  std::mutex m;
  std::condition_variable never;
  std::thread a([&] {
    std::unique_lock lock(m);
    never.wait(lock, [] { return false; });
  });
  std::thread b([] { std::this_thread::sleep_for(std::chrono::hours(1)); });
  const char ready = 'r';
  (void)!write(write_end, &ready, 1);  // through stderr's pipe: the parent waits for it
  std::this_thread::sleep_for(std::chrono::hours(1));  // killed before
  _exit(0);
}

// What arrives on `fd` within `how_long`; with `first`, returns as soon as anything has.
std::string read_for(int fd, std::chrono::milliseconds how_long, bool first = false) {
  std::string out;
  const auto until = std::chrono::steady_clock::now() + how_long;
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (first) break;
  }
  return out;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ThreadDump, EveryThreadWritesItsStackOnceOnAnOutsideSignal) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    child(fds[1]);
  }
  close(fds[1]);
  ASSERT_EQ(read_for(fds[0], std::chrono::milliseconds(5000), true).substr(0, 1), "r") << "the child did not start";
  ASSERT_EQ(kill(pid, SIGUSR2), 0);
  const std::string dump = read_for(fds[0], std::chrono::milliseconds(1500));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  EXPECT_EQ(count(dump, "aisp: thread stacks on request"), 1u) << dump;
  EXPECT_EQ(count(dump, "--- thread "), 3u) << dump;  // the main thread and both parked ones, once each
  EXPECT_NE(dump.find("(+0x"), std::string::npos) << "frames with binary offsets expected:\n" << dump;
}

}  // namespace
