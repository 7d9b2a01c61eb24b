// serve/server.cpp — HTTP setup, the small routes, errors and the server's lifecycle.
#include "toy/serve/server.h"

#include <strings.h>
#include <sys/socket.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>

#include "toy/serve/openai_format.h"
#include "toy/serve/server_impl.h"

namespace toy::serve {

void send_json(httplib::Response& res, const json& j, int status) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.body(), e.status);
  if (e.status == 503) res.set_header("Retry-After", "1");
}

namespace {

bool known_path(const std::string& p) {
  for (const char* route : {"/health", "/v1/models", "/models", "/v1/completions", "/completions",
                            "/v1/chat/completions", "/chat/completions", "/v1/embeddings", "/embeddings", "/tokenize",
                            "/detokenize", "/metrics", "/props", "/slots"})
    if (p == route) return true;
  for (const char* prefix : {"/v1/models/", "/models/"})  // a model id must follow
    if (p.size() > std::strlen(prefix) && p.rfind(prefix, 0) == 0) return true;
  return false;
}

// The answer to a request on a route that does not take its method (or a method nobody takes).
ApiError no_route(const httplib::Request& req) {
  if (known_path(req.path))
    return ApiError(405, req.method + " is not allowed on " + req.path, "", "method_not_allowed");
  return ApiError(404, "Unknown route: " + req.method + " " + req.path, "", "unknown_url");
}

// Whether an Authorization header carries `key` as a bearer token. The scheme is matched without
// regard to case (RFC 7235), the token in time that does not depend on where it differs.
bool authorized(const std::string& header, const std::string& key) {
  const size_t space = header.find(' ');
  if (space == std::string::npos || space != 6 || strncasecmp(header.c_str(), "bearer", 6) != 0) return false;
  const size_t start = header.find_first_not_of(' ', space);
  if (start == std::string::npos) return false;
  const std::string_view token(header.data() + start, header.size() - start);
  unsigned char diff = token.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < key.size(); ++i) diff |= (uint8_t(key[i]) ^ uint8_t(i < token.size() ? token[i] : 0));
  return diff == 0;
}

// A client's text for the log, on one line: control bytes become '?', and at most 200 bytes.
std::string printable(std::string text) {
  if (text.size() > 200) text = text.substr(0, 197) + "...";
  for (char& c : text)
    if (uint8_t(c) < 0x20 || c == 0x7f) c = '?';
  return text;
}

