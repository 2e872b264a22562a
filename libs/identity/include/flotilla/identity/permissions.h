// flotilla/identity/permissions.h
//
// Who may publish and subscribe to what on the hub's NATS account, as data: one function per role, built from the
// subjects, streams, buckets and consumers in docs/pipeline.md ("Identities and permissions" lists the rules and
// what cannot be restricted yet). A role becomes the pub/sub allow and deny lists of a user JWT (jwt.h).
//
// nats-server checks these per message a client publishes and per subscription it makes; the server's own
// deliveries (a push consumer's deliver subject, replies of the JetStream API to the requester's inbox) are not
// checked against the receiver's publish list. Each restricted role has its own inbox prefix
// (`natsOptions_SetCustomInboxPrefix`), so no two identities can subscribe to each other's replies.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"

namespace flotilla::identity {

struct Permissions {
  std::vector<std::string> publish_allow;  //!< empty = nothing may be published
  std::vector<std::string> publish_deny;
  std::vector<std::string> subscribe_allow;  //!< empty = nothing may be subscribed to
  std::vector<std::string> subscribe_deny;
  //! May publish one reply to the reply subject of each request it receives (responders: the scheduler).
  bool allow_responses = false;
};

//! A named role: its permissions, and the inbox prefix its clients must set (every reply, JetStream API answer
//! and fetched message arrives under it).
struct Role {
  std::string name;          //!< "poller", "agent", ...; also the JWT name's first part
  std::string subject;       //!< the cluster or token the role is bound to ("" for hub roles)
  std::string inbox_prefix;  //!< "_INBOX" for trusted hub services and admin; a private prefix otherwise
  Permissions permissions;
};

//! The roles `roleFor` knows, in the order help lists them.
const std::vector<std::string_view>& roleNames();

Role pollerRole();
Role bundlerRole();
Role schedulerRole();
//! The gateway (Kubernetes mode): a hub service that writes the specs of the CRs it mirrors (gitrepos, clusters
//! group.*, spec.* and deregistered.*) and reads the rest.
Role gatewayRole();
//! Everything: the operator's CLI.
Role adminRole();
//! Reads KV, streams and object stores; writes, deletes and stream/consumer administration are denied.
Role readonlyRole();
//! One downstream cluster's agent: its own deploy consumer, its own status and registration subjects, manifests.
//! `cluster` must be a Kubernetes name (isDns1123Subdomain).
Result<Role> agentRole(std::string_view cluster);
//! The cluster placeholder of agentTemplatePermissions: nats-server puts the value of the user's
//! "flotilla-subject:<cluster>" tag there.
inline constexpr std::string_view kAgentTemplateCluster = "{{tag(flotilla-subject)}}";
//! agentRole's permissions as the template of a scoped signing key (ScopedSigningKey, the registrar's): right for
//! clusters whose name is its own escaped token (DNS-1123 labels, the only names the registrar enrolls).
Permissions agentTemplatePermissions();
//! A registration token: may only send a registration request for `token_id` and receive the reply.
//! `token_id` is [a-z0-9-], 1..63 characters.
Result<Role> registrationRole(std::string_view token_id);

//! The role by name ("agent" needs `subject` = the cluster, "registration" the token id; the others none).
//! kInvalid for an unknown role, a missing or unexpected subject.
Result<Role> roleFor(std::string_view name, std::string_view subject = {});

//! The subject an agent registers on: flotilla.register.<cluster> (escaped).
std::string agentRegisterSubject(std::string_view cluster);
//! Where the hub asks a running agent to register again (its cluster record is gone, e.g. the hub's state was lost):
//! _INBOX.agent-<escaped cluster>.reregister, under the inbox prefix only that agent may subscribe to.
std::string agentReregisterSubject(std::string_view cluster);
//! The subject a registration token requests credentials on: flotilla.registration.<token id>.
std::string registrationRequestSubject(std::string_view token_id);
//! The durable deploy consumer of a cluster: agent-<escaped cluster> (services/agent uses the same name).
std::string agentConsumerName(std::string_view cluster);

}  // namespace flotilla::identity
