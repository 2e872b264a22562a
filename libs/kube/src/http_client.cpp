// The only translation unit that includes Boost.Beast/Asio (they compile slowly, see dependencies.md G7).
// Every operation is asynchronous on a per-connection io_context driven by the calling thread, because Beast's
// timeouts (tcp_stream::expires_at) only apply to asynchronous operations.
#include "flotilla/kube/http_client.h"

#include <atomic>
#include <limits>
#include <mutex>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "flotilla/core/log.h"

namespace flotilla::kube {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// An idle pooled connection older than this is dropped rather than reused: kube-apiserver closes idle
// connections after a while, and a fresh connection is cheaper than a failed request plus a retry.
constexpr auto kMaxIdleAge = std::chrono::seconds(45);
// Per open stream (a watch holds one for its lifetime, the agent one per watched kind): a few KiB hold a typical
// watch event (bench_agent: a ConfigMap's is ~1.5 KiB); a longer one arrives in several reads.
constexpr size_t kStreamChunk = size_t{4} * 1024;

std::string millis(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + "ms";
}

// The one place where Asio/Beast/OpenSSL error codes become an Error. A certificate the server presents that
// fails verification is kPermanent (a wrong CA or name does not fix itself by retrying); everything else on
// the transport is kTransient.
Error transportError(const beast::error_code& ec, std::string_view what, const std::string& peer, SSL* ssl_handle) {
  std::string where = std::string(what) + " " + peer;
  if (ssl_handle != nullptr) {
    long verify = SSL_get_verify_result(ssl_handle);
    if (verify != X509_V_OK) {
      return makeError(ErrorKind::kPermanent,
                       "TLS certificate verification of " + peer + " failed: " + X509_verify_cert_error_string(verify),
                       where);
    }
  }
  if (ec == beast::error::timeout) {
    return makeError(ErrorKind::kTransient, std::string(what) + " " + peer + " timed out", where);
  }
  return makeError(ErrorKind::kTransient, std::string(what) + " " + peer + ": " + ec.message(), where);
}

// Errors that mean the server had closed a reused keep-alive connection before our request got there.
bool staleConnection(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == ssl::error::stream_truncated;
}

struct Connection {
  asio::io_context ioc{1};
  beast::ssl_stream<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  bool used = false;  // completed an exchange before, so a failure may just mean the server closed it
  Clock::time_point idle_since = Clock::now();

  explicit Connection(ssl::context& ctx) : stream(ioc, ctx) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  ~Connection() {
    // Cancel whatever is in flight (an unfinished stream read) and let its handler run before members go away.
    beast::get_lowest_layer(stream).close();
    ioc.restart();
    ioc.run_for(std::chrono::seconds(1));
  }

