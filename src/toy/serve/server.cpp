// serve/server.cpp — HTTP setup, the small routes, errors and the server's lifecycle.
#include "toy/serve/server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "toy/serve/openai_format.h"
#include "toy/serve/server_impl.h"

namespace toy::serve {

void HttpServer::widen_backlog(int n) {
  // Calling listen() again on a listening socket only changes its backlog (POSIX/Linux).
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, n);
}

void HttpServer::halt() {
  // What httplib::Server::stop() does, without its "is the loop running yet" check: the accept
  // loop tests svr_sock_ before every accept, and a shut-down socket wakes a blocked accept.
  const socket_t s = svr_sock_.exchange(INVALID_SOCKET);
  if (s != INVALID_SOCKET) {
    ::shutdown(s, SHUT_RDWR);
    ::close(s);
  }
}

int client_socket(const httplib::Request& req) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const int fd = std::atoi(entry.path().filename().c_str());
    sockaddr_storage peer{}, local{};
    socklen_t np = sizeof peer, nl = sizeof local;
    char host[NI_MAXHOST], port[NI_MAXSERV], local_port[NI_MAXSERV];
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &np) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &nl) != 0 ||
        ::getnameinfo(reinterpret_cast<sockaddr*>(&peer), np, host, sizeof host, port, sizeof port,
                      NI_NUMERICHOST | NI_NUMERICSERV) != 0 ||
        ::getnameinfo(reinterpret_cast<sockaddr*>(&local), nl, nullptr, 0, local_port, sizeof local_port,
                      NI_NUMERICSERV) != 0)
      continue;
    if (req.remote_addr == host && req.remote_port == std::atoi(port) && req.local_port == std::atoi(local_port))
      return fd;
  }
  return -1;
}

bool client_alive(int fd) {
  if (fd < 0) return true;
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  if (::poll(&p, 1, 0) <= 0) return true;  // nothing to read
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));  // 0: the client closed
}

void send_json(httplib::Response& res, const json& j, int status) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.body(), e.status);
  if (e.status == 503) res.set_header("Retry-After", "1");
}

json parse_body(const httplib::Request& req) {
  json j = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ApiError(400, "the request body is not valid JSON", "", "invalid_json");
  return j;
}

namespace {

bool known_path(const std::string& p) {
  for (const char* route : {"/health", "/v1/models", "/models", "/v1/completions", "/completions",
                            "/v1/chat/completions", "/chat/completions", "/tokenize", "/detokenize"})
    if (p == route) return true;
  return p.rfind("/v1/models/", 0) == 0;
}

// Wraps a handler so that an ApiError becomes its error response.
httplib::Server::Handler guarded(std::function<void(const httplib::Request&, httplib::Response&)> fn) {
  return [fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
    try {
      fn(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  };
}

}  // namespace

Server::Impl::Impl(const Model& m, std::shared_ptr<const Tokenizer> t, ChatPromptSource chat, ServerConfig c)
    : model(m),
      tokenizer(std::move(t)),
      prompter(std::move(chat)),
      config(std::move(c)),
      slots(m, config.parallel, config.n_ctx, config.kv_type, config.queue) {}

void Server::Impl::log(const std::string& line) const {
  if (config.log_requests) std::fprintf(stderr, "toy serve: %s\n", line.c_str());
}

void Server::Impl::routes() {
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const SlotPool::Stats s = slots.stats();
    const DecodeLoop::Stats d = decoder.stats();
    send_json(res,
              {{"status", stopping ? "shutting down" : "ok"},
               {"slots_idle", s.slots - s.busy},
               {"slots_processing", s.busy},
               {"requests_waiting", s.waiting},
               {"queue_limit", s.max_queue},
               {"decode_steps", d.steps},
               {"decode_tokens", d.tokens}},
              stopping ? 503 : 200);
  });
  auto model_object = [this] {
    return json{
        {"id", config.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "toy"}, {"n_ctx", slots.n_ctx()}};
  };
  auto list_models = [=](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"object", "list"}, {"data", json::array({model_object()})}});
  };
  http.Get("/v1/models", list_models);
  http.Get("/models", list_models);
  http.Get(R"(/(?:v1/)?models/(.+))", guarded([=, this](const httplib::Request& req, httplib::Response& res) {
             if (req.matches[1] != config.model_name)
               throw ApiError(404, "The model '" + std::string(req.matches[1]) + "' does not exist", "model",
                              "model_not_found");
             send_json(res, model_object());
           }));
  for (Endpoint e : {Endpoint::Completions, Endpoint::Chat}) {
    auto h = [this, e](const httplib::Request& req, httplib::Response& res) { handle_completion(req, res, e); };
    const std::string path = e == Endpoint::Chat ? "/chat/completions" : "/completions";
    http.Post("/v1" + path, h);
    http.Post(path, h);
  }
  http.Post("/tokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
              const json body = parse_body(req);
              if (!body.is_object() || !body.contains("content") || !body["content"].is_string())
                throw ApiError(400, "'content' must be a string", "content", "invalid_type");
              const bool add_special = body.value("add_special", false), with_pieces = body.value("with_pieces", false);
              const auto ids =
                  tokenizer->encode(body["content"].get<std::string>(), add_special, /*parse_special=*/true);
              json tokens = json::array();
              for (int32_t id : ids)
                tokens.push_back(with_pieces ? json{{"id", id}, {"piece", tokenizer->piece(id, true)}} : json(id));
              send_json(res, {{"tokens", tokens}});
            }));
  http.Post("/detokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
              const json body = parse_body(req);
              if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
                throw ApiError(400, "'tokens' must be an array of token ids", "tokens", "invalid_type");
              std::vector<int32_t> ids;
              for (const json& v : body["tokens"]) {
                if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= tokenizer->n_vocab())
                  throw ApiError(400,
                                 "'tokens' holds " + v.dump() + ", not a token id in [0, " +
                                     std::to_string(tokenizer->n_vocab()) + ")",
                                 "tokens", "invalid_value");
                ids.push_back(int32_t(v.get<int64_t>()));
              }
              send_json(res, {{"content", tokenizer->decode(ids)}});
            }));
  // CORS preflight, so browser front-ends can call the API.
  http.Options(".*", [](const httplib::Request&, httplib::Response& res) {
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
    res.set_header("Access-Control-Max-Age", "86400");
  });
}

