// X.509 work of the certificate controller (OpenSSL): a self-signed CA, serving certificates it
// signs, and what the controller needs to know about PEMs read back from a Secret. ECDSA P-256
// keys (as cert-manager's and Kyverno's defaults), random 128-bit serials, SHA-256 signatures.
// Times are Unix seconds. Failures come back as a Status, never as exceptions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/cert_rotation.h"
#include "lib/status.h"

namespace iw::certs {

struct Pem {
  std::string cert;  // one PEM certificate
  std::string key;   // its PKCS#8 PEM private key
};

// A CA certificate (basicConstraints CA:TRUE critical, keyUsage keyCertSign|cRLSign) valid
// from `notBefore` to `notAfter`, into `out`. Failure: IOError (OpenSSL could not make the key,
// the certificate or the PEM; the message names the step and OpenSSL's error); `out` is then
// unchanged.
Status GenerateCa(std::string_view commonName, int64_t notBefore, int64_t notAfter, Pem& out);

// A serving certificate signed by `ca`: CN = first DNS name, SANs = `dnsNames`, extKeyUsage
// serverAuth, CA:FALSE, into `out`. Failure: InvalidArgument when `dnsNames` is empty or `ca`'s
// certificate or key does not parse, IOError when OpenSSL fails; `out` is then unchanged.
Status IssueServing(const Pem& ca, const std::vector<std::string>& dnsNames, int64_t notBefore,
                    int64_t notAfter, Pem& out);

// A client certificate signed by `ca` (extKeyUsage clientAuth), CN = `commonName` (tests).
// Failure as IssueServing's.
Status IssueClient(const Pem& ca, std::string_view commonName, int64_t notBefore, int64_t notAfter,
                   Pem& out);

// `cert` parsed; with `key` non-empty, also that the key is the certificate's. Absent
// (present=false) when anything does not parse or match.
CertInfo Inspect(std::string_view cert, std::string_view key);

// Whether `cert` is signed by the CA certificate `caCert` (signature and issuer name).
bool SignedBy(std::string_view cert, std::string_view caCert);

// Whether `cert` carries every name of `dnsNames` as a DNS SAN.
bool HasDnsNames(std::string_view cert, const std::vector<std::string>& dnsNames);

// SHA-256 fingerprint (lower-case hex) of the first certificate in `cert` ("" if none).
std::string Fingerprint(std::string_view cert);

std::string Base64Encode(std::string_view data);
// false on malformed input.
bool Base64Decode(std::string_view text, std::string& out);

}  // namespace iw::certs
