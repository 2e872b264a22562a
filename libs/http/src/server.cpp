#include "flotilla/http/server.h"

#include <algorithm>
#include <atomic>
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

struct Server::Impl {
  ServerOptions options;
  std::map<std::string, Handler> routes;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread thread;
  std::atomic<bool> stopped{false};

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

  asio::awaitable<void> session(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    const std::string remote = remoteAddress(stream);
    while (true) {
      bhttp::request_parser<bhttp::string_body> parser;
      parser.body_limit(options.max_body_bytes);
      stream.expires_after(options.read_timeout);
      beast::error_code read_ec;
      co_await bhttp::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, read_ec));
      if (read_ec == bhttp::error::end_of_stream || read_ec == asio::error::operation_aborted) {
        break;
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