Server::Server(const Model& model, std::shared_ptr<const Tokenizer> tokenizer, ChatPromptSource chat,
               ServerConfig config) {
  if (!tokenizer) throw std::invalid_argument("toy serve needs a model file with a tokenizer");
  if (config.parallel < 1) throw std::invalid_argument("--parallel must be at least 1");
  if (config.queue < 0) throw std::invalid_argument("--queue must be at least 0");
  if (config.n_ctx <= 0) config.n_ctx = std::min<int64_t>(model.config().n_ctx, 4096);
  impl_ = std::make_unique<Impl>(model, std::move(tokenizer), std::move(chat), std::move(config));
  Impl& s = *impl_;
  HttpServer& h = s.http;
  // Threads: every running or waiting request holds one, plus room for idle keep-alive
  // connections and the cheap routes, so /health still answers when the queue is full.
  const size_t threads = size_t(s.config.parallel + s.config.queue + 32);
  h.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  h.set_payload_max_length(s.config.max_body_bytes);
  h.set_read_timeout(s.config.timeout_s, 0);
  h.set_write_timeout(s.config.timeout_s, 0);
  h.set_keep_alive_max_count(1000);
  h.set_tcp_nodelay(true);  // stream chunks are small; do not let Nagle hold them back
  h.set_default_headers({{"Access-Control-Allow-Origin", "*"}, {"Server", "toy/" TOY_VERSION}});
  h.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    if (s.config.api_key.empty() || req.method == "OPTIONS" || req.path == "/health")
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + s.config.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "Incorrect API key provided", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Everything httplib refuses by itself (unknown route, oversized or malformed request) gets
  // an OpenAI error body too; responses that already have one pass through untouched.
  h.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404 && known_path(req.path))
      send_error(res, ApiError(405, req.method + " is not allowed on " + req.path, "", "method_not_allowed"));
    else if (res.status == 404)
      send_error(res, ApiError(404, "Unknown route: " + req.method + " " + req.path, "", "unknown_url"));
    else if (res.status == 413)
      send_error(res,
                 ApiError(413, "The request body is larger than the limit (see --max-body)", "", "request_too_large"));
    else
      send_error(res,
                 ApiError(res.status, "The request could not be processed (HTTP " + std::to_string(res.status) + ")"));
    return httplib::Server::HandlerResponse::Handled;
  }));
  h.set_exception_handler([&s](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {}
    s.log("internal error on " + req.path + ": " + what);
    send_error(res, ApiError(500, "Internal server error: " + what, "", "internal_error"));
  });
  s.routes();
}

Server::~Server() { stop(); }

int Server::bind(const std::string& host, int port) {
  // A client that hangs up mid-answer makes the next write fail with EPIPE; without this the
  // default SIGPIPE action would end the whole process.
  std::signal(SIGPIPE, SIG_IGN);
  const int bound = port == 0 ? impl_->http.bind_to_any_port(host) : (impl_->http.bind_to_port(host, port) ? port : -1);
  if (bound <= 0)
    throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) +
                             " (in use, or not a local address?)");
  impl_->http.widen_backlog(512);
  return bound;
}

void Server::run() {
  if (!impl_->stopping) impl_->http.listen_after_bind();
}

void Server::stop() {
  if (!impl_ || impl_->stopping.exchange(true)) return;
  impl_->slots.close();
  impl_->http.halt();
}

const ServerConfig& Server::config() const { return impl_->config; }
const ChatPrompter& Server::chat() const { return impl_->prompter; }

}  // namespace toy::serve
