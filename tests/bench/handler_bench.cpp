// Times the in-process part of one admission request (decode, handler, diff, encode) without
// TLS or HTTP, to split the server's CPU per request between our code and the transport.
//   handler_bench ROUTE REVIEW_FILE [ITERATIONS]
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "hooks/admission.h"
#include "server/http/review_codec.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: handler_bench ROUTE REVIEW_FILE [ITERATIONS]\n";
    return 2;
  }
  const iw::admission::Route* route = iw::admission::FindRoute(argv[1]);
  if (route == nullptr) return 2;
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string body = ss.str();
  int n = argc > 3 ? std::stoi(argv[3]) : 2000;
  iw::admission::Context ctx;
  size_t bytes = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i)
    bytes += iw::review::Answer(*route, body, "application/json", ctx).body.size();
  double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      n;
  std::cout << "{\"route\":\"" << argv[1] << "\",\"bytes_in\":" << body.size()
            << ",\"us_per_review\":" << us << ",\"bytes_out\":" << bytes / n << "}\n";
  return 0;
}
