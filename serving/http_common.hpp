// What `aisp serve` (http_server.cpp) and `aisp route` (router.cpp) share on the serving side of HTTP:
// the OpenAI-compatible paths, JSON error bodies for every failure, and a listening socket fit for load
// tests. One copy, so that the router answers exactly like the server it fronts.
#pragma once

#include <httplib.h>

#include <map>
#include <string>
#include <thread>

namespace aisp::serving {

// The paths both answer and the method each takes.
const std::map<std::string, std::string> &openai_routes();

// A JSON error body (api.hpp's error_json) with its status.
void reply_error(httplib::Response &res, int status, const std::string &message, const std::string &type,
                 const std::string &code = "");

// 405 (with Allow) for a known path and the wrong method, where cpp-httplib would say 404 as for an
// unknown one; a JSON body for every error status a handler left empty; 500 with the message of an
// exception a handler let through.
void install_error_handlers(httplib::Server &server);

class Listener : public httplib::Server {
public:
  // Binds host:port (0: any free port) with SO_REUSEADDR only (cpp-httplib's default adds
  // SO_REUSEPORT, with which a second server binds the same port without an error and silently takes
  // part of the connections), raises the listen backlog (cpp-httplib 0.11 listens with 5: a burst of
  // connections from a load test would overflow it and wait out a TCP retransmission, a second or
  // more of spurious TTFT; listening again on the bound socket is how Linux raises it), runs the
  // accept loop on `thread` and returns the port once the loop runs (cpp-httplib's stop() does
  // nothing before that: a stop() right after would be lost and the loop never end). Throws
  // aisp::UsageError when the address cannot be bound, std::runtime_error if the loop does not start.
  int listen_in_background(const std::string &host, int port, int backlog, std::thread &thread);
};

} // namespace aisp::serving