ApiError too_large_error(size_t max_body_bytes) {
  return ApiError(
      413, "The request body is larger than the limit of " + std::to_string(max_body_bytes) + " bytes (see --max-body)",
      "", "request_too_large");
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

httplib::Server::HandlerWithContentReader Server::Impl::with_body(BodyHandler fn) {
  return [this, fn = std::move(fn)](const httplib::Request& req, httplib::Response& res,
                                    const httplib::ContentReader& read) {
    try {
      // Multipart bodies would go to httplib's form parser (and to callbacks that are not set).
      if (req.is_multipart_form_data()) {
        close_connection_after_response();
        throw ApiError(415, "multipart form bodies are not accepted; send the JSON request as the body", "",
                       "unsupported_media_type");
      }
      // A Content-Length that is not a count, or over the limit, is answered now (httplib would
      // first wait for that many bytes, or for a negative one read as 2^64 - 1, until --timeout).
      if (req.has_header("Content-Length")) {
        const std::string length = req.get_header_value("Content-Length");
        if (length.empty() || length.find_first_not_of("0123456789") != std::string::npos) {
          close_connection_after_response();
          throw ApiError(400, "The Content-Length header is not a number of bytes", "", "invalid_content_length");
        }
        if (length.size() > 19 || std::stoull(length) > config.max_body_bytes) {  // 19 digits fit in 64 bits
          close_connection_after_response();
          throw too_large_error(config.max_body_bytes);
        }
      }
      // Whatever the content type says (curl -d sends application/x-www-form-urlencoded, which
      // httplib would cap at 8 KiB), the body is read as bytes and parsed as JSON. The limit holds
      // for every transfer encoding: httplib checks only a Content-Length, not chunked bodies.
      std::string body;
      bool too_large = false;
      const bool complete = read([&](const char* data, size_t n) {
        if (body.size() + n > config.max_body_bytes) return !(too_large = true);
        body.append(data, n);
        return true;
      });
      if (too_large || res.status == 413) {
        close_connection_after_response();
        throw too_large_error(config.max_body_bytes);
      }
      if (!complete) {
        close_connection_after_response();
        throw ApiError(408,
                       "The request body did not arrive whole within " + std::to_string(config.timeout_s) +
                           " s (see --timeout), or was malformed",
                       "", "request_timeout");
      }
      fn(req, body, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  };
}

Server::Impl::Impl(const Model& m, std::shared_ptr<const Tokenizer> t, ChatPromptSource chat, ServerConfig c,
                   AdapterSetup a)
    : model(m),
      adapters(m, std::move(a)),
      tokenizer(std::move(t)),
      trie(*tokenizer),
      prompter(std::move(chat)),
      tool_format(serve::tool_format(prompter.source().template_source)),
      config(std::move(c)),
      slots(m, config.parallel, config.n_ctx, config.kv_type, config.queue) {
  const bool speculating = config.draft_model || config.ngram_n > 0;
  for (int i = 0; speculating && i < config.parallel; ++i)
    if (config.draft_model)
      drafters.push_back(std::make_unique<ModelDrafter>(*config.draft_model, m, config.n_ctx, config.kv_type));
    else
      drafters.push_back(std::make_unique<NgramDrafter>(config.ngram_n, config.ngram_m));
}

void Server::Impl::log(const std::string& line) const {
  if (config.log_requests) std::fprintf(stderr, "toy serve: %s\n", line.c_str());
}

void Server::Impl::warn_ignored_fields(const std::string& path, const std::vector<std::string>& fields) const {
  if (fields.empty()) return;
  std::string names;
  for (const std::string& f : fields) names += (names.empty() ? "" : ", ") + f;
  log(path + ": warning: ignored unknown request fields: " + names);
}

ApiError Server::Impl::no_slot() const {
  if (stopping) return ApiError(503, "The server is shutting down", "", "shutting_down");
  return ApiError(503,
                  "The server is busy: all " + std::to_string(config.parallel) + " slots are in use and " +
                      std::to_string(config.queue) + " requests are waiting; retry later",
                  "", "server_busy");
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
             if (!model_id(req.matches[1]))
               throw ApiError(404, "The model '" + std::string(req.matches[1]) + "' does not exist", "model",
                              "model_not_found");
             send_json(res, model_object());
           }));
  for (Endpoint e : {Endpoint::Completions, Endpoint::Chat}) {
    auto h = with_body([this, e](const httplib::Request& req, const std::string& body, httplib::Response& res) {
      handle_completion(req, body, res, e);
    });
    const std::string path = e == Endpoint::Chat ? "/chat/completions" : "/completions";
    http.Post("/v1" + path, h);
    http.Post(path, h);
  }
  const auto embeddings = with_body([this](const httplib::Request& req, const std::string& body,
                                           httplib::Response& res) { handle_embeddings(req, body, res); });
  http.Post("/v1/embeddings", embeddings);
  http.Post("/embeddings", embeddings);
  monitoring_routes();
  adapter_routes();
  http.Post("/tokenize", with_body([this](const httplib::Request&, const std::string& body, httplib::Response& res) {
              const TokenizeRequest r = parse_tokenize(parse_json_body(body));
              const auto ids = tokenizer->encode(r.content, r.add_special, /*parse_special=*/true);
              json tokens = json::array();
              for (int32_t id : ids)
                tokens.push_back(r.with_pieces ? json{{"id", id}, {"piece", tokenizer->piece(id, true)}} : json(id));
              send_json(res, {{"tokens", tokens}});
            }));
  http.Post("/detokenize", with_body([this](const httplib::Request&, const std::string& body, httplib::Response& res) {
              const std::vector<int32_t> ids = parse_detokenize(parse_json_body(body), tokenizer->n_vocab());
              send_json(res, {{"content", tokenizer->decode(ids)}});
            }));
  // Every other request with a body: answered without reading it (httplib would read it whole,
  // chunked bodies without limit), and the connection closed after.
  const auto refuse_body = [](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader&) {
    close_connection_after_response();
    send_error(res, no_route(req));
  };
  http.Post(".*", refuse_body);
  http.Put(".*", refuse_body);
  http.Patch(".*", refuse_body);
  http.Delete(".*", refuse_body);
  // CORS preflight, so browser front-ends can call the API.
  http.Options(".*", [](const httplib::Request&, httplib::Response& res) {
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
    res.set_header("Access-Control-Max-Age", "86400");
  });
}

void Server::Impl::adapter_routes() {
  http.Get("/lora-adapters", [this](const httplib::Request&, httplib::Response& res) {
    json list = json::array();
    for (const AdapterModels::Listed& a : adapters.list())
      list.push_back({{"id", a.id}, {"path", a.path}, {"scale", a.scale}});
    send_json(res, list);
  });
  http.Post("/lora-adapters",
            with_body([this](const httplib::Request&, const std::string& body, httplib::Response& res) {
              adapters.set_global_scales(parse_lora_scales(parse_json_body(body), "lora-adapters", adapters.size()));
              send_json(res, {{"success", true}});
            }));
}

