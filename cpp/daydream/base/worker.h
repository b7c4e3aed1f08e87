// One helper thread that runs jobs handed to it one at a time. A loop that
// hands many short jobs to a second core (the reader's second windows: 98
// for a 200 MB trace) pays for one thread instead of one per job: starting a
// thread (std::async) cost 75 us a job on a 2-vCPU guest.
#ifndef DAYDREAM_BASE_WORKER_H_
#define DAYDREAM_BASE_WORKER_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace daydream {

class Worker {
 public:
  Worker() = default;
  // Waits for the job in flight, then ends the thread.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Starts `job` on the thread (started on the first call) and returns;
  // false, with nothing run, when no thread can be had. One job at a time:
  // Wait() for it before the next.
  bool Start(std::function<void()> job);
  // Returns once the job last started has returned (at once if none):
  // false if it ended by throwing (what it threw is dropped).
  bool Wait();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool busy_ = false;  // job_ handed over and not yet returned
  bool threw_ = false;  // the last job ended by throwing
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace daydream

#endif  // DAYDREAM_BASE_WORKER_H_
