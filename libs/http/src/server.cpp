#include "flotilla/http/server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "flotilla/core/ascii.h"
#include "flotilla/core/log.h"

namespace flotilla::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

std::string Request::header(std::string_view name) const {
  auto it = headers.find(toLowerAscii(name));
  return it == headers.end() ? std::string() : it->second;
}

Response Response::text(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Response Response::json(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = "application/json";
  return r;
}

std::string routeKey(std::string_view method, std::string_view path) {
  return std::string(method) + " " + std::string(path);
}

namespace {

//! Per-address token buckets (used on the server thread only).
class RateLimiter {
 public:
  RateLimiter(double per_second, double burst) : per_second_(per_second), burst_(std::max(burst, 1.0)) {}

  //! Takes one token for `remote`; false when its bucket is empty.
  bool allow(const std::string& remote) {
    if (per_second_ <= 0) {
      return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (buckets_.size() > kMaxTracked) {
      forgetFull(now);
    }
    auto [it, fresh] = buckets_.try_emplace(remote, Bucket{burst_, now});
    Bucket& bucket = it->second;
    if (!fresh) {
      bucket.tokens = refilled(bucket, now);
      bucket.last = now;
    }
    if (bucket.tokens < 1) {
      return false;
    }
    bucket.tokens -= 1;
    return true;
  }

 private:
  struct Bucket {
    double tokens;
    std::chrono::steady_clock::time_point last;
  };
  static constexpr size_t kMaxTracked = 10000;

  [[nodiscard]] double refilled(const Bucket& bucket, std::chrono::steady_clock::time_point now) const {
    const double seconds = std::chrono::duration<double>(now - bucket.last).count();
    return std::min(burst_, bucket.tokens + seconds * per_second_);
  }
  //! Many addresses: a full bucket carries no state worth keeping.
  void forgetFull(std::chrono::steady_clock::time_point now) {
    std::erase_if(buckets_, [&](const auto& entry) { return refilled(entry.second, now) >= burst_; });
  }

  double per_second_;
  double burst_;
  std::map<std::string, Bucket> buckets_;
};

}  // namespace

struct Server::Impl {
  ServerOptions options;
  std::map<std::string, Handler> routes;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread thread;
  std::atomic<bool> stopped{false};
  std::atomic<size_t> active{0};
  std::unique_ptr<RateLimiter> limiter;

  //! The owner logs and counts a refusal by its own labels; without an owner callback the server logs it.
  void reportRefused(const std::string& remote, int status) {
    if (!options.on_refused) {
      log::warn(status == 503 ? "http connection refused: too many connections" : "http request refused: rate limit",
                {{"remote", remote}, {"status", static_cast<int64_t>(status)}});
      return;
    }
    try {
      options.on_refused(remote, status);
    } catch (const std::exception& e) {
      log::error("http refusal callback threw", {{"error", e.what()}});
    }
  }

  // GCC 12+ misreads asio's recycling coroutine-frame allocator here (its operator new/delete are a matching pair
  // of asio's own; a known false positive of -Wmismatched-new-delete with inlined awaitable frames).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
  //! Answers `status` and closes: the response is written first, then whatever the client still sends is drained
  //! briefly, so the close does not reset the connection before the client has read the answer.
  asio::awaitable<void> refuse(beast::tcp_stream stream, int status, std::string body) {
    Reply reply;
    reply.version(11);
    reply.result(static_cast<unsigned>(status));
    reply.set(bhttp::field::server, "flotilla");
    reply.set(bhttp::field::content_type, "text/plain; charset=utf-8");
    if (status == 429 || status == 503) {
      reply.set(bhttp::field::retry_after, "1");
    }
    reply.keep_alive(false);
    reply.body() = std::move(body);
    reply.prepare_payload();
    stream.expires_after(std::chrono::seconds(2));
    beast::error_code ec;
    co_await bhttp::async_write(stream, reply, asio::redirect_error(asio::use_awaitable, ec));
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    std::array<char, 4096> sink{};
    for (size_t drained = 0; !ec && drained < (64u << 10);) {
      drained += co_await stream.async_read_some(asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ec));
    }
  }
#pragma GCC diagnostic pop

  Response dispatch(const Request& request) {
    auto it = routes.find(routeKey(request.method, request.path));
    if (it == routes.end()) {
      it = routes.find(routeKey("*", request.path));
    }
    if (it == routes.end()) {
      bool path_known = std::any_of(routes.begin(), routes.end(), [&](const auto& entry) {
        return entry.first.substr(entry.first.find(' ') + 1) == request.path;
      });
      return Response::text(path_known ? 405 : 404, path_known ? "method not allowed\n" : "not found\n");
    }
    try {
      return it->second(request);
    } catch (const std::exception& e) {
      // Exceptions never cross a handler boundary: a throwing handler is a bug, reported as 500.
      log::error("http handler threw", {{"path", request.path}, {"error", e.what()}});
      return Response::text(500, "internal error\n");
    }
  }

  using Message = bhttp::request<bhttp::string_body>;
  using Reply = bhttp::response<bhttp::string_body>;

  //! The request line and headers of `message` (header names lower-cased); the body is left to the caller.
  static Request requestHead(const Message& message, const std::string& remote) {
    Request request;
    request.method = std::string(message.method_string());
    std::string target(message.target());
    auto q = target.find('?');
    request.path = target.substr(0, q);
    request.query = q == std::string::npos ? "" : target.substr(q + 1);
    for (const auto& field : message) {
      auto name = field.name_string();
      request.headers[toLowerAscii(std::string_view(name.data(), name.size()))] = std::string(field.value());
    }
    request.remote_address = remote;
    return request;
  }

  //! 413 for a body over the limit; the owner hears of it (a webhook sender may deserve a status record).
  void rejectTooLarge(const Message& message, const std::string& remote, Reply& reply) {
    reply.result(bhttp::status::payload_too_large);
    reply.body() = "request body over " + std::to_string(options.max_body_bytes) + " bytes\n";
    log::warn("http request rejected: body too large", {{"remote", remote}, {"limit", options.max_body_bytes}});
    if (!options.on_body_too_large) {
      return;
    }
    try {
      options.on_body_too_large(requestHead(message, remote));
    } catch (const std::exception& e) {
      log::error("http body-too-large callback threw", {{"error", e.what()}});
    }
  }

  //! Runs the handler for `message` into `reply`; true when the client asked to keep the connection.
  bool answer(Message& message, const std::string& remote, Reply& reply) {
    Request request = requestHead(message, remote);
    request.body = std::move(message.body());
    Response response = dispatch(request);
    reply.result(static_cast<unsigned>(response.status));
    reply.set(bhttp::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) {
      reply.set(name, value);
    }
    reply.body() = std::move(response.body);
    return message.keep_alive();
  }

  static std::string remoteAddress(beast::tcp_stream& stream) {
    beast::error_code ec;
    auto endpoint = stream.socket().remote_endpoint(ec);
    return ec ? std::string() : endpoint.address().to_string();
  }

  //! Releases a served connection's place in `active` (taken by the accept loop, so a burst of accepts cannot
  //! overshoot the cap before the sessions start).
  struct ActiveGuard {
    std::atomic<size_t>& active;
    explicit ActiveGuard(std::atomic<size_t>& count) : active(count) {}
    ~ActiveGuard() { --active; }
    ActiveGuard(const ActiveGuard&) = delete;
    ActiveGuard& operator=(const ActiveGuard&) = delete;
  };

  asio::awaitable<void> session(tcp::socket socket) {
    ActiveGuard guard(active);
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    const std::string remote = remoteAddress(stream);
    while (true) {
      bhttp::request_parser<bhttp::string_body> parser;
      parser.body_limit(options.max_body_bytes);
      stream.expires_after(options.read_timeout);
      beast::error_code read_ec;
      co_await bhttp::async_read_header(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, read_ec));
      if (read_ec == bhttp::error::end_of_stream || read_ec == asio::error::operation_aborted) {
        break;
      }
      if (!read_ec && !limiter->allow(remote)) {
        // The body is never read: a flood costs the server its headers only.
        reportRefused(remote, 429);
        co_await refuse(std::move(stream), 429, "too many requests\n");
        co_return;
      }
      if (!read_ec) {
        co_await bhttp::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, read_ec));
      }
      Reply reply;
      bool keep_alive = false;
      if (read_ec == bhttp::error::body_limit) {
        rejectTooLarge(parser.get(), remote, reply);
      } else if (read_ec) {
        break;
      } else {
        keep_alive = answer(parser.get(), remote, reply);
      }
      reply.version(11);
      reply.set(bhttp::field::server, "flotilla");
      reply.keep_alive(keep_alive);
      reply.prepare_payload();
      beast::error_code write_ec;
      co_await bhttp::async_write(stream, reply, asio::redirect_error(asio::use_awaitable, write_ec));
      if (write_ec || !keep_alive) {
        break;
      }
    }
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  asio::awaitable<void> acceptLoop() {
    while (!stopped) {
      beast::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (ec == asio::error::operation_aborted) {
          break;
        }
        continue;
      }
      if (options.max_connections != 0 && active >= options.max_connections) {
        beast::tcp_stream stream(std::move(socket));
        const std::string remote = remoteAddress(stream);
        reportRefused(remote, 503);
        asio::co_spawn(io, refuse(std::move(stream), 503, "too many connections\n"), asio::detached);
        continue;
      }
      ++active;
      asio::co_spawn(io, session(std::move(socket)), asio::detached);
    }
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  stop();
}

