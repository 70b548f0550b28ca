// dpsim_bench_rss CMD ARGS...: runs CMD (stdout and stderr to /dev/null) and prints "WALL_S MAX_RSS_KB STATUS CPU_S"
// (CPU_S: user + system time of CMD and of the processes it waited for: dpsim's simulating children).
// The benchmark measures whole processes through it: a process's peak RSS includes what the process that exec'd
// it held (Linux keeps the larger at exec), so the parent must be this small one, not the benchmark, which has
// SimGrid mapped. Plain libc only.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs("usage: dpsim_bench_rss CMD ARGS...\n", stderr);
    return 2;
  }
  timespec t0{}, t1{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    execv(argv[1], argv + 1);
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid) return 1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double wall_s =
      static_cast<double>(t1.tv_sec - t0.tv_sec) + 1e-9 * static_cast<double>(t1.tv_nsec - t0.tv_nsec);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  std::printf("%.6f %ld %d %.6f\n", wall_s, usage.ru_maxrss,
              WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
              seconds(usage.ru_utime) + seconds(usage.ru_stime));
  return 0;
}
