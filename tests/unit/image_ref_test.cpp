#include <doctest/doctest.h>

#include <string>

#include "lib/image_ref.h"

using namespace iw;

namespace {

// sha256 of the empty string: a well-formed digest.
const std::string kHex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const std::string kDigest = "sha256:" + kHex;
const std::string kOtherDigest =
    "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

}  // namespace

TEST_CASE("NormalizeImage follows the Docker/containerd reference grammar") {
  struct Case {
    std::string in;
    std::string want;  // "" = not a valid reference
  };
  const std::string nginx = "docker.io/library/nginx:latest";
  const Case cases[] = {
      // One image, five spellings.
      {"nginx", nginx},
      {"nginx:latest", nginx},
      {"docker.io/library/nginx", nginx},
      {"docker.io/library/nginx:latest", nginx},
      {"index.docker.io/library/nginx:latest", nginx},
      {"docker.io/nginx", nginx},
      {"index.docker.io/nginx", nginx},
      {"nginx:1.27-alpine", "docker.io/library/nginx:1.27-alpine"},
      // Docker Hub user repositories.
      {"user/app", "docker.io/user/app:latest"},
      {"user/app:v2", "docker.io/user/app:v2"},
      {"docker.io/user/app", "docker.io/user/app:latest"},
      // Registries: '.', ':' or "localhost" in the first component; a ':' before '/' is a port.
      {"registry:5000/app", "registry:5000/app:latest"},
      {"registry:5000/app:v1", "registry:5000/app:v1"},
      {"registry:5000/team/app", "registry:5000/team/app:latest"},
      {"localhost/app", "localhost/app:latest"},
      {"localhost:5000/app:dev", "localhost:5000/app:dev"},
      {"127.0.0.1:5000/app", "127.0.0.1:5000/app:latest"},
      {"[::1]:5000/app", "[::1]:5000/app:latest"},
      {"ghcr.io/org/app:1.0", "ghcr.io/org/app:1.0"},
      {"quay.io/org/sub/app", "quay.io/org/sub/app:latest"},
      {"Registry/app", "Registry/app:latest"},  // an uppercase first component is a domain
      {"my-reg.example.com/a__b/c.d/e--f:v_1.0-RC", "my-reg.example.com/a__b/c.d/e--f:v_1.0-RC"},
      // Without a '/', "localhost:5000" is the image "localhost" with tag "5000".
      {"localhost:5000", "docker.io/library/localhost:5000"},
      // Digests: kept, and no default tag; tag + digest keep both.
      {"app@" + kDigest, "docker.io/library/app@" + kDigest},
      {"app:tag@" + kDigest, "docker.io/library/app:tag@" + kDigest},
      {"registry:5000/app@" + kDigest, "registry:5000/app@" + kDigest},
      {"docker.io/library/app:1@" + kDigest, "docker.io/library/app:1@" + kDigest},
      // Not references.
      {"", ""},
      {"Nginx", ""},
      {"user/App", ""},
      {"nginx:", ""},
      {"nginx:-bad", ""},
      {"nginx:" + std::string(129, 'a'), ""},
      {"nginx:1.0:2.0", ""},
      {"/app", ""},
      {"app/", ""},
      {"a//b", ""},
      {"a..b", ""},
      {"a___b", ""},
      {"a_-b", ""},
      {"registry:port/app", ""},
      {"-registry.io/app", ""},
      {"app@sha256:abc", ""},
      {"app@sha256:" + std::string(64, 'A'), ""},
      {"app@md5:" + kHex.substr(0, 32), ""},
      {"app@", ""},
      {kHex, ""},  // a bare image ID
      {"example.com/" + std::string(250, 'a'), ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    CHECK(image_ref::NormalizeImage(c.in) == c.want);
  }
  // Normalising is idempotent.
  for (const auto& c : cases) {
    if (c.want.empty()) continue;
    CAPTURE(c.want);
    CHECK(image_ref::NormalizeImage(c.want) == c.want);
  }
}

TEST_CASE("SameImage compares normalised references") {
  struct Case {
    std::string a;
    std::string b;
    bool same;
  };
  const Case cases[] = {
      {"nginx", "docker.io/library/nginx:latest", true},
      {"nginx:alpine", "docker.io/library/nginx:alpine", true},  // kruise#635
      {"index.docker.io/library/nginx", "nginx:latest", true},
      {"nginx", "nginx:1.27", false},
      {"nginx:1.27", "nginx:1.28", false},
      {"user/app", "docker.io/user/app:latest", true},
      {"user/app", "app", false},
      {"registry:5000/app", "registry:5000/app:latest", true},
      {"registry:5000/app", "registry:5000/app:5000", false},
      {"registry:5000/app", "docker.io/library/app", false},
      {"localhost/app", "app", false},
      {"ghcr.io/org/app", "docker.io/org/app", false},
      {"app@" + kDigest, "docker.io/library/app@" + kDigest, true},
      {"app:1@" + kDigest, "app@" + kDigest, true},  // the digest decides
      {"app:1@" + kDigest, "app:2@" + kDigest, true},
      {"app@" + kDigest, "app@" + kOtherDigest, false},
      {"app:1@" + kDigest, "app:1", false},
      {"app@" + kDigest, "other@" + kDigest, false},
      {"Not A Ref", "Not A Ref", true},  // byte-equal
      {"Nginx", "nginx", false},
      {"", "nginx", false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    CHECK(image_ref::SameImage(c.a, c.b) == c.same);
    CHECK(image_ref::SameImage(c.b, c.a) == c.same);
  }
}

TEST_CASE("DigestOf extracts the digest of a container status imageID") {
  struct Case {
    std::string imageID;
    std::string want;
  };
  const Case cases[] = {
      {"docker-pullable://nginx@sha256:abc", "sha256:abc"},
      {"sha256:abc", "sha256:abc"},
      {"docker://" + kDigest, kDigest},
      {"docker.io/library/nginx@" + kDigest, kDigest},
      {"docker-pullable://registry:5000/app@" + kDigest, kDigest},
      {"containerd://registry:5000/app@sha512:abc", "sha512:abc"},
      {"nginx:latest", ""},
      {"nginx:abc", ""},  // a tag, not a digest
      {"registry:5000/app", ""},
      {"sha256:", ""},
      {"sha256:XYZ", ""},
      {"md5:abc", ""},
      {"docker-pullable://nginx@", ""},
      {"", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.imageID);
    CHECK(image_ref::DigestOf(c.imageID) == c.want);
  }
}
