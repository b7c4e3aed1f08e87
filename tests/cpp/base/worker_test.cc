// Tests for daydream/base/worker.h.
#include "daydream/base/worker.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

using namespace daydream;

TEST_CASE("Worker runs each job on one thread of its own, one after another", "[worker]") {
  Worker worker;
  CHECK(worker.Wait());  // nothing started
  std::set<std::thread::id> threads;
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) {
    REQUIRE(worker.Start([&, i] {
      threads.insert(std::this_thread::get_id());
      order.push_back(i);
    }));
    CHECK(worker.Wait());
  }
  CHECK(threads.size() == 1);
  CHECK(threads.count(std::this_thread::get_id()) == 0);
  REQUIRE(order.size() == 50);
  for (int i = 0; i < 50; ++i) CHECK(order[static_cast<size_t>(i)] == i);
}

TEST_CASE("Worker runs a job beside the caller until Wait", "[worker]") {
  Worker worker;
  std::atomic<bool> go{false};
  std::atomic<bool> done{false};
  REQUIRE(worker.Start([&] {
    while (!go.load()) std::this_thread::yield();  // would never end if it ran in Start
    done = true;
  }));
  CHECK_FALSE(done.load());
  go = true;
  CHECK(worker.Wait());
  CHECK(done.load());
}

TEST_CASE("Worker's Wait says when a job threw, and the next job still runs", "[worker]") {
  Worker worker;
  REQUIRE(worker.Start([] { throw std::runtime_error("job failed"); }));
  CHECK_FALSE(worker.Wait());
  bool ran = false;
  REQUIRE(worker.Start([&] { ran = true; }));
  CHECK(worker.Wait());
  CHECK(ran);
}

TEST_CASE("Worker's destructor waits for the job in flight", "[worker]") {
  std::atomic<bool> done{false};
  {
    Worker worker;
    REQUIRE(worker.Start([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      done = true;
    }));
  }
  CHECK(done.load());
}

TEST_CASE("Worker's Start waits for the job before it", "[worker]") {
  Worker worker;
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  for (int i = 0; i < 3; ++i) {
    REQUIRE(worker.Start([&] {
      most = std::max(most.load(), ++running);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      --running;
    }));
  }
  CHECK(worker.Wait());
  CHECK(most.load() == 1);
}
