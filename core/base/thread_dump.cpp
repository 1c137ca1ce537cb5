#include "core/base/thread_dump.hpp"

#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace aisp {

namespace {

constexpr int k_max_frames = 64;
std::atomic_flag g_writing = ATOMIC_FLAG_INIT;  // one thread's stack on stderr at a time

// Async-signal-safe output: write(2) of a string and of a decimal number.
void put(const char* s) {
  const ssize_t n = static_cast<ssize_t>(std::strlen(s));
  ssize_t done = 0;
  while (done < n) {
    const ssize_t w = write(STDERR_FILENO, s + done, static_cast<size_t>(n - done));
    if (w <= 0) return;
    done += w;
  }
}

void put_number(long v) {
  char buf[24];
  int i = sizeof buf - 1;
  buf[i] = '\0';
  bool negative = v < 0;
  unsigned long u = negative ? static_cast<unsigned long>(-v) : static_cast<unsigned long>(v);
  do {
    buf[--i] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0 && i > 1);
  if (negative) buf[--i] = '-';
  put(buf + i);
}

// Sends `signo` to every other thread of this process, reading /proc/self/task with getdents64 (the
// directory functions of libc may allocate; the raw system call does not).
void forward_to_other_threads(int signo) {
  const int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  const long self = syscall(SYS_gettid);
  const long pid = getpid();
  alignas(8) char buf[4096];
  while (true) {
    const long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      const auto* d = reinterpret_cast<const dirent64*>(buf + at);
      at += d->d_reclen;
      long tid = 0;
      bool digits = d->d_name[0] != '\0';
      for (const char* c = d->d_name; *c != '\0'; ++c) {
        if (*c < '0' || *c > '9') {
          digits = false;
          break;
        }
        tid = tid * 10 + (*c - '0');
      }
      if (digits && tid != self) syscall(SYS_tgkill, pid, tid, signo);
    }
  }
  close(fd);
}

void on_dump_signal(int signo, siginfo_t* info, void*) {
  const int saved_errno = errno;
  // From another process (kill): this thread dumps and asks every other one to; from tgkill inside the
  // process (SI_TKILL): only its own stack.
  if (info != nullptr && info->si_code != SI_TKILL) {
    put("aisp: thread stacks on request (a worker silent past --timeout); one block per thread\n");
    forward_to_other_threads(signo);
  }
  void* frames[k_max_frames];
  const int n = backtrace(frames, k_max_frames);
  while (g_writing.test_and_set(std::memory_order_acquire)) {
  }
  put("--- thread ");
  put_number(syscall(SYS_gettid));
  put(" ---\n");
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  g_writing.clear(std::memory_order_release);
  errno = saved_errno;
}

}  // namespace

bool install_thread_dump(int signo) {
  void* warm[2];
  (void)backtrace(warm, 2);  // loads the unwinder now, outside any signal handler
  struct sigaction sa {};
  sa.sa_sigaction = on_dump_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  return sigaction(signo, &sa, nullptr) == 0;
}

}  // namespace aisp