Result<std::unique_ptr<Server>> Server::start(ServerOptions options, std::map<std::string, Handler> routes) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->routes = std::move(routes);
  impl->limiter = std::make_unique<RateLimiter>(impl->options.rate_per_second, impl->options.rate_burst);
  beast::error_code ec;
  auto address = asio::ip::make_address(impl->options.address, ec);
  if (ec) {
    return fail(ErrorKind::kInvalid, "invalid listen address " + impl->options.address + ": " + ec.message());
  }
  tcp::endpoint endpoint(address, impl->options.port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) {
    impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  }
  if (!ec) {
    impl->acceptor.bind(endpoint, ec);
  }
  if (!ec) {
    impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return fail(
        ErrorKind::kPermanent,
        "cannot listen on " + impl->options.address + ":" + std::to_string(impl->options.port) + ": " + ec.message(),
        "http::Server::start");
  }
  Impl* raw = impl.get();
  asio::co_spawn(raw->io, raw->acceptLoop(), asio::detached);
  raw->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

uint16_t Server::port() const {
  return impl_->acceptor.local_endpoint().port();
}

size_t Server::activeConnections() const {
  return impl_->active.load();
}

void Server::stop() {
  if (!impl_ || impl_->stopped.exchange(true)) {
    return;
  }
  asio::post(impl_->io, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->io.stop();
  });
  if (impl_->thread.joinable()) {
    impl_->thread.join();
  }
}

std::map<std::string, Handler> standardRoutes(const Metrics& metrics, std::function<bool(std::string& why)> ready) {
  std::map<std::string, Handler> routes;
  routes[routeKey("GET", "/metrics")] = [&metrics](const Request&) {
    Response r = Response::text(200, metrics.exposition());
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    return r;
  };
  routes[routeKey("GET", "/healthz")] = [](const Request&) { return Response::text(200, "ok\n"); };
  routes[routeKey("GET", "/readyz")] = [ready = std::move(ready)](const Request&) {
    std::string why;
    if (!ready || ready(why)) {
      return Response::text(200, "ready\n");
    }
    return Response::text(503, "not ready: " + why + "\n");
  };
  return routes;
}

}  // namespace flotilla::http
