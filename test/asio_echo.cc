//
// asio_echo.cc -- the program of test/asio_echo.sh: Boost.Asio's own C++20
// coroutine echo server (Debian's libboost1.74-doc,
// examples/libs/asio/example/cpp17/coroutines_ts/echo_server.cpp, below
// as it is there) followed by cpprof with the two changes
// docs/tasks.md's Asio recipe asks for, marked "cpprof:": co_spawn is
// cpprof::co_spawn, and a session applies one cpprof::scope once it knows
// its tenant.  The rest, marked "test:", makes it a test: a tenant
// handshake (a session's first line names its tenant, and is echoed),
// work per read in a function of the tenant's own measured with the
// thread's CPU clock (the server's own truth of each tenant's CPU), four
// threads, and a harness around main.
//
//   asio_echo --addr HOST:PORT --profile FILE
//
// prints "serving ...", then "echo port N" (the echo server's port); each
// SIGUSR1 takes a CPU profile of echo_profile_s seconds into FILE, then
// prints "truth acme=NS globex=NS initech=NS migrations=0"; SIGTERM ends
// it, as the example's signal_set does.
//
// Copyright (c) 2003-2020 Christopher M. Kohlhoff (chris at kohlhoff dot com)
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE_1_0.txt or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#include <utility> // test: Boost 1.74's awaitable.hpp needs it, with gcc 12
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>

#include <cpprof_asio.hpp> // cpprof

#include "task_run.h" // test: the tenants, their work, the profile's file
#include <atomic>     // test
#include <string_view> // test
#include <thread>     // test
#include <vector>     // test

using boost::asio::ip::tcp;
using boost::asio::awaitable;
using boost::asio::co_spawn;
using boost::asio::detached;
using boost::asio::use_awaitable;
namespace this_coro = boost::asio::this_coro;

#if defined(BOOST_ASIO_ENABLE_HANDLER_TRACKING)
# define use_awaitable \
  boost::asio::use_awaitable_t(__FILE__, __LINE__, __PRETTY_FUNCTION__)
#endif

// test: each tenant's CPU in its work so far (the truth), ns; the work a
// read of n bytes costs; the profile's window.
static std::atomic<int64_t> truth_ns[TASK_TENANTS];
constexpr int64_t work_ns_per_byte = 300;
constexpr int echo_profile_s = 3;

// test: the tenant a handshake line names, or -1.
static int tenant_of(std::string_view line)
{
  for (int t = 0; t < TASK_TENANTS; t++)
    if (line == task_tenant_names[t])
      return t;
  return -1;
}

// test: the handshake: the session's first line, echoed, names its tenant.
static awaitable<int> handshake(tcp::socket& socket)
{
  char line[64];
  std::size_t n = 0;
  while (n == 0 || line[n - 1] != '\n')
  {
    if (n == sizeof line)
      co_return -1;
    n += co_await socket.async_read_some(
        boost::asio::buffer(line + n, sizeof line - n), use_awaitable);
  }
  co_await async_write(socket, boost::asio::buffer(line, n), use_awaitable);
  co_return tenant_of(std::string_view(line, n - 1));
}

awaitable<void> echo(tcp::socket socket)
{
  try
  {
    int tenant = co_await handshake(socket); // test
    if (tenant < 0) co_return; // test
    cpprof::scope in_tenant(cpprof::labels{{"tenant", task_tenant_names[tenant]}}); // cpprof
    char data[1024];
    for (;;)
    {
      std::size_t n = co_await socket.async_read_some(boost::asio::buffer(data), use_awaitable);
      truth_ns[tenant] += task_work_ns(tenant, int64_t(n) * work_ns_per_byte); // test
      co_await async_write(socket, boost::asio::buffer(data, n), use_awaitable);
    }
  }
  catch (std::exception& e)
  {
    std::printf("echo Exception: %s\n", e.what());
  }
}

awaitable<void> listener()
{
  auto executor = co_await this_coro::executor;
  tcp::acceptor acceptor(executor, {tcp::v4(), 0}); // test: port 0, not 55555
  std::printf("echo port %d\n", acceptor.local_endpoint().port()); // test
  std::fflush(stdout); // test
  for (;;)
  {
    tcp::socket socket = co_await acceptor.async_accept(use_awaitable);
    cpprof::co_spawn(executor, echo(std::move(socket)), detached); // cpprof
  }
}

// test: on each SIGUSR1, a CPU profile of the echo server's work and the
// truth over the same window (the load is steady, so the shares do not
// hang on the window's edges).
static void profile_on_signal(const char *path)
{
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  for (int sig; sigwait(&usr1, &sig) == 0;)
  {
    int64_t before[TASK_TENANTS], after[TASK_TENANTS];
    task_check(cpprof_cpu_profile_start(), "profile start");
    for (int t = 0; t < TASK_TENANTS; t++)
      before[t] = truth_ns[t];
    sleep(echo_profile_s);
    for (int t = 0; t < TASK_TENANTS; t++)
      after[t] = truth_ns[t];
    task_profile_end(path, before, after, 0);
  }
}

int main(int argc, char** argv) // test: arguments
{
  const char* path = task_start(argc, argv); // test: serving
  sigset_t usr1, term; // test: SIGUSR1 is the harness's, SIGTERM Asio's
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
  std::thread(profile_on_signal, path).detach(); // test
  try
  {
    boost::asio::io_context io_context(4); // test: 4 threads, not 1

    boost::asio::signal_set signals(io_context, SIGINT, SIGTERM);
    signals.async_wait([&](auto, auto){ io_context.stop(); });

    cpprof::co_spawn(io_context, listener(), detached); // cpprof

    std::vector<std::thread> threads; // test: 4 threads
    for (int i = 0; i < 3; i++)
      threads.emplace_back([&io_context] { io_context.run(); });
    io_context.run();
    for (std::thread& t : threads)
      t.join();
  }
  catch (std::exception& e)
  {
    std::printf("Exception: %s\n", e.what());
  }
  cpprof_http_stop(); // test
}