  // Runs until every started operation finished; the tcp_stream deadline bounds them.
  void run() {
    ioc.restart();
    ioc.run();
  }
};

// Builds an HTTP/1.1 request from ours.
http::request<http::string_body> toBeast(const HttpRequest& request, const std::string& host,
                                         const std::string& user_agent) {
  http::request<http::string_body> out;
  out.method_string(request.method);
  out.target(request.target);
  out.version(11);
  out.set(http::field::host, host);
  out.set(http::field::user_agent, user_agent);
  for (const auto& [name, value] : request.headers) {
    out.set(name, value);
  }
  if (!request.body.empty() || !request.content_type.empty()) {
    out.set(http::field::content_type, request.content_type);
    out.body() = request.body;
  }
  out.keep_alive(true);
  out.prepare_payload();
  return out;
}

bool isIpAddress(const std::string& host) {
  beast::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

struct HttpClient::Impl {
  Kubeconfig config;
  HttpClientOptions options;
  std::string peer;  // "host:port" for messages and the Host header
  std::optional<ssl::context> ctx;
  std::mutex mutex;
  std::vector<std::unique_ptr<Connection>> idle;
  std::atomic<size_t> opened{0};
  std::atomic<size_t> stale_retries{0};

  Status buildContext() {
    ctx.emplace(ssl::context::tls_client);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                     ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    // OpenSSL keeps a read and a write buffer (about 34 KiB) per connection for its whole life; watches and pooled
    // connections are idle almost always, so they give them back between records.
    SSL_CTX_set_mode(ctx->native_handle(), SSL_MODE_RELEASE_BUFFERS);
    beast::error_code ec;
    if (config.insecure_skip_tls_verify) {
      ctx->set_verify_mode(ssl::verify_none);
    } else {
      ctx->set_verify_mode(ssl::verify_peer);
      if (config.ca_pem.empty()) {
        ctx->set_default_verify_paths(ec);
        if (ec) {
          return fail(ErrorKind::kInvalid, "cannot load the system CA certificates: " + ec.message());
        }
      } else {
        FLOTILLA_TRY(addCaBundle());
      }
    }
    if (!config.client_cert_pem.empty() || !config.client_key_pem.empty()) {
      if (config.client_cert_pem.empty() || config.client_key_pem.empty()) {
        return fail(ErrorKind::kInvalid, "client-certificate and client-key must be given together");
      }
      ctx->use_certificate_chain(asio::buffer(config.client_cert_pem), ec);
      if (ec) {
        return fail(ErrorKind::kInvalid, "client-certificate: not a usable PEM certificate: " + ec.message());
      }
      ctx->use_private_key(asio::buffer(config.client_key_pem), ssl::context::pem, ec);
      if (ec) {
        return fail(ErrorKind::kInvalid, "client-key: not a usable PEM private key: " + ec.message());
      }
      if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
        ERR_clear_error();
        return fail(ErrorKind::kInvalid, "client-key does not match client-certificate");
      }
    }
    return okStatus();
  }

  // Every certificate in the PEM bundle goes into the trust store (asio's add_certificate_authority stops at
  // the first on some versions).
  Status addCaBundle() {
    X509_STORE* store = SSL_CTX_get_cert_store(ctx->native_handle());
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(
        BIO_new_mem_buf(config.ca_pem.data(), static_cast<int>(config.ca_pem.size())), &BIO_free);
    int added = 0;
    while (bio) {
      X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
      if (cert == nullptr) {
        break;
      }
      X509_STORE_add_cert(store, cert);  // takes its own reference; duplicates are harmless
      X509_free(cert);
      ++added;
    }
    ERR_clear_error();  // the read that ended the loop leaves "no start line" behind
    if (added == 0) {
      return fail(ErrorKind::kInvalid, "certificate-authority: no PEM certificate found");
    }
    return okStatus();
  }

  Result<std::unique_ptr<Connection>> connect(Clock::time_point deadline) {
    auto conn = std::make_unique<Connection>(*ctx);
    deadline = std::min(deadline, Clock::now() + options.connect_timeout);
    beast::error_code ec;
    tcp::resolver resolver(conn->ioc);
    tcp::resolver::results_type endpoints;
    resolver.async_resolve(config.host, config.port, [&](const beast::error_code& e, tcp::resolver::results_type r) {
      ec = e;
      endpoints = std::move(r);
    });
    conn->run();
    if (ec) {
      return fail(transportError(ec, "resolve", peer, nullptr));
    }
    auto& tcp_layer = beast::get_lowest_layer(conn->stream);
    tcp_layer.expires_at(deadline);
    tcp_layer.async_connect(endpoints, [&](const beast::error_code& e, const tcp::endpoint&) { ec = e; });
    conn->run();
    if (ec) {
      return fail(transportError(ec, "connect to", peer, nullptr));
    }
    SSL* ssl_handle = conn->stream.native_handle();
    const std::string& verify_name = config.tls_server_name.empty() ? config.host : config.tls_server_name;
    bool ip = config.tls_server_name.empty() && isIpAddress(config.host);
    if (!ip) {
      SSL_set_tlsext_host_name(ssl_handle, verify_name.c_str());  // SNI is for names only
    }
    if (!config.insecure_skip_tls_verify) {
      // OpenSSL checks the name during the handshake: a DNS SAN for names, an IP SAN for addresses.
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl_handle);
      int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, config.host.c_str())
                   : X509_VERIFY_PARAM_set1_host(param, verify_name.c_str(), verify_name.size());
      if (set != 1) {
        ERR_clear_error();
        return fail(ErrorKind::kInvalid, "cannot verify against server name " + verify_name);
      }
    }
    conn->stream.async_handshake(ssl::stream_base::client, [&](const beast::error_code& e) { ec = e; });
    conn->run();
    if (ec) {
      Error error = transportError(ec, "TLS handshake with", peer, ssl_handle);
      ERR_clear_error();
      return fail(error);
    }
    ++opened;
    if (options.metrics != nullptr) {
      options.metrics->counter("kube_connections_opened_total", "TLS connections opened to kube-apiserver").Increment();
    }
    return conn;
  }

  std::unique_ptr<Connection> takeIdle() {
    std::lock_guard lock(mutex);
    while (!idle.empty()) {
      auto conn = std::move(idle.back());
      idle.pop_back();
      if (Clock::now() - conn->idle_since < kMaxIdleAge) {
        return conn;
      }
    }
    return nullptr;
  }

  void giveBack(std::unique_ptr<Connection> conn) {
    conn->used = true;
    conn->idle_since = Clock::now();
    std::lock_guard lock(mutex);
    if (idle.size() < options.max_idle_connections) {
      idle.push_back(std::move(conn));
    }
  }

  struct Exchange {
    std::optional<HttpResponse> response;
    beast::error_code ec;
    std::string stage;
    bool received_any = false;
    bool keep_alive = false;
  };

  Exchange exchange(Connection& conn, const HttpRequest& request, Clock::time_point deadline) {
    Exchange out;
    auto beast_request = toBeast(request, peer, options.user_agent);
    auto& tcp_layer = beast::get_lowest_layer(conn.stream);
    tcp_layer.expires_at(deadline);
    http::async_write(conn.stream, beast_request, [&](const beast::error_code& e, size_t) { out.ec = e; });
    conn.run();
    if (out.ec) {
      out.stage = "send request to";
      return out;
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(options.max_body_bytes);
    tcp_layer.expires_at(deadline);
    http::async_read(conn.stream, conn.buffer, parser, [&](const beast::error_code& e, size_t) { out.ec = e; });
    conn.run();
    out.received_any = parser.got_some();
    if (out.ec) {
      out.stage = "read response from";
      return out;
    }
    auto& message = parser.get();
    out.keep_alive = message.keep_alive();
    out.response = HttpResponse{.status = static_cast<int>(message.result_int()),
                                .body = std::move(message.body()),
                                .content_type = std::string(message[http::field::content_type])};
    return out;
  }
};

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

