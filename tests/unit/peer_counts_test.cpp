#include "server/http/peer_counts.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using iw::http::PeerCounts;

TEST_CASE("peer counts: the address without its port is the peer") {
  struct Row {
    const char* address;
    const char* host;
  };
  for (const Row& r : std::vector<Row>{{"10.0.0.1:443", "10.0.0.1"},
                                       {"[fd00::1]:8443", "fd00::1"},
                                       {"[::1]:1", "::1"},
                                       {"unknown", "unknown"},
                                       {"[broken", "[broken"}}) {
    CAPTURE(r.address);
    CHECK(PeerCounts::Host(r.address) == r.host);
  }
}

TEST_CASE("peer counts: a hold counts one connection of its peer until released") {
  PeerCounts peers;
  PeerCounts::Hold a1 = peers.Join("10.0.0.1:1000");
  PeerCounts::Hold a2 = peers.Join("10.0.0.1:1001");
  PeerCounts::Hold b = peers.Join("10.0.0.2:1000");
  CHECK(a1.Count() == 2);
  CHECK(a2.Count() == 2);
  CHECK(b.Count() == 1);
  {
    PeerCounts::Hold moved = std::move(a2);
    CHECK(a2.Count() == 0);  // NOLINT(bugprone-use-after-move): an empty hold counts nothing
    CHECK(moved.Count() == 2);
  }
  CHECK(a1.Count() == 1);
  a1 = peers.Join("10.0.0.2:2000");  // the old hold is released by the assignment
  CHECK(b.Count() == 2);
  CHECK(peers.Peers() == 2);
}

TEST_CASE("peer counts: peers without connections leave the table as it grows") {
  PeerCounts peers;
  PeerCounts::Hold kept = peers.Join("192.168.0.1:1");
  for (int i = 0; i < 1000; ++i) {
    PeerCounts::Hold gone =
        peers.Join("10.1." + std::to_string(i / 256) + "." + std::to_string(i % 256) + ":80");
  }
  CHECK(peers.Peers() <= 64);
  CHECK(kept.Count() == 1);
  CHECK(peers.Join("192.168.0.1:2").Count() == 2);
}
