#include "serving/http_common.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <fmt/format.h>
#include <stdexcept>

#include "core/base/error.hpp"
#include "serving/api.hpp"

namespace aisp::serving {

const std::map<std::string, std::string> &openai_routes() {
  static const std::map<std::string, std::string> r = {
      {"/v1/completions", "POST"}, {"/v1/models", "GET"}, {"/health", "GET"}, {"/metrics", "GET"}};
  return r;
}

void reply_error(httplib::Response &res, int status, const std::string &message, const std::string &type,
                 const std::string &code) {
  res.status = status;
  res.set_content(error_json(message, type, "", code), "application/json");
}

void install_error_handlers(httplib::Server &server) {
  server.set_pre_routing_handler([](const httplib::Request &req, httplib::Response &res) {
    const auto it = openai_routes().find(req.path);
    if (it == openai_routes().end() || req.method == it->second ||
        (req.method == "HEAD" && it->second == "GET"))
      return httplib::Server::HandlerResponse::Unhandled;
    res.status = 405;
    res.set_header("Allow", it->second);
    res.set_content(error_json(fmt::format("method {} is not allowed on {}; use {}", req.method,
                                           req.path, it->second),
                               "invalid_request_error", "", "method_not_allowed"),
                    "application/json");
    return httplib::Server::HandlerResponse::Handled;
  });
  // Runs for every status >= 400, including the handlers' own (and a router's relayed ones): only fill
  // in bodies left empty.
  server.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request &req, httplib::Response &res) {
        if (!res.body.empty())
          return httplib::Server::HandlerResponse::Unhandled;
        const std::string message = res.status == 404
                                        ? fmt::format("no route for {} {}", req.method, req.path)
                                        : fmt::format("HTTP {}", res.status);
        res.set_content(
            error_json(message, "invalid_request_error", "", res.status == 404 ? "not_found" : ""),
            "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  server.set_exception_handler(
      [](const httplib::Request &, httplib::Response &res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception &e) {
          what = e.what();
        } catch (...) {
        }
        reply_error(res, 500, "internal error: " + what, "server_error");
      });
}

int Listener::listen_in_background(const std::string &host, int port, int backlog, std::thread &thread) {
  set_socket_options([](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  const int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  if (bound < 0)
    throw UsageError(fmt::format("cannot listen on {}:{} ({})", host, port, std::strerror(errno)));
  ::listen(svr_sock_, backlog);
  thread = std::thread([this] { listen_after_bind(); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!is_running()) {
    if (std::chrono::steady_clock::now() > deadline) {
      thread.join(); // not running after 10 s: the loop has already ended
      throw std::runtime_error("the HTTP accept loop did not start");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return bound;
}

} // namespace aisp::serving