Result<std::unique_ptr<HttpClient>> HttpClient::create(const Kubeconfig& config, HttpClientOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->options = std::move(options);
  impl->peer = config.hostPort();
  try {
    FLOTILLA_TRY(impl->buildContext());
  } catch (const std::exception& e) {  // asio throws from the context constructor on OpenSSL failure
    return fail(ErrorKind::kInternal, std::string("TLS context: ") + e.what(), "HttpClient::create");
  }
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

Result<HttpResponse> HttpClient::send(const HttpRequest& request) {
  auto deadline = Clock::now() + request.timeout;
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Connection> conn = impl_->takeIdle();
    if (!conn) {
      auto fresh = impl_->connect(deadline);
      FLOTILLA_TRY(fresh);
      conn = std::move(*fresh);
    }
    bool reused = conn->used;
    auto result = impl_->exchange(*conn, request, deadline);
    if (result.response) {
      if (result.keep_alive) {
        impl_->giveBack(std::move(conn));
      }
      return std::move(*result.response);
    }
    // The server closed an idle connection we took from the pool: nothing reached it, so sending again on a
    // fresh connection is safe. Once only: a second failure is real.
    if (reused && attempt == 0 && !result.received_any && staleConnection(result.ec)) {
      ++impl_->stale_retries;
      log::debug("kube connection was closed by the server; retrying on a new one",
                 {{"server", impl_->peer}, {"error", result.ec.message()}});
      if (impl_->options.metrics != nullptr) {
        impl_->options.metrics
            ->counter("kube_stale_connection_retries_total",
                      "requests resent on a new connection because the pooled one was closed by the server")
            .Increment();
      }
      continue;
    }
    Error error = transportError(result.ec, result.stage, impl_->peer, nullptr);
    if (result.ec == beast::error::timeout) {
      error.message += " (deadline " + millis(request.timeout) + ")";
    }
    return fail(std::move(error));
  }
}