Server::Server(const Model& model, std::shared_ptr<const Tokenizer> tokenizer, ChatPromptSource chat,
               ServerConfig config, AdapterSetup adapters) {
  if (!tokenizer) throw std::invalid_argument("toy serve needs a model file with a tokenizer");
  if (config.parallel < 1) throw std::invalid_argument("--parallel must be at least 1");
  if (config.queue < 0) throw std::invalid_argument("--queue must be at least 0");
  if (config.n_ctx <= 0) config.n_ctx = std::min<int64_t>(model.config().n_ctx, 4096);
  impl_ = std::make_unique<Impl>(model, std::move(tokenizer), std::move(chat), std::move(config), std::move(adapters));
  Impl& s = *impl_;
  HttpServer& h = s.http;
  // Threads: every running or waiting request holds one, plus room for idle keep-alive
  // connections and the cheap routes, so /health still answers when the queue is full; a slow or
  // hostile client address holds at most max_connections_per_address of them.
  const size_t threads = size_t(s.config.parallel + s.config.queue + 64);
  h.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  h.set_limits({.request_timeout = std::chrono::seconds(s.config.timeout_s),
                .write_timeout = std::chrono::seconds(s.config.timeout_s),
                .max_connections_per_address = s.config.max_connections_per_address});
  h.set_payload_max_length(s.config.max_body_bytes);
  h.set_read_timeout(s.config.timeout_s, 0);
  h.set_write_timeout(s.config.timeout_s, 0);
  h.set_keep_alive_max_count(1000);
  h.set_tcp_nodelay(true);  // stream chunks are small; do not let Nagle hold them back
  // httplib's default options add SO_REUSEPORT, with which a second server binds the same port
  // and the kernel deals connections between the two (an --api-key server and a keyless one
  // would answer alternately). SO_REUSEADDR alone only lets a restart bind past TIME_WAIT;
  // binding a port another socket listens on fails with EADDRINUSE.
  h.set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  h.set_default_headers({{"Access-Control-Allow-Origin", "*"}, {"Server", "toy/" TOY_VERSION}});
  h.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    headers_received();  // the connection no longer counts against max_connections_sending_headers
    if (s.config.api_key.empty() || req.method == "OPTIONS" || req.path == "/health")
      return httplib::Server::HandlerResponse::Unhandled;
    // The header's whole value: get_header_value() ends it at its first NUL byte.
    const auto header = req.headers.find("Authorization");
    if (header != req.headers.end() && authorized(header->second, s.config.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "Incorrect API key provided", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Everything httplib refuses by itself (unknown route, oversized or malformed request) gets
  // an OpenAI error body too; responses that already have one pass through untouched.
  h.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    static const std::set<std::string> methods = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
    if (res.status == 404)
      send_error(res, no_route(req));
    else if (res.status == 400 && !methods.count(req.method) && !req.target.empty() &&
             req.version.starts_with("HTTP/1."))
      // A request line of three words, but a method httplib does not take: it stops there.
      send_error(res, ApiError(405, req.method + " is not a method this server takes (GET, POST, OPTIONS)", "",
                               "method_not_allowed"));
    else if (res.status == 413)
      send_error(res, ApiError(413, "The request is larger than the limit (see --max-body)", "", "request_too_large"));
    else if (res.status == 414 || res.status == 431)
      send_error(res, ApiError(res.status, "The request line or headers are too long", "", "request_too_large"));
    else
      send_error(res, ApiError(res.status < 500 ? res.status : 400,
                               "The request is not valid HTTP (" + std::to_string(res.status) + ")", "",
                               "invalid_http_request"));
    // A request httplib could not parse leaves the connection at an unknown place: the rest of its
    // bytes are no next request.
    if (res.status == 400 || res.status == 405) {
      close_connection_after_response();
      res.set_header("Connection", "close");
    }
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
  // The request log: one line per request answered, whatever answered it (a route, the API-key
  // check, the error handler), and the metrics' count by status. httplib calls this just before
  // it writes the response (its logger runs after, when the client may have gone on already).
  h.set_post_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    s.metrics.count_request(res.status);
    s.log(printable(req.method + " " + req.path) + " " + std::to_string(res.status) + " (" + req.remote_addr + ")");
  });
  h.on_refused([&s](int status, const std::string& address) {
    s.metrics.count_request(status);
    s.log("connection refused " + std::to_string(status) + " (" + address + "): too many connections from it");
  });
  s.routes();
}

Server::~Server() { stop(); }

int Server::bind(const std::string& host, int port) {
  // A client that hangs up mid-answer makes the next write fail with EPIPE; without this the
  // default SIGPIPE action would end the whole process.
  std::signal(SIGPIPE, SIG_IGN);
  errno = 0;
  const int bound = port == 0 ? impl_->http.bind_to_any_port(host) : (impl_->http.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    const int err = errno;  // from the failed bind(): httplib only closes the socket after it
    throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                             (err == EADDRINUSE ? "the port is already in use (by another server?)"
                              : err != 0        ? std::string(std::strerror(err))
                                                : std::string("not a local address?")));
  }
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
