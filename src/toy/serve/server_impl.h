// serve/server_impl.h — the server's state, shared by server.cpp (routes, errors, lifecycle) and
// handle_completion.cpp (the two completion endpoints). Internal to toy_serve.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "toy/serve/adapters.h"
#include "toy/serve/api_error.h"
#include "toy/serve/decode_loop.h"
#include "toy/serve/metrics.h"
#include "toy/serve/request.h"
#include "toy/serve/server.h"
#include "toy/serve/slots.h"

namespace toy::serve {

// httplib's Server, with the parts of 0.11 that a public server cannot keep replaced:
//  * connections: httplib reads a request with a timeout per read, so a client sending a byte a
//    second holds a thread for as long as it likes, and ~50 of them starve every route. Here
//    each connection is served by process_and_close_socket() below: a client address may hold
//    at most `max_connections_per_address` connections at once (more get 429 and are closed
//    lingering: what they still send is read and dropped for up to a second, a few at once),
//    and a request (its line, headers and body) must arrive whole within `request_timeout`
//    of its first byte (else the connection is closed; a body cut short gets 408); an idle
//    keep-alive connection is closed after httplib's keep-alive timeout (5 s); at most
//    `max_connections_sending_headers` connections, from all addresses, wait for a request's
//    headers at once: a new one closes the one that has waited longest;
//  * widen_backlog: 0.11 listens with a backlog of 5, so a burst of clients connecting at once
//    would see SYN retries of a second or more;
//  * halt: stop() works only once the accept loop runs; halt() closes the socket whenever it is
//    called, so a signal that arrives while the server is starting still stops it.
class HttpServer : public httplib::Server {
 public:
  struct Limits {
    std::chrono::seconds request_timeout{30};  // line + headers + body, from the request's first byte
    std::chrono::seconds write_timeout{30};    // one write may stall this long
    int max_connections_per_address = 16;
    // Connections waiting for a request's headers (idle keep-alive ones too), all addresses
    // together; one more closes the one that has waited longest. Below the thread count, so
    // that slow clients from many addresses cannot hold every thread.
    int max_connections_sending_headers = 32;
  };
  void set_limits(const Limits& limits) { limits_ = limits; }
  // Told of each connection refused before a request was read (429 over the per-address limit),
  // so that the request log and the metrics see those too.
  void on_refused(std::function<void(int status, const std::string& address)> fn) { on_refused_ = std::move(fn); }
  void widen_backlog(int n);
  void halt();

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool admit(const std::string& address);  // counts a connection of `address`; false: at the limit
  void leave(const std::string& address);
  // A connection waits for a request's headers from wait_for_headers() until headers_received();
  // over the limit, the longest-waiting one is closed (its reads see end-of-file).
  void wait_for_headers(uint64_t id, int fd);
  void headers_received(uint64_t id);
  friend void headers_received();

  static constexpr int kMaxLingeringRefusals = 8;  // refused connections drained for a second at once

  Limits limits_;
  std::function<void(int, const std::string&)> on_refused_;
  std::atomic<int> lingering_refusals_{0};
  std::mutex mu_;
  std::map<std::string, int> connections_;  // open connections per client address
  uint64_t next_connection_ = 0;
  std::map<uint64_t, int> waiting_for_headers_;  // connection number (in arrival order) → socket
};

// Marks the connection of the request being handled to be closed after its response (a body
// that was not read to its end cannot be followed by another request).
void close_connection_after_response();
// Marks the connection of the request being handled as past its headers (see HttpServer).
void headers_received();
// A POST route's handler: the request and its body, read whatever the content type says (it is
// JSON by contract) and at most --max-body bytes.
using BodyHandler = std::function<void(const httplib::Request&, const std::string& body, httplib::Response&)>;

struct Server::Impl {
  Impl(const Model& m, std::shared_ptr<const Tokenizer> t, ChatPromptSource chat, ServerConfig c, AdapterSetup a);

  const Model& model;
  AdapterModels adapters;
  std::shared_ptr<const Tokenizer> tokenizer;
  TokenTrie trie;  // the token texts, for constrained decoding
  ChatPrompter prompter;
  ToolFormat tool_format;  // how the chat template writes tool calls
  ServerConfig config;
  SlotPool slots;
  std::vector<std::unique_ptr<Drafter>> drafters;  // one per slot when speculating, else none
  DecodeLoop decoder;                              // after slots: its Runs hold leases
  HttpServer http;
  Metrics metrics;
  std::atomic<bool> stopping{false};

  void routes();
  void monitoring_routes();  // /metrics, /props, /slots (monitoring.cpp)
  void adapter_routes();     // GET, POST /lora-adapters
  // Whether `id` names the served model in a URL (/v1/models/{id}): the --name alias, or the
  // model file's name with or without .gguf.
  bool model_id(const std::string& id) const;
  void handle_completion(const httplib::Request& req, const std::string& body, httplib::Response& res,
                         Endpoint endpoint);
  void handle_embeddings(const httplib::Request& req, const std::string& body, httplib::Response& res);
  // The answer when no slot can be had: the queue is full (503 busy), or the server is stopping.
  ApiError no_slot() const;
  // Logs the request fields the route did not read (parse_request's ignored_fields), if any.
  void warn_ignored_fields(const std::string& path, const std::vector<std::string>& fields) const;
  // Reads the body (413 beyond --max-body in any transfer encoding, 408 when it does not arrive
  // in time, 415 for multipart forms), then calls `fn`; an ApiError from either is the response.
  httplib::Server::HandlerWithContentReader with_body(BodyHandler fn);
  void log(const std::string& line) const;  // one line on stderr unless --quiet
};

// The body of an API error, as JSON text with the right status.
void send_error(httplib::Response& res, const ApiError& e);
void send_json(httplib::Response& res, const nlohmann::ordered_json& j, int status = 200);

// The socket of the request being handled on this thread, or -1.
int client_socket();
// Whether the client on `fd` is still connected: nothing to read, or data (a pipelined request),
// but not end-of-file or an error. Always true for fd -1.
bool client_alive(int fd);

}  // namespace toy::serve