size_t HttpClient::connectionsOpened() const {
  return impl_->opened.load();
}
size_t HttpClient::staleRetries() const {
  return impl_->stale_retries.load();
}

void HttpClient::closeIdle() {
  std::vector<std::unique_ptr<Connection>> closing;
  {
    std::lock_guard lock(impl_->mutex);
    closing.swap(impl_->idle);
  }
}

// ---- streaming ----------------------------------------------------------------------------------------------

struct HttpStream::Impl {
  std::unique_ptr<Connection> conn;
  std::string peer;
  http::response_parser<http::buffer_body> parser;
  int status = 0;
  std::string content_type;
  char chunk[kStreamChunk];
  bool pending = false;  // a read is in flight (started by an earlier read() that timed out)
  bool finished = false;
  beast::error_code ec;
  bool failed = false;
  size_t got = 0;

  void startRead() {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    pending = true;
    http::async_read_some(conn->stream, conn->buffer, parser, [this](const beast::error_code& e, size_t) {
      pending = false;
      // need_buffer only says our chunk buffer is full: take what is there and read again.
      if (e && e != http::error::need_buffer) {
        ec = e;
        failed = true;
      }
      got = sizeof chunk - parser.get().body().size;
    });
  }
};

HttpStream::HttpStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpStream::~HttpStream() = default;

int HttpStream::status() const {
  return impl_->status;
}
const std::string& HttpStream::contentType() const {
  return impl_->content_type;
}
bool HttpStream::done() const {
  return impl_->finished;
}

Result<std::string> HttpStream::read(std::chrono::milliseconds timeout) {
  auto& s = *impl_;
  if (s.finished) {
    return std::string();
  }
  if (!s.pending) {
    s.got = 0;
    s.startRead();
  }
  s.conn->ioc.restart();
  s.conn->ioc.run_for(timeout);
  if (s.pending) {
    return std::string();  // nothing yet; the read stays in flight for the next call
  }
  if (s.failed) {
    s.finished = true;
    return fail(transportError(s.ec, "read stream from", s.peer, nullptr));
  }
  std::string out(s.chunk, s.got);
  s.got = 0;
  if (s.parser.is_done()) {
    s.finished = true;
  }
  return out;
}

Result<std::unique_ptr<HttpStream>> HttpClient::stream(const HttpRequest& request) {
  auto deadline = Clock::now() + request.timeout;
  auto conn = impl_->connect(deadline);
  FLOTILLA_TRY(conn);
  auto stream_impl = std::make_unique<HttpStream::Impl>();
  stream_impl->conn = std::move(*conn);
  stream_impl->peer = impl_->peer;
  // A watch has no natural end. (Not boost::none: Beast 1.74 then rejects every body with a Content-Length.)
  stream_impl->parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  auto& c = *stream_impl->conn;
  auto beast_request = toBeast(request, impl_->peer, impl_->options.user_agent);
  beast::error_code ec;
  auto& tcp_layer = beast::get_lowest_layer(c.stream);
  tcp_layer.expires_at(deadline);
  http::async_write(c.stream, beast_request, [&](const beast::error_code& e, size_t) { ec = e; });
  c.run();
  if (ec) {
    return fail(transportError(ec, "send request to", impl_->peer, nullptr));
  }
  tcp_layer.expires_at(deadline);
  http::async_read_header(c.stream, c.buffer, stream_impl->parser, [&](const beast::error_code& e, size_t) { ec = e; });
  c.run();
  if (ec) {
    return fail(transportError(ec, "read response headers from", impl_->peer, nullptr));
  }
  // From here on reads wait as long as the caller asks; the deadline was for getting an answer at all.
  tcp_layer.expires_never();
  stream_impl->status = static_cast<int>(stream_impl->parser.get().result_int());
  stream_impl->content_type = std::string(stream_impl->parser.get()[http::field::content_type]);
  stream_impl->finished = stream_impl->parser.is_done();
  return std::unique_ptr<HttpStream>(new HttpStream(std::move(stream_impl)));
}

}  // namespace flotilla::kube
