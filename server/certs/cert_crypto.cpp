#include "server/certs/cert_crypto.h"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <memory>

namespace iw::certs {

namespace {

struct Free {
  void operator()(X509* x) const { X509_free(x); }
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  void operator()(BIO* b) const { BIO_free(b); }
  void operator()(EVP_PKEY_CTX* c) const { EVP_PKEY_CTX_free(c); }
  void operator()(BIGNUM* b) const { BN_free(b); }
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
  void operator()(GENERAL_NAMES* g) const { GENERAL_NAMES_free(g); }
};
template <typename T>
using Ptr = std::unique_ptr<T, Free>;

// `what` failed in OpenSSL: IOError "what: <OpenSSL's first queued error>" (the queue cleared).
Status Error(std::string_view what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown OpenSSL error";
  if (e != 0) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return Status::IOError(std::string(what) + ": " + buf);
}

Ptr<X509> ReadCert(std::string_view pem) {
  Ptr<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Ptr<X509> x(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  ERR_clear_error();
  return x;
}

Ptr<EVP_PKEY> ReadKey(std::string_view pem) {
  Ptr<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Ptr<EVP_PKEY> k(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  ERR_clear_error();
  return k;
}

Ptr<EVP_PKEY> NewKey() {
  Ptr<EVP_PKEY_CTX> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nullptr));
  EVP_PKEY* key = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 ||
      EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx.get(), NID_X9_62_prime256v1) != 1 ||
      EVP_PKEY_keygen(ctx.get(), &key) != 1) {
    return nullptr;
  }
  return Ptr<EVP_PKEY>(key);
}

Status ToPem(X509* x, EVP_PKEY* key, Pem& out) {
  Ptr<BIO> c(BIO_new(BIO_s_mem())), k(BIO_new(BIO_s_mem()));
  if (!c || !k || PEM_write_bio_X509(c.get(), x) != 1 ||
      PEM_write_bio_PrivateKey(k.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Error("cannot encode PEM");
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(c.get(), &data);
  out.cert.assign(data, static_cast<size_t>(n));
  n = BIO_get_mem_data(k.get(), &data);
  out.key.assign(data, static_cast<size_t>(n));
  return Status::Ok();
}

bool AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Ptr<X509_EXTENSION> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

// A certificate skeleton: v3, random serial, validity, subject CN, public key.
Ptr<X509> Skeleton(std::string_view cn, int64_t notBefore, int64_t notAfter, EVP_PKEY* key) {
  Ptr<X509> x(X509_new());
  unsigned char serial[16];
  if (!x || RAND_bytes(serial, sizeof serial) != 1) return nullptr;
  serial[0] &= 0x7f;  // positive
  Ptr<BIGNUM> bn(BN_bin2bn(serial, sizeof serial, nullptr));
  X509_NAME* name = X509_get_subject_name(x.get());
  if (!bn || X509_set_version(x.get(), 2) != 1 ||
      BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(x.get())) == nullptr ||
      ASN1_TIME_set(X509_getm_notBefore(x.get()), static_cast<time_t>(notBefore)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(x.get()), static_cast<time_t>(notAfter)) == nullptr ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.data()),
                                 static_cast<int>(cn.size()), -1, 0) != 1 ||
      X509_set_pubkey(x.get(), key) != 1) {
    return nullptr;
  }
  return x;
}

