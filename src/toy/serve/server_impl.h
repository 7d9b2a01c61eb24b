// serve/server_impl.h — the server's state, shared by server.cpp (routes, errors, lifecycle) and
// handle_completion.cpp (the two completion endpoints). Internal to toy_serve.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>

#include "toy/serve/api_error.h"
#include "toy/serve/decode_loop.h"
#include "toy/serve/request.h"
#include "toy/serve/server.h"
#include "toy/serve/slots.h"

namespace toy::serve {

// httplib's Server with two additions that need its listening socket:
//  * widen_backlog: 0.11 listens with a backlog of 5, so a burst of clients connecting at once
//    would see SYN retries of a second or more;
//  * halt: stop() works only once the accept loop runs; halt() closes the socket whenever it is
//    called, so a signal that arrives while the server is starting still stops it.
class HttpServer : public httplib::Server {
 public:
  void widen_backlog(int n);
  void halt();
};

struct Server::Impl {
  Impl(const Model& m, std::shared_ptr<const Tokenizer> t, ChatPromptSource chat, ServerConfig c);

  const Model& model;
  std::shared_ptr<const Tokenizer> tokenizer;
  ChatPrompter prompter;
  ServerConfig config;
  SlotPool slots;
  DecodeLoop decoder;  // after slots: its Runs hold leases
  HttpServer http;
  std::atomic<bool> stopping{false};

  void routes();
  void handle_completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  void log(const std::string& line) const;  // one line on stderr unless --quiet
};

// The body of an API error, as JSON text with the right status.
void send_error(httplib::Response& res, const ApiError& e);
void send_json(httplib::Response& res, const nlohmann::ordered_json& j, int status = 200);

// The socket a request came on, or -1. httplib 0.11 does not give it to handlers, so it is found
// among the process's sockets by the request's addresses (unique while the request is handled).
int client_socket(const httplib::Request& req);
// Whether the client on `fd` is still connected: nothing to read, or data (a pipelined request),
// but not end-of-file or an error. Always true for fd -1.
bool client_alive(int fd);

// The request body as a JSON value; 400 when it is not JSON.
nlohmann::ordered_json parse_body(const httplib::Request& req);

}  // namespace toy::serve
