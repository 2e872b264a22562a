#include "flotilla/http/server.h"

#include <gtest/gtest.h>

#include "flotilla/core/process.h"

namespace flotilla::http {
namespace {

struct CurlReply {
  int status = 0;
  std::string body;
};

// Talks to the server with curl, a real independent HTTP client.
CurlReply curl(uint16_t port, const std::string& path, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {"curl", "-s", "-o", "/dev/stdout", "-w", "\n%{http_code}"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("http://127.0.0.1:" + std::to_string(port) + path);
  auto result = runCommand({.argv = argv});
  CurlReply reply;
  if (!result.ok()) {
    return reply;
  }
  auto nl = result->out.rfind('\n');
  reply.body = result->out.substr(0, nl);
  reply.status = std::stoi(result->out.substr(nl + 1));
  return reply;
}

TEST(HttpServerTest, ServesStandardRoutes) {
  Metrics metrics("test");
  metrics.counter("requests_total", "Requests").Increment();
  bool ready = false;
  auto server = Server::start({}, standardRoutes(metrics, [&](std::string& why) {
                                why = "nats not connected";
                                return ready;
                              }));
  ASSERT_TRUE(server.ok()) << server.error().describe();
  uint16_t port = (*server)->port();
  ASSERT_NE(port, 0);

  EXPECT_EQ(curl(port, "/healthz").status, 200);
  auto not_ready = curl(port, "/readyz");
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_NE(not_ready.body.find("nats not connected"), std::string::npos);
  ready = true;
  EXPECT_EQ(curl(port, "/readyz").status, 200);
  auto metrics_reply = curl(port, "/metrics");
  EXPECT_EQ(metrics_reply.status, 200);
  EXPECT_NE(metrics_reply.body.find("flotilla_test_requests_total 1"), std::string::npos);
  EXPECT_EQ(curl(port, "/nope").status, 404);
  EXPECT_EQ(curl(port, "/healthz", {"-X", "POST"}).status, 405);
}

TEST(HttpServerTest, RejectsBodiesOverTheCapWith413) {
  std::map<std::string, Handler> routes;
  routes[routeKey("POST", "/hook")] = [](const Request& r) {
    return Response::text(200, std::to_string(r.body.size()));
  };
  auto server = Server::start({.max_body_bytes = 1024}, routes);
  ASSERT_TRUE(server.ok());
  auto small = curl((*server)->port(), "/hook", {"-X", "POST", "--data-binary", std::string(100, 'x')});
  EXPECT_EQ(small.status, 200);
  EXPECT_EQ(small.body, "100");
  auto big = curl((*server)->port(), "/hook", {"-X", "POST", "--data-binary", std::string(4096, 'x')});
  EXPECT_EQ(big.status, 413);
}

TEST(HttpServerTest, HandlerExceptionBecomes500) {
  std::map<std::string, Handler> routes;
  routes[routeKey("GET", "/boom")] = [](const Request&) -> Response { throw std::runtime_error("bug"); };
  auto server = Server::start({}, routes);
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(curl((*server)->port(), "/boom").status, 500);
}

TEST(HttpServerTest, PortInUseIsAClearError) {
  auto first = Server::start({}, {});
  ASSERT_TRUE(first.ok());
  auto second = Server::start({.port = (*first)->port()}, {});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("cannot listen"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::http
