// Certificates made by server/certs/cert_crypto and TLS handshakes in memory against the webhook's
// TLS context (server/http/tls_certificates): client CA reload, resumption with client
// certificates, session ticket key rotation.
#include <doctest/doctest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "server/certs/cert_crypto.h"
#include "server/http/tls_certificates.h"
#include "server/process/metrics.h"

using namespace iw;

namespace {

constexpr int64_t kNow = 1'800'000'000;

int64_t Now() {
  return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
}

struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
  void operator()(SSL* s) const { SSL_free(s); }
  void operator()(SSL_SESSION* s) const { SSL_SESSION_free(s); }
};

void Write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::path tmp = p;
  tmp += ".tmp";
  std::ofstream(tmp, std::ios::binary) << text;
  std::filesystem::rename(tmp, p);  // a new inode, as the kubelet's symlink swap gives
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "iw-tls-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// A client that trusts `serverCa` and presents `client` (if set).
std::unique_ptr<SSL_CTX, CtxFree> ClientContext(const certs::Pem& serverCa,
                                                const certs::Pem* client, int maxVersion) {
  std::unique_ptr<SSL_CTX, CtxFree> ctx(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_max_proto_version(ctx.get(), maxVersion);
  BIO* bio = BIO_new_mem_buf(serverCa.cert.data(), static_cast<int>(serverCa.cert.size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca);
  X509_free(ca);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (client != nullptr) {
    BIO* cb = BIO_new_mem_buf(client->cert.data(), static_cast<int>(client->cert.size()));
    X509* c = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
    BIO_free(cb);
    BIO* kb = BIO_new_mem_buf(client->key.data(), static_cast<int>(client->key.size()));
    EVP_PKEY* k = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
    BIO_free(kb);
    SSL_CTX_use_certificate(ctx.get(), c);
    SSL_CTX_use_PrivateKey(ctx.get(), k);
    X509_free(c);
    EVP_PKEY_free(k);
  }
  return ctx;
}

struct Outcome {
  bool ok = false;
  bool reused = false;
  std::unique_ptr<SSL_SESSION, CtxFree> session;
};

// One connection over a BIO pair: handshake, one byte from server to client (so the client
// reads TLS 1.3 tickets), the client's session kept for a resumption.
Outcome Connect(SSL_CTX* server, SSL_CTX* client, SSL_SESSION* resume) {
  Outcome out;
  std::unique_ptr<SSL, CtxFree> s(SSL_new(server)), c(SSL_new(client));
  BIO *sb = nullptr, *cb = nullptr;
  BIO_new_bio_pair(&sb, 0, &cb, 0);
  SSL_set_bio(s.get(), sb, sb);
  SSL_set_bio(c.get(), cb, cb);
  SSL_set_accept_state(s.get());
  SSL_set_connect_state(c.get());
  SSL_set_tlsext_host_name(c.get(), "svc.ns.svc");
  SSL_set1_host(c.get(), "svc.ns.svc");
  if (resume != nullptr) SSL_set_session(c.get(), resume);
  bool sDone = false, cDone = false;
  for (int i = 0; i < 50 && !(sDone && cDone); ++i) {
    if (!cDone) {
      int r = SSL_do_handshake(c.get());
      if (r == 1)
        cDone = true;
      else if (SSL_get_error(c.get(), r) != SSL_ERROR_WANT_READ)
        break;
    }
    if (!sDone) {
      int r = SSL_do_handshake(s.get());
      if (r == 1)
        sDone = true;
      else if (SSL_get_error(s.get(), r) != SSL_ERROR_WANT_READ)
        break;
    }
  }
  ERR_clear_error();
  if (!(sDone && cDone)) return out;
  char byte = 'x';
  if (SSL_write(s.get(), &byte, 1) != 1) return out;
  char got = 0;
  if (SSL_read(c.get(), &got, 1) != 1 || got != 'x') return out;
  out.ok = true;
  out.reused = SSL_session_reused(c.get()) == 1;
  out.session.reset(SSL_get1_session(c.get()));
  // A clean close: OpenSSL marks the session of a connection freed without close_notify as not
  // resumable.
  SSL_shutdown(c.get());
  SSL_shutdown(s.get());
  return out;
}

struct Fixture {
  TempDir dir;
  certs::Pem serverCa, serving, clientCaA, clientCaB, clientA, clientB;
  metrics::Registry metrics;
  std::unique_ptr<tls::CertificateStore> store;
  std::unique_ptr<SSL_CTX, CtxFree> server;

  explicit Fixture(bool clientAuth) {
    const int64_t now = Now();
    REQUIRE(certs::GenerateCa("server CA", now - 60, now + 3600, serverCa).ok());
    REQUIRE(certs::IssueServing(serverCa, {"svc.ns.svc"}, now - 60, now + 3600, serving).ok());
    REQUIRE(certs::GenerateCa("client CA A", now - 60, now + 3600, clientCaA).ok());
    REQUIRE(certs::GenerateCa("client CA B", now - 60, now + 3600, clientCaB).ok());
    REQUIRE(certs::IssueClient(clientCaA, "apiserver", now - 60, now + 3600, clientA).ok());
    REQUIRE(certs::IssueClient(clientCaB, "apiserver", now - 60, now + 3600, clientB).ok());
    Write(dir.path / "tls.crt", serving.cert);
    Write(dir.path / "tls.key", serving.key);
    Write(dir.path / "client-ca.crt", clientCaA.cert);
    store = std::make_unique<tls::CertificateStore>((dir.path / "tls.crt").string(),
                                                    (dir.path / "tls.key").string(), metrics);
    REQUIRE(store->LoadInitial().ok());
    server.reset(SSL_CTX_new(TLS_server_method()));
    REQUIRE(store
                ->ConfigureContext(*server, clientAuth ? (dir.path / "client-ca.crt").string() : "",
                                   std::chrono::hours(1))
                .ok());
  }
};

}  // namespace

TEST_CASE("cert_crypto: a CA, a serving certificate it signs, what Inspect reads back") {
  certs::Pem ca, other, serving;
  REQUIRE(certs::GenerateCa("test CA", kNow - 60, kNow + 3600, ca).ok());
  REQUIRE(certs::GenerateCa("other CA", kNow - 60, kNow + 3600, other).ok());
  REQUIRE(certs::IssueServing(ca, {"a.ns.svc", "a.ns.svc.cluster.local"}, kNow - 60, kNow + 600,
                              serving)
              .ok());
  certs::CertInfo info = certs::Inspect(serving.cert, serving.key);
  CHECK(info.present);
  CHECK(info.notBefore == kNow - 60);
  CHECK(info.notAfter == kNow + 600);
  CHECK_FALSE(certs::Inspect(serving.cert, ca.key).present);  // key of another certificate
  CHECK_FALSE(certs::Inspect("garbage", "").present);
  CHECK(certs::SignedBy(serving.cert, ca.cert));
  CHECK_FALSE(certs::SignedBy(serving.cert, other.cert));
  CHECK(certs::HasDnsNames(serving.cert, {"a.ns.svc", "a.ns.svc.cluster.local"}));
  CHECK_FALSE(certs::HasDnsNames(serving.cert, {"b.ns.svc"}));
  std::string decoded;
  CHECK(certs::Base64Decode(certs::Base64Encode(serving.key), decoded));
  CHECK(decoded == serving.key);
  CHECK(certs::Base64Decode(certs::Base64Encode("ab"), decoded));
  CHECK(decoded == "ab");
  CHECK_FALSE(certs::Base64Decode("abc", decoded));

  certs::Pem none;
  Status noNames = certs::IssueServing(ca, {}, kNow - 60, kNow + 600, none);
  CHECK(noNames.code() == Status::Code::kInvalidArgument);
  CHECK(noNames.message() == "no DNS names for the serving certificate");
  Status badCa = certs::IssueServing(certs::Pem{"garbage", "garbage"}, {"a.ns.svc"}, kNow - 60,
                                     kNow + 600, none);
  CHECK(badCa.code() == Status::Code::kInvalidArgument);
  CHECK(badCa.message() == "the CA certificate or key does not parse");
  CHECK(none.cert.empty());  // untouched on failure
}

TEST_CASE("TLS: resumption with a client certificate, TLS 1.2 and 1.3") {
  Fixture f(true);
  for (int version : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    CAPTURE(version);
    auto client = ClientContext(f.serverCa, &f.clientA, version);
    Outcome first = Connect(f.server.get(), client.get(), nullptr);
    REQUIRE(first.ok);
    CHECK_FALSE(first.reused);
    Outcome again = Connect(f.server.get(), client.get(), first.session.get());
    REQUIRE(again.ok);
    CHECK(again.reused);
  }
  auto noCert = ClientContext(f.serverCa, nullptr, TLS1_3_VERSION);
  CHECK_FALSE(Connect(f.server.get(), noCert.get(), nullptr).ok);
}

TEST_CASE("TLS: session tickets resume after one key rotation, not after two") {
  Fixture f(false);
  auto client = ClientContext(f.serverCa, nullptr, TLS1_3_VERSION);
  Outcome first = Connect(f.server.get(), client.get(), nullptr);
  REQUIRE(first.ok);
  f.store->RotateTicketKeys();
  Outcome once = Connect(f.server.get(), client.get(), first.session.get());
  REQUIRE(once.ok);
  CHECK(once.reused);  // the previous key still decrypts
  f.store->RotateTicketKeys();
  f.store->RotateTicketKeys();
  Outcome twice = Connect(f.server.get(), client.get(), first.session.get());
  REQUIRE(twice.ok);
  CHECK_FALSE(twice.reused);  // the key is gone: a full handshake
  // The ticket issued by the connection after one rotation was renewed under a newer key.
  Outcome renewed = Connect(f.server.get(), client.get(), twice.session.get());
  CHECK(renewed.reused);
}

TEST_CASE("TLS: the client CA reloads when its file changes; a broken file keeps the last one") {
  Fixture f(true);
  auto clientA = ClientContext(f.serverCa, &f.clientA, TLS1_3_VERSION);
  auto clientB = ClientContext(f.serverCa, &f.clientB, TLS1_3_VERSION);
  CHECK(Connect(f.server.get(), clientA.get(), nullptr).ok);
  CHECK_FALSE(Connect(f.server.get(), clientB.get(), nullptr).ok);
  Write(f.dir.path / "client-ca.crt", f.clientCaB.cert);
  CHECK(f.store->ReloadIfChanged());
  CHECK_FALSE(Connect(f.server.get(), clientA.get(), nullptr).ok);
  CHECK(Connect(f.server.get(), clientB.get(), nullptr).ok);
  Write(f.dir.path / "client-ca.crt", "not a certificate");
  CHECK_FALSE(f.store->ReloadIfChanged());
  CHECK(Connect(f.server.get(), clientB.get(), nullptr).ok);
  // Both CAs in one file (an overlap while the API server's client certificate changes CA).
  Write(f.dir.path / "client-ca.crt", f.clientCaA.cert + f.clientCaB.cert);
  CHECK(f.store->ReloadIfChanged());
  CHECK(Connect(f.server.get(), clientA.get(), nullptr).ok);
  CHECK(Connect(f.server.get(), clientB.get(), nullptr).ok);
}

TEST_CASE("TLS: started without the certificate files, serving once they appear") {
  TempDir dir;
  metrics::Registry metrics;
  tls::CertificateStore store((dir.path / "tls.crt").string(), (dir.path / "tls.key").string(),
                              metrics);
  Status missing = store.LoadInitial();  // by default missing files are an error
  CHECK(missing.code() == Status::Code::kIOError);
  CHECK(missing.message() == "certificate file: cannot read " + (dir.path / "tls.crt").string() +
                                 ": No such file or directory");
  CHECK(store.LoadInitial(true).ok());
  CHECK_FALSE(store.HasCertificate());
  std::unique_ptr<SSL_CTX, CtxFree> server(SSL_CTX_new(TLS_server_method()));
  REQUIRE(store.ConfigureContext(*server, "").ok());
  const int64_t now = Now();
  certs::Pem ca, serving;
  REQUIRE(certs::GenerateCa("CA", now - 60, now + 3600, ca).ok());
  REQUIRE(certs::IssueServing(ca, {"svc.ns.svc"}, now - 60, now + 3600, serving).ok());
  auto client = ClientContext(ca, nullptr, TLS1_3_VERSION);
  CHECK_FALSE(Connect(server.get(), client.get(), nullptr).ok);
  Write(dir.path / "tls.key", serving.key);
  Write(dir.path / "tls.crt", serving.cert);
  CHECK(store.ReloadIfChanged());
  CHECK(store.HasCertificate());
  CHECK(Connect(server.get(), client.get(), nullptr).ok);
}