int64_t ToUnix(const ASN1_TIME* t) {
  struct tm tm {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

}  // namespace

Status GenerateCa(std::string_view commonName, int64_t notBefore, int64_t notAfter, Pem& out) {
  Ptr<EVP_PKEY> key = NewKey();
  if (!key) return Error("cannot generate the CA key");
  Ptr<X509> x = Skeleton(commonName, notBefore, notAfter, key.get());
  if (!x || X509_set_issuer_name(x.get(), X509_get_subject_name(x.get())) != 1 ||
      !AddExt(x.get(), x.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !AddExt(x.get(), x.get(), NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !AddExt(x.get(), x.get(), NID_subject_key_identifier, "hash") ||
      X509_sign(x.get(), key.get(), EVP_sha256()) == 0) {
    return Error("cannot build the CA certificate");
  }
  return ToPem(x.get(), key.get(), out);
}

namespace {

Status Issue(const Pem& ca, std::string_view cn, const std::vector<std::string>& dnsNames,
             const char* extKeyUsage, int64_t notBefore, int64_t notAfter, Pem& out) {
  Ptr<X509> caCert = ReadCert(ca.cert);
  Ptr<EVP_PKEY> caKey = ReadKey(ca.key);
  if (!caCert || !caKey) return Status::InvalidArgument("the CA certificate or key does not parse");
  Ptr<EVP_PKEY> key = NewKey();
  if (!key) return Error("cannot generate the serving key");
  std::string san;
  for (const std::string& n : dnsNames) san += (san.empty() ? "DNS:" : ",DNS:") + n;
  Ptr<X509> x = Skeleton(cn, notBefore, notAfter, key.get());
  if (!x || X509_set_issuer_name(x.get(), X509_get_subject_name(caCert.get())) != 1 ||
      !AddExt(x.get(), caCert.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExt(x.get(), caCert.get(), NID_key_usage, "critical,digitalSignature") ||
      !AddExt(x.get(), caCert.get(), NID_ext_key_usage, extKeyUsage) ||
      (!san.empty() && !AddExt(x.get(), caCert.get(), NID_subject_alt_name, san.c_str())) ||
      !AddExt(x.get(), caCert.get(), NID_authority_key_identifier, "keyid:always") ||
      X509_sign(x.get(), caKey.get(), EVP_sha256()) == 0) {
    return Error("cannot build the certificate");
  }
  return ToPem(x.get(), key.get(), out);
}

}  // namespace

Status IssueServing(const Pem& ca, const std::vector<std::string>& dnsNames, int64_t notBefore,
                    int64_t notAfter, Pem& out) {
  if (dnsNames.empty()) return Status::InvalidArgument("no DNS names for the serving certificate");
  return Issue(ca, dnsNames.front(), dnsNames, "serverAuth", notBefore, notAfter, out);
}

Status IssueClient(const Pem& ca, std::string_view commonName, int64_t notBefore, int64_t notAfter,
                   Pem& out) {
  return Issue(ca, commonName, {}, "clientAuth", notBefore, notAfter, out);
}

CertInfo Inspect(std::string_view cert, std::string_view key) {
  CertInfo info;
  Ptr<X509> x = ReadCert(cert);
  if (!x) return info;
  if (!key.empty()) {
    Ptr<EVP_PKEY> k = ReadKey(key);
    if (!k || X509_check_private_key(x.get(), k.get()) != 1) {
      ERR_clear_error();
      return info;
    }
  }
  info.notBefore = ToUnix(X509_get0_notBefore(x.get()));
  info.notAfter = ToUnix(X509_get0_notAfter(x.get()));
  info.present = info.notAfter > 0;
  return info;
}

bool SignedBy(std::string_view cert, std::string_view caCert) {
  Ptr<X509> x = ReadCert(cert), ca = ReadCert(caCert);
  if (!x || !ca) return false;
  Ptr<EVP_PKEY> caKey(X509_get_pubkey(ca.get()));
  bool ok = caKey && X509_check_issued(ca.get(), x.get()) == X509_V_OK &&
            X509_verify(x.get(), caKey.get()) == 1;
  ERR_clear_error();
  return ok;
}

bool HasDnsNames(std::string_view cert, const std::vector<std::string>& dnsNames) {
  Ptr<X509> x = ReadCert(cert);
  if (!x) return false;
  for (const std::string& n : dnsNames) {
    if (X509_check_host(x.get(), n.data(), n.size(), X509_CHECK_FLAG_NO_WILDCARDS, nullptr) != 1) {
      ERR_clear_error();
      return false;
    }
  }
  return true;
}

std::string Fingerprint(std::string_view cert) {
  Ptr<X509> x = ReadCert(cert);
  if (!x) return {};
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  X509_digest(x.get(), EVP_sha256(), md, &len);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

std::string Base64Encode(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(data.data()),
                          static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

bool Base64Decode(std::string_view text, std::string& out) {
  if (text.size() % 4 != 0) return false;
  out.assign(3 * (text.size() / 4) + 1, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return false;
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return true;
}

}  // namespace iw::certs
