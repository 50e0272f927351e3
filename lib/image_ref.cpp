#include "lib/image_ref.h"

#include <optional>

namespace iw::image_ref {

namespace {

constexpr std::string_view kDefaultDomain = "docker.io";
constexpr std::string_view kLegacyDefaultDomain = "index.docker.io";
constexpr std::string_view kOfficialRepoPrefix = "library/";
constexpr std::string_view kDefaultTag = "latest";
constexpr std::size_t kNameTotalLengthMax = 255;
constexpr std::size_t kTagLengthMax = 128;

bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool IsAlnum(char c) {
  return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z');
}
bool IsWord(char c) {
  return IsAlnum(c) || c == '_';
}
bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}
bool IsLowerHex(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f');
}
bool IsHex(char c) {
  return IsLowerHex(c) || (c >= 'A' && c <= 'F');
}

template <typename Pred>
bool All(std::string_view s, Pred pred) {
  for (char c : s) {
    if (!pred(c)) return false;
  }
  return true;
}

// Hex digits of a digest for `algorithm`, or 0 when the algorithm is not one go-digest knows.
std::size_t DigestHexLength(std::string_view algorithm) {
  if (algorithm == "sha256") return 64;
  if (algorithm == "sha384") return 96;
  if (algorithm == "sha512") return 128;
  return 0;
}

// `algorithm:hex` with a known algorithm and lowercase hex of exactly the right length.
bool ValidDigest(std::string_view digest) {
  auto colon = digest.find(':');
  if (colon == std::string_view::npos) return false;
  std::size_t want = DigestHexLength(digest.substr(0, colon));
  std::string_view hex = digest.substr(colon + 1);
  return want != 0 && hex.size() == want && All(hex, IsLowerHex);
}

// tag := [\w][\w.-]{0,127}
bool ValidTag(std::string_view tag) {
  if (tag.empty() || tag.size() > kTagLengthMax || !IsWord(tag.front())) return false;
  return All(tag, [](char c) { return IsWord(c) || c == '.' || c == '-'; });
}

// path-component := [a-z0-9]+ (separator [a-z0-9]+)*, separator := [_.] | "__" | "-"+
bool ValidPathComponent(std::string_view c) {
  if (c.empty() || !IsLowerAlnum(c.front()) || !IsLowerAlnum(c.back())) return false;
  for (std::size_t i = 0; i < c.size();) {
    if (IsLowerAlnum(c[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < c.size() && !IsLowerAlnum(c[j])) ++j;
    std::string_view sep = c.substr(i, j - i);
    bool ok = sep == "." || sep == "_" || sep == "__" || All(sep, [](char x) { return x == '-'; });
    if (!ok) return false;
    i = j;
  }
  return true;
}

bool ValidPath(std::string_view path) {
  while (true) {
    auto slash = path.find('/');
    if (!ValidPathComponent(path.substr(0, slash))) return false;
    if (slash == std::string_view::npos) return true;
    path.remove_prefix(slash + 1);
  }
}

// domain-component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
bool ValidDomainComponent(std::string_view c) {
  if (c.empty() || !IsAlnum(c.front()) || !IsAlnum(c.back())) return false;
  return All(c, [](char x) { return IsAlnum(x) || x == '-'; });
}

// domain := (domain-name | "[" ipv6 "]") (":" port)?
bool ValidDomain(std::string_view domain) {
  std::string_view host = domain;
  if (!domain.empty() && domain.front() == '[') {
    auto close = domain.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    if (!All(domain.substr(1, close - 1), [](char c) { return IsHex(c) || c == ':'; }))
      return false;
    domain.remove_prefix(close + 1);
    if (domain.empty()) return true;
    if (domain.front() != ':') return false;
  } else {
    auto colon = domain.find(':');
    host = domain.substr(0, colon);
    domain = colon == std::string_view::npos ? std::string_view{} : domain.substr(colon);
    while (true) {
      auto dot = host.find('.');
      if (!ValidDomainComponent(host.substr(0, dot))) return false;
      if (dot == std::string_view::npos) break;
      host.remove_prefix(dot + 1);
    }
    if (domain.empty()) return true;
  }
  std::string_view port = domain.substr(1);  // after ':'
  return !port.empty() && All(port, IsDigit);
}

struct Reference {
  std::string name;  // domain "/" path, normalised
  std::string_view tag;
  std::string_view digest;
};

std::optional<Reference> Parse(std::string_view ref) {
  if (ref.size() == 64 && All(ref, IsLowerHex)) return std::nullopt;  // an image ID, not a name
  Reference out;
  std::string_view name = ref;
  if (auto at = ref.find('@'); at != std::string_view::npos) {
    out.digest = ref.substr(at + 1);
    name = ref.substr(0, at);
    if (!ValidDigest(out.digest)) return std::nullopt;
  }
  auto colon = name.rfind(':');
  auto slash = name.rfind('/');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    out.tag = name.substr(colon + 1);
    name = name.substr(0, colon);
    if (!ValidTag(out.tag)) return std::nullopt;
  }

  std::string_view domain = kDefaultDomain;
  std::string_view path = name;
  if (auto first = name.find('/'); first != std::string_view::npos) {
    std::string_view head = name.substr(0, first);
    bool isDomain = head == "localhost" || head == kLegacyDefaultDomain ||
                    head.find_first_of(".:") != std::string_view::npos ||
                    !All(head, [](char c) { return c < 'A' || c > 'Z'; });
    if (isDomain) {
      domain = head == kLegacyDefaultDomain ? kDefaultDomain : head;
      path = name.substr(first + 1);
    }
  }
  if (!ValidDomain(domain) || !ValidPath(path)) return std::nullopt;
  out.name.reserve(domain.size() + 1 + kOfficialRepoPrefix.size() + path.size());
  out.name.append(domain).append("/");
  if (domain == kDefaultDomain && path.find('/') == std::string_view::npos) {
    out.name.append(kOfficialRepoPrefix);
  }
  out.name.append(path);
  if (out.name.size() > kNameTotalLengthMax) return std::nullopt;
  return out;
}

}  // namespace

std::string NormalizeImage(std::string_view ref) {
  auto parsed = Parse(ref);
  if (!parsed) return {};
  std::string out = std::move(parsed->name);
  if (!parsed->tag.empty()) {
    out.append(":").append(parsed->tag);
  } else if (parsed->digest.empty()) {
    out.append(":").append(kDefaultTag);
  }
  if (!parsed->digest.empty()) out.append("@").append(parsed->digest);
  return out;
}

bool SameImage(std::string_view a, std::string_view b) {
  if (a == b) return true;
  auto pa = Parse(a);
  auto pb = Parse(b);
  if (!pa || !pb || pa->name != pb->name) return false;
  if (!pa->digest.empty() && !pb->digest.empty()) return pa->digest == pb->digest;
  if (!pa->digest.empty() || !pb->digest.empty()) return false;
  auto tagOf = [](const Reference& r) { return r.tag.empty() ? kDefaultTag : r.tag; };
  return tagOf(*pa) == tagOf(*pb);
}

std::string_view DigestOf(std::string_view imageID) {
  if (auto scheme = imageID.find("://"); scheme != std::string_view::npos) {
    imageID.remove_prefix(scheme + 3);
  }
  if (auto at = imageID.rfind('@'); at != std::string_view::npos) imageID.remove_prefix(at + 1);
  auto colon = imageID.find(':');
  if (colon == std::string_view::npos || DigestHexLength(imageID.substr(0, colon)) == 0) return {};
  std::string_view hex = imageID.substr(colon + 1);
  if (hex.empty() || !All(hex, IsLowerHex)) return {};
  return imageID;
}

}  // namespace iw::image_ref
