#include "daydream/base/worker.h"

#include <system_error>
#include <utility>

namespace daydream {

Worker::~Worker() {
  if (!thread_.joinable()) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool Worker::Start(std::function<void()> job) {
  Wait();
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { Loop(); });
    } catch (const std::system_error&) {
      return false;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
    busy_ = true;
  }
  cv_.notify_all();
  return true;
}

bool Worker::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !busy_; });
  return !threw_;
}

void Worker::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return busy_ || stop_; });
    if (busy_) {
      std::function<void()> job = std::move(job_);
      lock.unlock();
      bool threw = false;
      try {
        job();
      } catch (...) {
        threw = true;
      }
      lock.lock();
      threw_ = threw;
      busy_ = false;
      cv_.notify_all();
    } else {
      return;  // stop_, nothing handed over
    }
  }
}

}  // namespace daydream
