// Container image references, normalised the way Docker and containerd do it
// (github.com/distribution/reference, ParseNormalizedNamed + TagNameOnly), so that the loop can
// tell whether a restarted container runs the image the spec asks for. Never decide that from
// the imageID alone: a retag keeps the digest (Kruise hangs on that, see DESIGN.md).
#pragma once

#include <string>
#include <string_view>

namespace iw::image_ref {

// Returns the fully qualified form `domain/path[:tag][@digest]` of the reference `ref`:
//   - no domain, or a first component that is not a domain (no '.' or ':', not "localhost", all
//     lowercase) → "docker.io"; "index.docker.io" → "docker.io";
//   - on docker.io, a one-component path gets "library/" ("nginx" → "docker.io/library/nginx");
//   - no tag and no digest → ":latest"; a digest never gets a default tag; tag + digest keep both.
// A ':' before the last '/' is a registry port, not a tag ("registry:5000/app" has no tag).
// Returns "" when `ref` is not a valid reference (grammar of distribution/reference: lowercase
// path components, tag `[\w][\w.-]{0,127}`, digest sha256/sha384/sha512 with lowercase hex of the
// right length, name at most 255 bytes, not a bare 64-hex image ID).
std::string NormalizeImage(std::string_view ref);

// True when `a` and `b` name the same image: byte-equal, or both valid and equal once normalised.
// When both carry a digest, the digest decides and the tags are ignored
// ("nginx:1.25@sha256:X" is "docker.io/library/nginx@sha256:X").
bool SameImage(std::string_view a, std::string_view b);

// The "<algorithm>:<hex>" digest inside a container status imageID, a view into `imageID`:
// "docker-pullable://nginx@sha256:abc" → "sha256:abc", "sha256:abc" → "sha256:abc",
// "docker://sha256:abc" → "sha256:abc". The algorithm is sha256, sha384 or sha512 and the hex part
// is non-empty lowercase hex. Returns "" when there is none ("nginx:latest", "").
std::string_view DigestOf(std::string_view imageID);

}  // namespace iw::image_ref
