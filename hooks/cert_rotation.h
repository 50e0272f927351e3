// Self-managed certificates (--manage-certificates): the pure decision of what the certificate
// controller does next with the Secret that holds its CA and serving certificate. Times are
// Unix seconds. The controller reads the Secret, describes it as a State, applies the one Action
// returned, writes the Secret (optimistic concurrency: a conflict re-reads) and then makes every
// webhook's caBundle the bundle: the PEMs of ca, nextCa and previous, those present.
//
// CA rotation without a failed request (DESIGN.md §9.7):
//   1. stage: a new CA is added next to the current one (the bundle trusts both); the serving
//      certificate is unchanged;
//   2. promote, once the bundle with both has been in the webhook configurations for `overlap`:
//      the new CA becomes current, the old one is kept as previous (still in the bundle), and a
//      serving certificate is issued by the new CA;
//   3. drop the previous CA `overlap` after the promotion (every pod has reloaded the new
//      serving certificate by then: the kubelet's Secret volume refresh plus the file check).
// A serving certificate is re-issued by the current CA when it is missing, not signed by the
// current CA, lacks a required DNS name, or is within `servingRenewBefore` of its expiry (and a
// new one would last longer).
#pragma once

#include <cstdint>
#include <string>

namespace iw::certs {

struct CertInfo {
  bool present = false;  // parsed, and (for a CA or the serving pair) its key matches
  int64_t notBefore = 0;
  int64_t notAfter = 0;
};

struct State {
  CertInfo ca;                     // ca.crt/ca.key
  CertInfo nextCa;                 // ca-next.crt/ca-next.key (staged)
  CertInfo previous;               // ca-previous.crt (kept in the bundle after a promotion)
  CertInfo serving;                // tls.crt/tls.key
  bool servingSignedByCa = false;  // tls.crt verifies against ca.crt
  bool servingNamesOk = false;     // tls.crt has every DNS name the Service needs
  int64_t stagedAt = 0;            // when nextCa was staged (annotation)
  int64_t promotedAt = 0;          // when previous stopped being current (annotation)
  std::string rotateRequested;     // annotation inplace-webhook.io/rotate-ca (user trigger)
  std::string rotateDone;          // the trigger value a rotation was last started for
  bool bundlePublished = false;    // every webhook's caBundle is this state's bundle
};

struct Policy {
  int64_t caValidity = 10LL * 365 * 24 * 3600;
  int64_t caRenewBefore = 365LL * 24 * 3600;
  int64_t servingValidity = 365LL * 24 * 3600;
  int64_t servingRenewBefore = 30LL * 24 * 3600;
  int64_t overlap = 3600;  // > kubelet Secret refresh + the server's file check
};

enum class Action {
  kNone,
  kCreateCa,       // new CA and serving certificate; next and previous dropped
  kStageNextCa,    // add a new CA as next (stagedAt = now, rotateDone = rotateRequested)
  kPromoteNextCa,  // previous = ca, ca = next, new serving certificate, promotedAt = now
  kDropPrevious,   // remove the previous CA from the Secret (and so from the bundle)
  kIssueServing,   // new serving certificate from the current CA
};

struct Decision {
  Action action = Action::kNone;
  std::string reason;     // for the log line and the Event
  int64_t recheckAt = 0;  // kNone: when something is next due (0: nothing scheduled)
};

// The next step for `state` at `now`; kNone when nothing is due before recheckAt.
Decision Decide(const State& state, const Policy& policy, int64_t now);

// notAfter of a serving certificate issued at `now` by a CA that expires at `caNotAfter`: never
// beyond the CA.
int64_t ServingNotAfter(const Policy& policy, int64_t now, int64_t caNotAfter);

std::string_view ActionName(Action action);

}  // namespace iw::certs
