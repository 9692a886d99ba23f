// A `warmstart serve` child process on a free loopback port and a raw-socket HTTP client,
// for tests that must misbehave the way no HTTP library lets a client misbehave (bytes
// trickled, bodies cut off, connections reset mid-stream).
#pragma once
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace ws::test {

inline std::string slurp_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One `warmstart serve` child; SIGTERM (then SIGKILL) on destruction.
class ServeProcess {
 public:
  ServeProcess(const std::string& binary, const std::vector<std::string>& args) {
    static std::atomic<int> counter{0};
    log_ = std::filesystem::temp_directory_path() /
           ("ws-hostile-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".log");
    std::vector<std::string> all = {binary, "serve", "--port", "0"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
    for (int i = 0; i < 600 && alive() && port_ == 0; ++i) {
      std::smatch m;
      const std::string log = slurp_file(log_);
      if (std::regex_search(log, m, listening)) port_ = std::stoi(m[1]);
      else std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      for (int i = 0; i < 100 && waitpid(pid_, &status, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (waitpid(pid_, &status, WNOHANG) == 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
      }
    }
    std::filesystem::remove(log_);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  std::string log() const { return slurp_file(log_); }
  // Still running (not exited, not killed by a signal).
  bool alive() const {
    int status = 0;
    return pid_ > 0 && waitpid(pid_, &status, WNOHANG) == 0;
  }
  // Resident set now and at its peak (kB), from /proc; -1 when unreadable.
  long rss_kb() const { return status_kb("VmRSS:"); }
  long peak_rss_kb() const { return status_kb("VmHWM:"); }

 private:
  long status_kb(const std::string& key) const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
    return -1;
  }

  pid_t pid_ = -1;
  int port_ = 0;
  std::filesystem::path log_;
};

// A TCP connection to 127.0.0.1:port that sends and reads raw bytes.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) close_now();
  }
  ~RawClient() { close_now(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  RawClient(RawClient&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  RawClient& operator=(RawClient&& o) noexcept {
    if (this != &o) {
      close_now();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }

  bool ok() const { return fd_ >= 0; }
  // Sends all of `s`; false when the connection failed first, or (answered_stops) the
  // server answered before taking all of it (a refusal: reading it beats a reset).
  bool send_all(const std::string& s, bool answered_stops = false) {
    for (size_t done = 0; fd_ >= 0 && done < s.size();) {
      pollfd p{fd_, short(POLLOUT | (answered_stops ? POLLIN : 0)), 0};
      if (poll(&p, 1, 30000) <= 0 || (p.revents & POLLIN) || !(p.revents & POLLOUT)) return false;
      const ssize_t n = ::send(fd_, s.data() + done, s.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n <= 0) return false;
      done += size_t(n);
    }
    return fd_ >= 0;
  }
  // Reads until the peer closes, `until` appears in what was read, or `timeout` passes.
  std::string read_until(const std::string& until, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    std::string got;
    char buf[8192];
    while (fd_ >= 0 && (until.empty() || got.find(until) == std::string::npos)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, int(left.count())) <= 0) break;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, size_t(n));
    }
    return got;
  }
  // Closes with a reset (SO_LINGER 0), the way a killed client vanishes.
  void reset() {
    if (fd_ < 0) return;
    linger l{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close_now();
  }
  void close_now() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// "HTTP/1.1 413 ..." -> 413; 0 when `response` is no HTTP response.
inline int http_status(const std::string& response) {
  if (response.rfind("HTTP/1.", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.c_str() + 9);
}

inline std::string post_request(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace ws::test
